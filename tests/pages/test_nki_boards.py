"""The NKIBench leaderboard cannot be misread: mini and full cases are separate boards with separate geomeans,
and simulated and measured numbers sit in separate columns, each against its own baseline."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmark.leaderboard import best_over_time, build_board
from benchmark.models import Evaluation, EvaluationStatus, Kernel, KernelOrigin, Problem
from benchmark.services import backend_version, source_sha256


def _problem(slug: str, case: str) -> Problem:
    problem = Problem.objects.create(slug=slug, case=case, reference_source=f"# {slug} {case}", parameters={"M": 4})
    problem.baseline_kernel = _kernel(problem, "baseline", KernelOrigin.BASELINE)
    problem.save(update_fields=["baseline_kernel"])
    return problem


def _kernel(problem: Problem, name: str, origin: str = KernelOrigin.UPLOADED) -> Kernel:
    source = f"# {problem.address} {name}\n"
    return Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source), origin=origin, name=name)


def _result(kernel: Kernel, latency: float, backend: str = "simulator", version: str | None = None) -> Evaluation:
    return Evaluation.objects.create(
        kernel=kernel, platform="trn1", backend=backend,
        backend_version=version or (backend_version(backend) if backend == "simulator" else "neuronx-cc 2.21"),
        status=EvaluationStatus.DONE, compiled=True, runnable=True, correct=True, latency_ms=latency,
        peak_fraction=0.1,
    )


@pytest.fixture
def silu(db):
    mini, full = _problem("silu", "mini"), _problem("silu", "full")
    _result(mini.baseline_kernel, 1.0)
    _result(_kernel(mini, "fast"), 0.25)  # 4x on the mini case
    _result(full.baseline_kernel, 10.0)
    _result(_kernel(full, "better"), 5.0)  # 2x on the full case
    return mini, full


def test_each_case_is_its_own_board_with_its_own_geomean(silu):
    full, mini = build_board("trn1", "full"), build_board("trn1", "mini")
    assert [row.problem.case for row in full.rows] == ["full"]
    assert [row.problem.case for row in mini.rows] == ["mini"]
    assert full.simulated_geomean_speedup == pytest.approx(2.0)
    assert mini.simulated_geomean_speedup == pytest.approx(4.0)


def test_measured_numbers_have_their_own_column_and_baseline(silu):
    mini, full = silu
    _result(full.baseline_kernel, 12.0, backend="neuron")
    _result(Kernel.objects.get(problem=full, name="better"), 8.0, backend="neuron")
    row = build_board("trn1", "full").rows[0]
    assert (row.simulated.best.latency_ms, row.simulated.speedup) == (5.0, pytest.approx(2.0))
    assert (row.measured.best.latency_ms, row.measured.speedup) == (8.0, pytest.approx(1.5))
    assert row.measured.baseline.backend == "neuron" and row.simulated.baseline.backend == "simulator"


def test_an_older_performance_model_is_not_ranked_beside_the_current_one(silu):
    mini, _ = silu
    _result(_kernel(mini, "old model"), 0.01, version="nki-sim 0 + perf perf-0")
    row = build_board("trn1", "mini").rows[0]
    assert row.simulated.best.kernel.name == "fast"


def test_the_page_shows_one_board_with_separate_simulated_and_measured_columns(client, silu):
    html = client.get(reverse("benchmark:leaderboard") + "?case=mini").content.decode()
    assert 'data-case="mini"' in html and "silu:mini" in html and "silu:full" not in html
    assert 'data-testid="simulated-columns"' in html and 'data-testid="measured-columns"' in html
    assert "4.00×" in html
    html = client.get(reverse("benchmark:leaderboard")).content.decode()  # the full board by default
    assert 'data-case="full"' in html and "silu:full" in html and "2.00×" in html


def test_best_over_time_has_one_step_per_improvement(silu):
    mini, _ = silu
    history = best_over_time(build_board("trn1", "mini"))
    steps = history[mini.address]
    assert [step.latency_ms for step in steps] == [1.0, 0.25]
    assert steps[-1].speedup == pytest.approx(4.0)
