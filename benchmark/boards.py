"""The NKIBench boards: one board per case (mini, full) and platform, simulated and measured numbers apart.

A mini case and a full case are different problems: their geomeans are never taken together. A simulated
latency (our performance model) and a measured one (Trainium hardware) are different quantities: each row
has one group of columns per source, each with its own best kernel, its own baseline under the same backend
and version, and its own geomean. The simulated group counts only the current performance-model version
(an older model's numbers are not comparable with today's). AccelOpt's published trn1 results are
measured, on the full shapes, so they sit in the measured group of the full board.

`best_over_time` gives, per problem, each time the simulated best improved. The Triton boards are
`benchmark.leaderboard.build_leaderboard`'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from benchmark.leaderboard import ReferenceResult, reference_for
from benchmark.models import DEFAULT_SUITE, Backend, Evaluation, Problem
from benchmark.platforms import DEFAULT_PLATFORM
from benchmark.provenance import generating_runs
from benchmark.services.access import visible_evaluations
from benchmark.services.evaluations import backend_version

CASES = ("full", "mini")  # the full board first: the published shapes, where AccelOpt's results are


@dataclass
class Cell:
    """One source's numbers for one problem: the best kernel and the baseline, same backend and version."""

    best: Evaluation | None = None
    baseline: Evaluation | None = None
    run: Any = None

    @property
    def speedup(self) -> float | None:
        if self.best is None or self.baseline is None or not self.best.latency_ms or not self.baseline.latency_ms:
            return None
        return self.baseline.latency_ms / self.best.latency_ms

    @property
    def run_models(self) -> list[str]:
        """The distinct models the generating run's roles used, in a stable order."""
        if self.run is None:
            return []
        models = (getattr(self.run, "config", None) or {}).get("models") or {}
        return sorted({str(m.get("model")) for m in models.values() if isinstance(m, dict) and m.get("model")})

    @property
    def found_by_baseline(self) -> bool:
        return self.best is not None and self.baseline is not None and self.best.kernel_id == self.baseline.kernel_id


@dataclass
class BoardRow:
    problem: Problem
    simulated: Cell = field(default_factory=Cell)
    measured: Cell = field(default_factory=Cell)
    reference: ReferenceResult | None = None


def _geomean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in present) / len(present)) if present else None


@dataclass
class Board:
    platform: str
    case: str
    simulator_version: str
    rows: list[BoardRow] = field(default_factory=list)
    user: Any = None  # whose view: best_over_time ranks the same kernels the board does

    @property
    def simulated_geomean_speedup(self) -> float | None:
        return _geomean(row.simulated.speedup for row in self.rows)

    @property
    def simulated_geomean_peak_fraction(self) -> float | None:
        return _geomean(row.simulated.best.peak_fraction for row in self.rows if row.simulated.best)

    @property
    def measured_geomean_speedup(self) -> float | None:
        return _geomean(row.measured.speedup for row in self.rows)

    @property
    def reference_geomean_speedup(self) -> float | None:
        return _geomean(row.reference.speedup for row in self.rows if row.reference)

    @property
    def simulated_count(self) -> int:
        return sum(1 for row in self.rows if row.simulated.best)

    @property
    def measured_count(self) -> int:
        return sum(1 for row in self.rows if row.measured.best)

    @property
    def has_measured(self) -> bool:
        return self.measured_count > 0 or any(row.reference for row in self.rows)


def _best_by_problem(evaluations: Any) -> dict[int, Evaluation]:
    best: dict[int, Evaluation] = {}
    for evaluation in evaluations.order_by("latency_ms", "created"):
        best.setdefault(evaluation.kernel.problem_id, evaluation)
    return best


def build_board(
    platform: str = DEFAULT_PLATFORM, case: str = "full", *, suite: str = DEFAULT_SUITE, user: Any = None
) -> Board:
    """The board of one case and platform: per problem, the simulated best (current model) and the measured best,
    among the kernels `user` may see (None: an anonymous visitor), so a private run's results stay off it."""
    problems = list(Problem.objects.filter(suite=suite, case=case).select_related("baseline_kernel").order_by("slug"))
    simulator_version = backend_version(Backend.SIMULATOR.value)
    ranked = visible_evaluations(user, Evaluation.objects.rankable()).filter(
        kernel__problem__in=problems, platform=platform
    ).select_related(
        "kernel", "kernel__author", "kernel__problem"
    )
    simulated = ranked.filter(backend=Backend.SIMULATOR, backend_version=simulator_version)
    measured = ranked.filter(backend=Backend.NEURON)
    best_simulated, best_measured = _best_by_problem(simulated), _best_by_problem(measured)
    baseline_ids = [p.baseline_kernel_id for p in problems if p.baseline_kernel_id]
    baselines: dict[tuple[int, str, str], Evaluation] = {}
    for evaluation in ranked.filter(kernel_id__in=baseline_ids, backend__in=(Backend.SIMULATOR, Backend.NEURON)):
        baselines.setdefault((evaluation.kernel_id, evaluation.backend, evaluation.backend_version), evaluation)
    runs = generating_runs(e.kernel for e in [*best_simulated.values(), *best_measured.values()])

    def cell(best: Evaluation | None, problem: Problem) -> Cell:
        if best is None:  # not even the baseline has a rankable number from this source
            return Cell()
        return Cell(
            best=best, baseline=baselines.get((problem.baseline_kernel_id, best.backend, best.backend_version)),
            run=runs.get(best.kernel.run_id) if best.kernel.run_id else None,
        )

    rows = [
        BoardRow(
            problem=problem,
            simulated=cell(best_simulated.get(problem.pk), problem),
            measured=cell(best_measured.get(problem.pk), problem),
            reference=reference_for(problem, platform),
        )
        for problem in problems
    ]
    return Board(platform=platform, case=case, simulator_version=simulator_version, rows=rows, user=user)


@dataclass
class Improvement:
    when: datetime
    latency_ms: float
    speedup: float | None
    kernel_id: int


def best_over_time(board: Board) -> dict[str, list[Improvement]]:
    """Per problem address, each moment the simulated best (current model) got faster, oldest first."""
    problems = {row.problem.pk: row for row in board.rows}
    evaluations = (
        visible_evaluations(board.user, Evaluation.objects.rankable())
        .filter(kernel__problem_id__in=problems, platform=board.platform, backend=Backend.SIMULATOR,
                backend_version=board.simulator_version)
        .select_related("kernel", "kernel__problem")
        .order_by("finished", "id")
    )
    history: dict[str, list[Improvement]] = {}
    for evaluation in evaluations:
        row = problems[evaluation.kernel.problem_id]
        steps = history.setdefault(row.problem.address, [])
        if steps and evaluation.latency_ms >= steps[-1].latency_ms:
            continue
        baseline = row.simulated.baseline
        speedup = baseline.latency_ms / evaluation.latency_ms if baseline and baseline.latency_ms else None
        steps.append(Improvement(evaluation.finished or evaluation.created, evaluation.latency_ms, speedup,
                                 evaluation.kernel_id))
    return history
