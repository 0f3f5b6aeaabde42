"""The public leaderboard: best correct kernel per problem, provenance marks, AccelOpt reference rows."""

from __future__ import annotations

import pytest

from benchmark.leaderboard import build_board, reference_results
from benchmark.models import Backend, ErrorKind, Evaluation, EvaluationStatus, Kernel, Problem
from benchmark.services import backend_version, source_sha256

pytestmark = pytest.mark.django_db
# The page's simulated columns rank the current performance model only (benchmark.leaderboard).
CURRENT = backend_version(Backend.SIMULATOR)


def _evaluate(kernel: Kernel, latency: float, *, correct: bool = True, backend: str = Backend.SIMULATOR,
              error_kind: str = "", version: str = CURRENT) -> Evaluation:
    return Evaluation.objects.create(kernel=kernel, platform="trn1", backend=backend, backend_version=version,
                                     status=EvaluationStatus.DONE, correct=correct, latency_ms=latency,
                                     peak_fraction=0.01 / latency, error_kind=error_kind)


def _kernel(problem: Problem, source: str) -> Kernel:
    return Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source))


def test_the_best_correct_kernel_wins_and_incorrect_faster_ones_do_not(client, problem) -> None:
    _evaluate(problem.baseline_kernel, 10.0)
    _evaluate(_kernel(problem, "fast but wrong"), 1.0, correct=False)
    _evaluate(_kernel(problem, "faster"), 4.0)
    row = build_board("trn1", "mini").rows[0].simulated
    assert row.best.latency_ms == 4.0 and row.speedup == pytest.approx(2.5)
    html = client.get("/leaderboard/?case=mini").content.decode()
    assert "2.50×" in html and CURRENT in html


def test_a_suspicious_result_is_held_for_review_not_ranked(client, problem) -> None:
    """A correct result flagged suspicious (faster than the peak) keeps its latency but never tops the board."""
    _evaluate(problem.baseline_kernel, 10.0)
    held = _kernel(problem, "faster than physics")
    _evaluate(held, 0.001, error_kind=ErrorKind.SUSPICIOUS)
    row = build_board("trn1", "mini").rows[0].simulated
    assert row.best.kernel == problem.baseline_kernel and row.speedup == pytest.approx(1.0)
    assert held.display_name not in client.get("/leaderboard/?case=mini").content.decode()


def test_the_speedup_compares_with_the_baseline_under_the_same_backend_and_version(problem) -> None:
    """Another compiler's or performance model's baseline number, or a measured one against a simulation, is no
    speedup."""
    _evaluate(problem.baseline_kernel, 10.0, backend=Backend.NEURON, version="neuronx-cc 2.1")
    _evaluate(problem.baseline_kernel, 5.0, backend=Backend.NEURON, version="neuronx-cc 2.2")
    _evaluate(_kernel(problem, "faster"), 4.0, backend=Backend.NEURON, version="neuronx-cc 2.1")
    row = build_board("trn1", "mini").rows[0]
    assert row.measured.baseline.backend_version == "neuronx-cc 2.1" and row.measured.speedup == pytest.approx(2.5)
    _evaluate(_kernel(problem, "simulated"), 1.0)
    _evaluate(_kernel(problem, "an older model's"), 0.5, version="perf-7")  # not today's model: not ranked
    row = build_board("trn1", "mini").rows[0]
    assert row.simulated.best.latency_ms == 1.0 and row.simulated.baseline is None and row.simulated.speedup is None
    assert row.measured.speedup == pytest.approx(2.5)


def test_a_row_says_how_its_kernel_was_found_and_the_page_draws_the_suite(client, engineer, problem) -> None:
    from optimizer import services as run_services

    run = run_services.create_run(engineer, problem, is_public=True)
    _evaluate(problem.baseline_kernel, 10.0)
    found = _kernel(problem, "found by the offline agent")
    Kernel.objects.filter(pk=found.pk).update(run_id=run.pk, parent=problem.baseline_kernel)
    _evaluate(found, 5.0)
    html = client.get("/leaderboard/?case=mini").content.decode()
    assert f'href="/runs/{run.pk}/">run {run.pk}</a>' in html
    assert "Offline agent (search over known rewrites)" in html
    assert 'data-testid="geomean-simulated">2.00×' in html and 'id="leaderboard-chart"' in html


def test_a_hardware_measurement_is_marked_measured(client, problem) -> None:
    _evaluate(problem.baseline_kernel, 3.0, backend=Backend.NEURON)
    html = client.get("/leaderboard/?case=mini").content.decode()
    assert 'data-testid="measured-latency">3 ms' in html


def test_a_full_nkibench_case_gets_accelopts_published_row(client) -> None:
    Problem.objects.create(slug="silu", case="full", reference_source="# ref", parameters={"M": 4096, "N": 7168})
    html = client.get("/leaderboard/").content.decode()
    published = reference_results()["silu_M4096_N7168"]
    assert 'data-reference="silu_M4096_N7168"' in html and published.latency_ms == pytest.approx(0.79774)
    assert "Nothing simulated under" in html


def test_the_leaderboard_without_problems_says_how_to_load_them(client, db) -> None:
    assert "manage.py load_suite" in client.get("/leaderboard/").content.decode()
