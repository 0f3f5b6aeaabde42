"""A kernel uploaded with its own reference still gets a fraction of peak (issue 20): from FLOP and byte counts
given on the upload form, or counted from the reference (its bytes measured, FLOPs not counted), and the
problem page shows which."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from benchmark.models import Problem
from benchmark.services import kernels as kernel_services
from engine.evaluator.sizing import ReferenceCheck

REFERENCE = "import numpy as np\n\ndef get_inputs():\n    return [np.ones((128, 512), np.float32)]\n\ndef forward(x):\n    return x\n"
KERNEL = "import neuronxcc.nki as nki\n\n@nki.jit\ndef kernel(x):\n    return x\n"


def _upload(client, engineer, **counts):
    client.force_login(engineer)
    return client.post("/kernels/upload/", {
        "reference_file": SimpleUploadedFile("double.py", REFERENCE.encode()), "platform": "trn1",
        "source": KERNEL, **{name: str(value) for name, value in counts.items()},
    })


def test_counts_given_on_the_form_make_the_peak_and_are_named(client, engineer, fake_pipeline, monkeypatch):
    monkeypatch.setattr(kernel_services, "check_reference", lambda source: ReferenceCheck(io_bytes=512 * 1024))
    response = _upload(client, engineer, vector_flops=65536, matmul_flops=0, hbm_bytes=524288)
    assert response.status_code == 302, response.content.decode()[-2000:]
    problem = Problem.objects.get(suite="custom")
    assert problem.peak_counts == (65536, 0, 524288) and problem.peak_counts_method == "given on the upload"
    assert fake_pipeline.calls[-1]["peak_counts"] == (65536, 0, 524288)
    page = client.get(problem.get_absolute_url()).content.decode()
    assert "Counts:</strong> given on the upload" in page


def test_without_counts_the_bytes_are_measured_and_the_method_says_so(client, engineer, fake_pipeline, monkeypatch):
    monkeypatch.setattr(kernel_services, "check_reference", lambda source: ReferenceCheck(io_bytes=512 * 1024))
    assert _upload(client, engineer).status_code == 302
    problem = Problem.objects.get(suite="custom")
    assert problem.peak_counts == (0, 0, 512 * 1024) and problem.has_peak_counts
    assert "HBM roofline" in problem.peak_counts_method
    assert fake_pipeline.calls[-1]["peak_counts"] == (0, 0, 512 * 1024)


def test_counts_need_all_three_and_only_with_a_reference(client, engineer, silu_mini):
    html = _upload(client, engineer, vector_flops=1).content.decode()
    assert "give all three counts" in html
    client.force_login(engineer)
    html = client.post("/kernels/upload/", {"problem": str(silu_mini.pk), "platform": "trn1", "source": KERNEL,
                                            "vector_flops": "1", "matmul_flops": "1", "hbm_bytes": "1"}).content.decode()
    assert "a built-in problem has its own" in html
