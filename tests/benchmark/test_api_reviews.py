"""GET /api/reviews, POST /api/evaluations/{id}/accept and /reject: curators only, who and when recorded."""

from __future__ import annotations

import pytest

from benchmark.models import ErrorKind, Evaluation, EvaluationStatus, Kernel, Problem, Review
from benchmark.services import source_sha256

pytestmark = pytest.mark.django_db


@pytest.fixture
def held(db) -> Evaluation:
    problem = Problem.objects.create(slug="double", case="mini", reference_source="# ref")
    kernel = Kernel.objects.create(problem=problem, source="fast", sha256=source_sha256("fast"))
    return Evaluation.objects.create(
        kernel=kernel, backend_version="v1", status=EvaluationStatus.DONE, correct=True, latency_ms=0.01,
        error_kind=ErrorKind.SUSPICIOUS, error_message="peak fraction 4 > 1", review=Review.HELD,
        held_reason="peak fraction 4 > 1",
    )


def test_a_curator_lists_the_held_results(client, curator, bearer, held):
    response = client.get("/api/reviews", headers=bearer(curator))
    assert response.status_code == 200
    [item] = response.json()
    assert item["id"] == held.pk and item["ranked"] is False
    assert item["review"]["state"] == "held" and item["review"]["reason"] == "peak fraction 4 > 1"
    assert item["review"]["reviewed_by"] is None


@pytest.mark.parametrize("path", ["/api/reviews", "accept", "reject"])
def test_engineers_are_refused_and_anonymous_callers_unauthorised(client, engineer, bearer, held, path):
    def call(**headers):
        if path.startswith("/"):
            return client.get(path, **headers)
        return client.post(f"/api/evaluations/{held.pk}/{path}", {}, content_type="application/json", **headers)

    assert call().status_code == 401
    response = call(headers=bearer(engineer))
    assert response.status_code == 403 and "curator" in response.json()["detail"]
    held.refresh_from_db()
    assert held.review == Review.HELD


def test_accepting_records_who_and_when_and_the_result_then_counts(client, curator, bearer, held):
    response = client.post(f"/api/evaluations/{held.pk}/accept", {"note": "trace checked"},
                           content_type="application/json", headers=bearer(curator))
    assert response.status_code == 200
    body = response.json()
    assert body["ranked"] is True and body["review"]["state"] == "accepted"
    assert body["review"]["reviewed_by"] == curator.username and body["review"]["reviewed_at"]
    assert body["review"]["note"] == "trace checked"
    assert client.get("/api/reviews", headers=bearer(curator)).json() == []
    # Anyone reading the evaluation sees the decision.
    assert client.get(f"/api/evaluations/{held.pk}").json()["review"]["state"] == "accepted"


def test_rejecting_keeps_it_out_for_good(client, curator, bearer, held):
    response = client.post(f"/api/evaluations/{held.pk}/reject", {}, content_type="application/json",
                           headers=bearer(curator))
    assert response.status_code == 200 and response.json()["ranked"] is False
    held.refresh_from_db()
    assert held.review == Review.REJECTED and held.reviewed_by == curator


def test_an_evaluation_never_held_cannot_be_accepted_and_an_unknown_one_is_404(client, curator, bearer, held):
    Evaluation.objects.filter(pk=held.pk).update(review="", error_kind="")
    response = client.post(f"/api/evaluations/{held.pk}/accept", {}, content_type="application/json",
                           headers=bearer(curator))
    assert response.status_code == 400 and "never held" in response.json()["detail"]
    response = client.post("/api/evaluations/999999/accept", {}, content_type="application/json",
                           headers=bearer(curator))
    assert response.status_code == 404
