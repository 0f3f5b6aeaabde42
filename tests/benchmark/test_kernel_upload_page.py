"""The upload page: engineers give a file or pasted source for a problem (or their own reference)."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmark.models import Kernel, Problem
from tests.benchmark.test_api_problems import REFERENCE

URL = reverse("benchmark:kernel_upload")


def test_anonymous_visitors_are_sent_to_log_in(client, db):
    response = client.get(URL)
    assert response.status_code == 302 and "/accounts/login" in response["Location"]


def test_a_viewer_without_the_engineer_role_is_refused(client, viewer, db):
    client.force_login(viewer)
    assert client.get(URL).status_code == 403


def test_an_engineer_uploads_a_file_and_lands_on_its_page_with_the_result(client, engineer, fake_pipeline, silu_mini):
    client.force_login(engineer)
    upload = SimpleUploadedFile("my_silu.py", (silu_mini.baseline_kernel.source + "\n# mine\n").encode())
    response = client.post(URL, {"problem": silu_mini.pk, "platform": "trn2", "kernel_file": upload}, follow=True)
    kernel = Kernel.objects.get(name="my_silu.py")
    assert response.redirect_chain[-1][0].startswith(kernel.get_absolute_url())
    assert kernel.author == engineer and kernel.origin == "uploaded"
    assert response.context["evaluation"].platform == "trn2"
    assert response.context["evaluation"].correct


def test_an_engineer_pastes_source(client, engineer, fake_pipeline, silu_mini):
    client.force_login(engineer)
    source = silu_mini.baseline_kernel.source + "\n# pasted\n"
    client.post(URL, {"problem": silu_mini.pk, "platform": "trn1", "source": source})
    assert Kernel.objects.filter(source=source, problem=silu_mini).exists()


def test_an_upload_with_neither_file_nor_source_is_refused_with_a_message(client, engineer, silu_mini):
    client.force_login(engineer)
    response = client.post(URL, {"problem": silu_mini.pk, "platform": "trn1"})
    assert response.status_code == 200
    assert "upload a kernel file or paste its source" in response.content.decode()
    assert not Kernel.objects.filter(origin="uploaded").exists()


def test_a_binary_file_is_refused_as_not_text(client, engineer, silu_mini):
    client.force_login(engineer)
    upload = SimpleUploadedFile("kernel.py", b"\xff\xfe\x00binary")
    response = client.post(URL, {"problem": silu_mini.pk, "platform": "trn1", "kernel_file": upload})
    assert "not UTF-8 text" in response.content.decode()


def test_an_engineer_uploads_a_kernel_with_their_own_reference(client, engineer, fake_pipeline, db):
    client.force_login(engineer)
    reference = SimpleUploadedFile("double.py", REFERENCE.encode())
    client.post(URL, {"reference_file": reference, "platform": "trn1", "source": "def kernel(x):\n    return x * 2\n"})
    problem = Problem.objects.get(suite="custom")
    assert problem.owner == engineer and problem.visibility == "private"
    assert problem.kernels.get().evaluations.get().correct
    # No counts on the form: the reference's bytes are measured and FLOPs not counted (the HBM roofline).
    assert fake_pipeline.calls[0]["peak_counts"] == (0, 0, problem.hbm_bytes) and problem.hbm_bytes
