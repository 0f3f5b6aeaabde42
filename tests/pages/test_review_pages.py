"""Curators review held results: the queue page, accept and reject, and what counts afterwards."""

from __future__ import annotations

import pytest

from benchmark import services
from benchmark.leaderboard import build_board
from benchmark.models import Backend, ErrorKind, Evaluation, EvaluationStatus, Kernel, Problem, Review
from benchmark.services import source_sha256

pytestmark = pytest.mark.django_db

REASON = "peak fraction 3.2 > 1: faster than the hardware allows"


def _kernel(problem: Problem, source: str) -> Kernel:
    return Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source), name=source)


def _evaluate(kernel: Kernel, latency: float, *, review: str = "", error_kind: str = "") -> Evaluation:
    """A finished simulator result under the current performance model (what the problem page shows)."""
    return Evaluation.objects.create(
        kernel=kernel, platform="trn1", backend=Backend.SIMULATOR,
        backend_version=services.backend_version(Backend.SIMULATOR), status=EvaluationStatus.DONE,
        correct=True, latency_ms=latency, peak_fraction=0.01 / latency, error_kind=error_kind,
        error_message=REASON if error_kind else "", review=review, held_reason=REASON if review else "",
    )


@pytest.fixture
def held(problem: Problem) -> Evaluation:
    """The baseline at 10 ms, and a kernel at 0.5 ms that the pipeline flagged and holds for review."""
    _evaluate(problem.baseline_kernel, 10.0)
    return _evaluate(_kernel(problem, "too fast"), 0.5, review=Review.HELD, error_kind=ErrorKind.SUSPICIOUS)


def test_a_curator_sees_the_held_result_in_the_queue_with_its_reason(login, curator, held) -> None:
    html = login(curator).get("/reviews/").content.decode()
    assert f'id="review-{held.pk}"' in html and "too fast" in html and "faster than the hardware allows" in html
    assert f"/evaluations/{held.pk}/accept/" in html and f"/evaluations/{held.pk}/reject/" in html


def test_engineers_get_403_and_visitors_the_login_page(client, login, engineer, held) -> None:
    assert client.get("/reviews/").status_code == 302
    assert client.post(f"/evaluations/{held.pk}/accept/").status_code == 302
    client = login(engineer)
    assert client.get("/reviews/").status_code == 403
    assert client.post(f"/evaluations/{held.pk}/accept/").status_code == 403
    held.refresh_from_db()
    assert held.review == Review.HELD and held.reviewed_by is None


def test_a_held_result_is_ranked_nowhere_until_a_curator_accepts_it(client, login, curator, problem, held) -> None:
    assert build_board("trn1", "mini").rows[0].simulated.best.kernel == problem.baseline_kernel
    assert services.best_evaluation(problem).kernel == problem.baseline_kernel
    page = client.get(problem.get_absolute_url()).content.decode()
    assert "0.500 ms" not in page and "held for review" in page

    response = login(curator).post(f"/evaluations/{held.pk}/accept/", {"note": "checked the trace by hand"})
    assert response.status_code == 302 and response["Location"] == "/reviews/"
    held.refresh_from_db()
    assert held.review == Review.ACCEPTED and held.reviewed_by == curator and held.reviewed_at is not None
    assert held.review_note == "checked the trace by hand"
    row = build_board("trn1", "mini").rows[0].simulated
    assert row.best == held and row.speedup == pytest.approx(20.0)
    assert services.best_evaluation(problem) == held
    client.logout()
    assert "held for review" not in client.get(problem.get_absolute_url()).content.decode()


def test_a_rejected_result_never_counts_and_the_queue_records_who_decided(login, curator, problem, held) -> None:
    client = login(curator)
    client.post(f"/evaluations/{held.pk}/reject/", {"note": "output read from a file"})
    held.refresh_from_db()
    assert held.review == Review.REJECTED and held.reviewed_by == curator
    assert build_board("trn1", "mini").rows[0].simulated.best.kernel == problem.baseline_kernel
    html = client.get("/reviews/").content.decode()
    assert f'id="review-{held.pk}"' not in html  # out of the queue...
    assert "Rejected by a curator" in html and "output read from a file" in html  # ...into the history


def test_the_kernel_page_shows_the_hold_and_lets_a_curator_decide_there(client, login, curator, held) -> None:
    url = f"{held.kernel.get_absolute_url()}?evaluation={held.pk}"
    html = client.get(url).content.decode()
    assert "held for review" in html and "faster than the hardware allows" in html
    assert "/accept/" not in html  # visitors see the hold, not the buttons
    client = login(curator)
    assert f"/evaluations/{held.pk}/accept/" in client.get(url).content.decode()
    response = client.post(f"/evaluations/{held.pk}/accept/", {"next": url})
    assert response["Location"] == url
    html = client.get(url).content.decode()
    assert "accepted on review" in html and curator.username in html


def test_only_a_held_result_can_be_decided(login, curator, problem) -> None:
    clean = _evaluate(problem.baseline_kernel, 10.0)
    response = login(curator).post(f"/evaluations/{clean.pk}/accept/", follow=True)
    assert "never held for review" in response.content.decode()
    clean.refresh_from_db()
    assert clean.review == "" and clean.reviewed_by is None


def test_the_kernels_list_links_curators_to_the_queue(client, login, engineer, curator, held) -> None:
    assert "/reviews/" not in client.get("/kernels/").content.decode()
    assert "/reviews/" not in login(engineer).get("/kernels/").content.decode()
    html = login(curator).get("/kernels/").content.decode()
    assert 'href="/reviews/"' in html and "(1 waiting)" in html


def test_the_pipeline_holds_a_suspicious_result_as_it_saves_it(problem) -> None:
    evaluation = Evaluation.objects.create(kernel=problem.baseline_kernel, backend_version="v")
    services.save_result(evaluation.pk, {"status": "done", "correct": True, "latency_ms": 0.1,
                                         "error_kind": ErrorKind.SUSPICIOUS.value, "error_message": REASON})
    evaluation.refresh_from_db()
    assert evaluation.review == Review.HELD and evaluation.held_reason == REASON and evaluation.held_at is not None
    assert not evaluation.is_rankable and evaluation.outcome == "held for review"
