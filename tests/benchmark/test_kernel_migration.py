"""A legacy neuronxcc.nki kernel migrated to NKI 0.6 from its page and the API: a new kernel, evaluated like
an upload; a construct that needs a person is refused naming it."""

from __future__ import annotations

from benchmark import services
from benchmark.models import Kernel
from engine.platforms.nki.generations import CURRENT

MASKED = """import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def kernel(x):
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    tile = nl.load(x[0:128, 0:64], mask=(i_p < 100))
    nl.store(out, value=tile)
    return out
"""


def test_the_migrate_button_makes_an_nki_0_6_kernel_that_is_evaluated_and_shows_what_changed(
        client, silu_mini, engineer):
    legacy = silu_mini.baseline_kernel
    client.force_login(engineer)
    assert 'data-testid="migrate-form"' in client.get(legacy.get_absolute_url()).content.decode()

    response = client.post(f"/kernels/{legacy.pk}/migrate/")
    migrated = Kernel.objects.exclude(pk=legacy.pk).get(parent=legacy)
    assert response.status_code == 302 and response.url.startswith(migrated.get_absolute_url())
    assert migrated.nki_generation == CURRENT and "neuronxcc" not in migrated.source
    evaluation = services.kernel_evaluations(migrated)[0]
    assert evaluation.correct is True  # the same reference, the same inputs as the legacy kernel

    page = client.get(response.url).content.decode()
    assert 'data-testid="migration"' in page and legacy.display_name in page
    assert "import nki.language as nl" in page and "New namespace, new APIs" in page
    assert 'data-testid="migrate-form"' not in page  # nothing left to migrate


def test_the_api_migrates_once_and_lists_each_change_with_its_guide_section(client, silu_mini, engineer, bearer):
    legacy = silu_mini.baseline_kernel
    url = f"/api/kernels/{legacy.pk}/migrate"
    first = client.post(url, {"wait": True}, content_type="application/json", headers=bearer(engineer))
    assert first.status_code == 201, first.content
    body = first.json()
    assert body["kernel"]["nki_generation"] == "current" and body["kernel"]["parent_id"] == legacy.pk
    assert body["evaluation"]["correct"] is True
    assert {"line": 7, "what": "import nki (was import neuronxcc.nki as nki)",
            "guide": "New namespace, new APIs"} in body["changes"]
    again = client.post(url, {"evaluate": False}, content_type="application/json", headers=bearer(engineer))
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["kernel"]["id"] == body["kernel"]["id"]


def test_a_kernel_that_needs_a_person_is_refused_naming_the_construct(client, silu_mini, engineer, bearer):
    kernel, _, _ = services.upload_kernel(engineer, kernel_source=MASKED, problem=silu_mini, evaluate=False)
    response = client.post(f"/api/kernels/{kernel.pk}/migrate", {}, content_type="application/json",
                           headers=bearer(engineer))
    assert response.status_code == 400
    assert "cannot be migrated mechanically: line 8: nl.arange" in response.json()["detail"]
    assert Kernel.objects.filter(parent=kernel).count() == 0

    client.force_login(engineer)
    page = client.post(f"/kernels/{kernel.pk}/migrate/", follow=True).content.decode()
    assert "line 8: nl.arange: nki.language has no &#x27;arange&#x27; in NKI 0.6" in page


def test_a_current_kernel_has_nothing_to_migrate(client, silu_mini, engineer, bearer):
    source = (silu_mini.baseline_kernel.source.replace("import neuronxcc.nki.language as nl", "import nki.language as nl")
              .replace("import neuronxcc.nki as nki", "import nki"))
    kernel, _, _ = services.upload_kernel(engineer, kernel_source=source, problem=silu_mini, evaluate=False)
    response = client.post(f"/api/kernels/{kernel.pk}/migrate", {}, content_type="application/json",
                           headers=bearer(engineer))
    assert response.status_code == 400 and "nothing to migrate" in response.json()["detail"]
