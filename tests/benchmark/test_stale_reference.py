"""A result measured against an older reference or other parameters stops counting, and runs again when asked.

Evaluations are cached on (kernel, platform, backend, version); `load_suite` updates a problem's reference in
place, so each evaluation records the problem's reference digest and a different one makes it stale.
"""

from __future__ import annotations

from benchmark import services
from benchmark.leaderboard import build_board
from benchmark.models import Evaluation, Problem


def test_changing_the_reference_makes_the_stored_result_stale_and_unranked(fake_pipeline, silu_mini):
    first = services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    assert first.is_rankable and Evaluation.objects.rankable().filter(pk=first.pk).exists()
    silu_mini.reference_source += "\n# the inputs changed\n"
    silu_mini.save()
    first.refresh_from_db()
    assert first.is_stale and not first.is_rankable
    assert first.outcome.startswith("stale")
    assert not Evaluation.objects.rankable().filter(pk=first.pk).exists()
    assert services.best_evaluation(silu_mini, "trn1") is None


def test_a_stale_result_is_evaluated_again_on_the_same_row(fake_pipeline, silu_mini):
    first = services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    silu_mini.parameters = {**silu_mini.parameters, "M": 64}
    silu_mini.save()
    again = services.request_evaluation(Problem.objects.get(pk=silu_mini.pk).baseline_kernel, "trn1")
    assert again.pk == first.pk and len(fake_pipeline.calls) == 2
    assert not again.is_stale and again.is_rankable
    assert again.reference_digest == Problem.objects.get(pk=silu_mini.pk).reference_digest


def test_reloading_an_unchanged_suite_keeps_every_result_fresh(fake_pipeline, silu_mini):
    evaluation = services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    services.load_suite("nkibench", evaluate_cases=())
    evaluation.refresh_from_db()
    assert not evaluation.is_stale
    assert services.request_evaluation(silu_mini.baseline_kernel, "trn1").pk == evaluation.pk
    assert len(fake_pipeline.calls) == 1


def test_a_result_from_before_digests_were_kept_is_not_ranked(fake_pipeline, silu_mini):
    evaluation = services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    Evaluation.objects.filter(pk=evaluation.pk).update(reference_digest="")  # as the migration leaves old rows
    board = build_board("trn1", "mini")
    row = next(row for row in board.rows if row.problem.pk == silu_mini.pk)
    assert row.simulated.best is None and row.measured.best is None
