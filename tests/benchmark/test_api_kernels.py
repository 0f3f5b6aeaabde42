"""POST /api/kernels (engineers), GET /api/kernels/{id}, evaluations: create, dedupe, permissions."""

from __future__ import annotations

import pytest

from benchmark.models import Kernel


@pytest.fixture
def source(silu_mini):
    return silu_mini.baseline_kernel.source + "\n# uploaded through the API\n"


def test_anonymous_callers_cannot_create_kernels(client, silu_mini, source):
    response = client.post("/api/kernels", {"problem": "silu:mini", "source": source}, content_type="application/json")
    assert response.status_code == 401
    assert not Kernel.objects.filter(source=source).exists()


def test_a_signed_in_viewer_without_the_engineer_role_is_refused(client, viewer, bearer, silu_mini, source):
    response = client.post(
        "/api/kernels", {"problem": "silu:mini", "source": source}, content_type="application/json",
        headers=bearer(viewer),
    )
    assert response.status_code == 403
    assert "engineer" in response.json()["detail"]


def test_an_engineer_creates_a_kernel_and_gets_its_evaluation(client, engineer, bearer, fake_pipeline, source):
    response = client.post(
        "/api/kernels", {"problem": "silu:mini", "source": source, "name": "mine.py"},
        content_type="application/json", headers=bearer(engineer),
    )
    assert response.status_code == 201
    body = response.json()
    assert body["created"] is True
    assert body["kernel"]["author"] == "erin" and body["kernel"]["origin"] == "uploaded"
    assert body["evaluation"]["status"] == "done" and body["evaluation"]["correct"] is True
    assert body["evaluation"]["simulated"] is True


def test_uploading_the_same_source_again_answers_200_with_the_same_kernel(client, engineer, bearer, fake_pipeline, source):
    payload = {"problem": "silu:mini", "source": source}
    first = client.post("/api/kernels", payload, content_type="application/json", headers=bearer(engineer)).json()
    again = client.post("/api/kernels", payload, content_type="application/json", headers=bearer(engineer))
    assert again.status_code == 200
    assert again.json()["created"] is False
    assert again.json()["kernel"]["id"] == first["kernel"]["id"]
    assert len(fake_pipeline.calls) == 1


def test_a_kernel_needs_a_problem_that_exists(client, engineer, bearer, source, nkibench):
    response = client.post(
        "/api/kernels", {"problem": "silu:huge", "source": source}, content_type="application/json",
        headers=bearer(engineer),
    )
    assert response.status_code == 404
    assert "cases of silu" in response.json()["detail"]


def test_a_kernel_over_the_size_limit_is_refused_before_it_is_stored(client, engineer, bearer, nkibench):
    huge = "# padding\n" * 30000
    response = client.post(
        "/api/kernels", {"problem": "silu:mini", "source": huge}, content_type="application/json",
        headers=bearer(engineer),
    )
    assert response.status_code == 400
    assert "limit is 256 KiB" in response.json()["detail"]
    assert not Kernel.objects.filter(origin="uploaded").exists()


def test_anyone_reads_a_kernel_with_its_evaluations(client, engineer, bearer, fake_pipeline, source):
    created = client.post(
        "/api/kernels", {"problem": "silu:mini", "source": source}, content_type="application/json",
        headers=bearer(engineer),
    ).json()
    response = client.get(f"/api/kernels/{created['kernel']['id']}")
    assert response.status_code == 200
    assert response.json()["source"] == source
    assert [e["id"] for e in response.json()["evaluations"]] == [created["evaluation"]["id"]]
    evaluation = client.get(f"/api/evaluations/{created['evaluation']['id']}").json()
    assert evaluation["latency_ms"] is not None and evaluation["profile"]["hbm_read_bytes"] == 1024


def test_an_engineer_requests_an_evaluation_on_another_platform(client, engineer, bearer, fake_pipeline, silu_mini):
    kernel_id = silu_mini.baseline_kernel_id
    response = client.post(
        f"/api/kernels/{kernel_id}/evaluations", {"platform": "trn2"}, content_type="application/json",
        headers=bearer(engineer),
    )
    assert response.status_code == 200
    assert response.json()["platform"] == "trn2"
    again = client.post(
        f"/api/kernels/{kernel_id}/evaluations", {"platform": "trn2"}, content_type="application/json",
        headers=bearer(engineer),
    )
    assert again.json()["id"] == response.json()["id"]
    assert len(fake_pipeline.calls) == 1


def test_an_unknown_platform_is_a_400_listing_the_platforms(client, engineer, bearer, fake_pipeline, silu_mini):
    response = client.post(
        f"/api/kernels/{silu_mini.baseline_kernel_id}/evaluations", {"platform": "trn9"},
        content_type="application/json", headers=bearer(engineer),
    )
    assert response.status_code == 400
    assert "trn1, trn2" in response.json()["detail"]


def test_anonymous_callers_cannot_request_evaluations(client, silu_mini, fake_pipeline):
    response = client.post(
        f"/api/kernels/{silu_mini.baseline_kernel_id}/evaluations", {"platform": "trn1"},
        content_type="application/json",
    )
    assert response.status_code == 401
    assert fake_pipeline.calls == []


def test_a_kernel_stored_without_evaluating_has_no_evaluation(client, engineer, bearer, fake_pipeline, source):
    response = client.post(
        "/api/kernels", {"problem": "silu:mini", "source": source, "evaluate": False},
        content_type="application/json", headers=bearer(engineer),
    )
    assert response.status_code == 201
    assert response.json()["evaluation"] is None and response.json()["kernel"]["evaluations"] == []
    assert fake_pipeline.calls == []


def test_a_kernel_needs_exactly_one_of_problem_and_reference(client, engineer, bearer, silu_mini, source):
    for payload in ({"source": source}, {"problem": "silu:mini", "reference_source": "# ref", "source": source}):
        response = client.post("/api/kernels", payload, content_type="application/json", headers=bearer(engineer))
        assert response.status_code == 400
        assert response.json()["detail"].startswith("give either 'problem'")
    assert not Kernel.objects.filter(source=source).exists()
