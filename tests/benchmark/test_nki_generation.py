"""Every NKI kernel says which generation it is written in; a legacy one says that current SDKs refuse it."""

from __future__ import annotations

from benchmark import services
from engine.platforms.nki.generations import CURRENT, LEGACY, kernel_generation


def _current(source: str) -> str:
    return (source.replace("import neuronxcc.nki.language as nl", "import nki.language as nl")
            .replace("import neuronxcc.nki as nki", "import nki"))


def test_a_legacy_kernel_is_labelled_and_warned_about_on_its_page_and_in_the_api(
        client, fake_pipeline, silu_mini, engineer, bearer):
    kernel = silu_mini.baseline_kernel  # NKIBench's baselines import neuronxcc.nki
    page = client.get(kernel.get_absolute_url()).content.decode()
    assert 'data-testid="nki-generation">legacy: neuronxcc.nki<' in page
    assert "Neuron SDK 2.28 and later refuse it" in page
    body = client.get(f"/api/kernels/{kernel.pk}", headers=bearer(engineer)).json()
    assert body["nki_generation"] == LEGACY


def test_a_kernel_in_the_nki_package_is_current_and_carries_no_warning(
        client, fake_pipeline, silu_mini, engineer, bearer):
    kernel, _, _ = services.upload_kernel(engineer, kernel_source=_current(silu_mini.baseline_kernel.source),
                                       problem=silu_mini)
    client.force_login(engineer)
    page = client.get(kernel.get_absolute_url()).content.decode()
    assert 'data-testid="nki-generation">current: the nki package<' in page
    assert 'data-testid="legacy-nki-note"' not in page
    assert client.get(f"/api/kernels/{kernel.pk}", headers=bearer(engineer)).json()["nki_generation"] == CURRENT


def test_the_generation_is_read_from_every_form_of_import():
    assert kernel_generation("from neuronxcc import nki\n") == LEGACY
    assert kernel_generation("from neuronxcc.nki import language as nl\n") == LEGACY
    assert kernel_generation("import nki.isa as nisa\nimport neuronxcc.nki.language as nl\n") == LEGACY  # mixed
    assert kernel_generation("from nki import language as nl\n") == CURRENT
    assert kernel_generation("import numpy as np\n") is None
    assert kernel_generation("def broken(:\n") is None
