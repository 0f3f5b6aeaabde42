"""A kernel a run holds for its speedup over the parent is held on its benchmark Evaluation row too, so
nothing ranks it until a curator accepts it; an accepted result then enters later runs' beams."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from benchmark import review
from benchmark.leaderboard import build_board
from benchmark.models import Evaluation, Review
from optimizer import services
from optimizer.models import RunStatus
from optimizer.worker import RunWorker

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)

# "faster" makes a kernel 1.25x faster than its parent: above this bound, so the run holds it.
STRICT = {**SMALL_SEARCH, "suspicious_speedup": 1.1}


def run_worker_once(agents_factory) -> bool:
    return async_to_sync(RunWorker(agents_factory=agents_factory).step)()


def test_a_speedup_held_kernel_is_held_on_its_evaluation_and_never_ranked(
    fake_pipeline, problem, owner, fake_agents_factory
):
    run = services.create_run(owner, problem, search=STRICT)
    run_worker_once(fake_agents_factory)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.best_latency_ms == pytest.approx(10.0)
    held = Evaluation.objects.filter(review=Review.HELD, kernel__run_id=run.pk)
    assert held.exists()
    eight = held.filter(latency_ms__range=(7.99, 8.01)).order_by("id").first()  # iteration 1's
    assert eight.correct and eight.error_kind == ""  # the result itself was clean: the run held it
    assert eight.held_reason.startswith(f"run {run.pk}: held for review: speedup 1.25x")
    assert "suspicious_speedup=1.1" in eight.held_reason and eight.held_at is not None
    # Nothing held is ranked: the leaderboard's best is still the 10 ms baseline.
    assert build_board("trn1", "mini").rows[0].simulated.best.kernel == problem.baseline_kernel


def test_an_accepted_result_enters_the_next_runs_beam_and_the_leaderboard(
    fake_pipeline, problem, owner, curator, fake_agents_factory
):
    first = services.create_run(owner, problem, search=STRICT)
    run_worker_once(fake_agents_factory)
    for evaluation in Evaluation.objects.filter(review=Review.HELD, kernel__run_id=first.pk):
        review.decide(curator, evaluation.pk, Review.ACCEPTED)
    eight = Evaluation.objects.filter(kernel__run_id=first.pk, latency_ms__range=(7.99, 8.01)).order_by("id").first()
    # Ranked for whoever may see the run (its owner); the run is private, so not on the public board.
    assert build_board("trn1", "mini", user=owner).rows[0].simulated.best == eight
    assert build_board("trn1", "mini").rows[0].simulated.best.kernel == problem.baseline_kernel

    second = services.create_run(owner, problem, search=STRICT)
    run_worker_once(fake_agents_factory)
    second.refresh_from_db()
    # The same 8 ms kernel comes back from the evaluation cache, accepted: the bound no longer holds it.
    assert second.best_kernel_id == eight.kernel_id and second.best_latency_ms == pytest.approx(8.0)
    eight.refresh_from_db()
    assert eight.review == Review.ACCEPTED and eight.reviewed_by == curator  # the decision is not undone


def test_a_rejected_result_stays_out_of_later_runs(fake_pipeline, problem, owner, curator, fake_agents_factory):
    first = services.create_run(owner, problem, search=STRICT)
    run_worker_once(fake_agents_factory)
    for evaluation in Evaluation.objects.filter(review=Review.HELD, kernel__run_id=first.pk):
        review.decide(curator, evaluation.pk, Review.REJECTED)
    # A lenient second run would keep a 1.25x speedup, but a curator rejected that result.
    second = services.create_run(owner, problem, search=SMALL_SEARCH)
    run_worker_once(fake_agents_factory)
    second.refresh_from_db()
    assert second.best_latency_ms == pytest.approx(10.0)


def test_an_accepted_result_keeps_its_breakdown_for_the_planner():
    from optimizer.adapters.evaluation import reviewed

    breakdown = {"verdict": "bound by: DMA (80% of the critical path)", "path_share": {"dma": 0.8, "vector": 0.2}}
    evaluation = Evaluation(correct=True, latency_ms=8.0, review=Review.ACCEPTED, result={"breakdown": breakdown})
    seen = reviewed(evaluation)
    assert seen.review_accepted and seen.breakdown == breakdown  # the Planner still sees where the time goes
