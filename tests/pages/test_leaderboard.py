"""The public leaderboard: best correct kernel per problem, provenance marks, AccelOpt reference rows."""

from __future__ import annotations

import pytest

from benchmark.leaderboard import build_leaderboard, reference_results
from benchmark.models import Backend, ErrorKind, Evaluation, EvaluationStatus, Kernel, Problem
from benchmark.services import source_sha256

pytestmark = pytest.mark.django_db


def _evaluate(kernel: Kernel, latency: float, *, correct: bool = True, backend: str = Backend.SIMULATOR,
              error_kind: str = "") -> Evaluation:
    return Evaluation.objects.create(kernel=kernel, platform="trn1", backend=backend, backend_version="perf-7",
                                     status=EvaluationStatus.DONE, correct=correct, latency_ms=latency,
                                     peak_fraction=0.01 / latency, error_kind=error_kind)


def _kernel(problem: Problem, source: str) -> Kernel:
    return Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source))


def test_the_best_correct_kernel_wins_and_incorrect_faster_ones_do_not(client, problem) -> None:
    _evaluate(problem.baseline_kernel, 10.0)
    _evaluate(_kernel(problem, "fast but wrong"), 1.0, correct=False)
    _evaluate(_kernel(problem, "faster"), 4.0)
    row = build_leaderboard().rows[0]
    assert row.best.latency_ms == 4.0 and row.speedup == pytest.approx(2.5)
    html = client.get("/leaderboard/").content.decode()
    assert "2.50×" in html and "simulated · perf-7" in html


def test_a_suspicious_result_is_held_for_review_not_ranked(client, problem) -> None:
    """A correct result flagged suspicious (faster than the peak) keeps its latency but never tops the board."""
    _evaluate(problem.baseline_kernel, 10.0)
    held = _kernel(problem, "faster than physics")
    _evaluate(held, 0.001, error_kind=ErrorKind.SUSPICIOUS)
    row = build_leaderboard().rows[0]
    assert row.best.kernel == problem.baseline_kernel and row.speedup == pytest.approx(1.0)
    assert held.display_name not in client.get("/leaderboard/").content.decode()


def test_a_hardware_measurement_is_marked_measured(client, problem) -> None:
    _evaluate(problem.baseline_kernel, 3.0, backend=Backend.NEURON)
    html = client.get("/leaderboard/").content.decode()
    assert '<span class="badge measured">measured</span>' in html


def test_a_full_nkibench_case_gets_accelopts_published_row(client) -> None:
    Problem.objects.create(slug="silu", case="full", reference_source="# ref", parameters={"M": 4096, "N": 7168})
    html = client.get("/leaderboard/").content.decode()
    published = reference_results()["silu_M4096_N7168"]
    assert 'data-reference="silu_M4096_N7168"' in html and published.latency_ms == pytest.approx(0.79774)
    assert "No correct kernel evaluated on trn1 yet" in html


def test_the_leaderboard_without_problems_says_how_to_load_them(client, db) -> None:
    assert "manage.py load_suite" in client.get("/leaderboard/").content.decode()
