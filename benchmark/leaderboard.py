"""The public leaderboard: one board per platform (and per case where the platform's suite splits into cases),
built by one function, `build_board`, for every platform. The page (benchmark.leaderboard_views) calls it;
nothing else builds a board.

A board has one row per problem and, per row, one group of columns per source of numbers: simulated (a
backend whose latency a model predicts: NKI's simulator) and measured (hardware: Trainium's neuron backend, a
GPU's cuda backend); which backend is which is its registry definition's `latency`. Each source has its own best kernel, its own baseline under the same backend and version, and
its own geomean: a simulated latency and a measured one are different quantities, and a speedup of one over
the other would be no speedup at all. The simulated group counts only the current performance-model version
(an older model's numbers are not comparable with today's).

Which problems a board holds (the platform definition's `suite` and `board_cases`): a platform with a suite
split into cases (NKI: NKIBench, mini and full) gets one board per case, because a mini case and a full case are different problems whose geomeans are
never taken together; a platform of another language (Triton) gets its language's public problems (the
FlashInfer-Bench imports), all cases. A platform whose backends include a correctness-only one (the Triton
interpreter, no latency) shows a kernel only that backend judged as "correctness only: no GPU", unranked.

Reference rows come from `suites/nkibench/accelopt_trn1_best.csv`: the trn1 latencies of the best kernels
AccelOpt published (measured on trn1, on the full shapes; copied from the AccelOpt authors' NKIBench
results, via /work/shared/calibration/trn1_accelopt_best.csv of this project's calibration set), so users see
where their numbers stand; they sit in the measured group of the trn1 full board. The run behind a
generated kernel comes from the app that generated it, through `benchmark.provenance.generating_runs`
(benchmark imports no app above it). `best_over_time` gives, per problem, each time the simulated best
improved.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from benchmark.models import (
    Evaluation,
    EvaluationStatus,
    Platform,
    Problem,
    Visibility,
)
from benchmark.provenance import generating_runs
from benchmark.services.access import visible_evaluations
from benchmark.services.evaluations import backend_version
from engine.platforms.nki.suites.loader import SUITES_DIR
from engine.platforms.registry import (
    BOARD_CASES,
    CORRECTNESS_ONLY,
    DEFAULT_PLATFORM,
    MEASURED,
    PREDICTED,
    get_backend_definition,
    get_definition,
)

CASES = BOARD_CASES  # NKIBench's boards, the full board first: the published shapes, AccelOpt's results
REFERENCE_CSV = SUITES_DIR / "nkibench" / "accelopt_trn1_best.csv"


def backends_of(platform: str, latency: str) -> list[str]:
    """The platform's backends whose latency is of this kind (registry: PREDICTED, MEASURED, CORRECTNESS_ONLY)."""
    return [b for b in get_definition(platform).backends if get_backend_definition(b).latency == latency]


@dataclass
class ReferenceResult:
    case_name: str
    latency_ms: float
    speedup: float
    hfu: float | None  # neuron-profile's hardware-FLOPs utilization estimate; None where it reports 0


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
    # With no ranked result: the newest result a correctness-only backend judged correct (no latency).
    correct_only: Evaluation | None = None


def _geomean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in present) / len(present)) if present else None


@dataclass
class Board:
    platform: str
    case: str | None  # None: every case (a board of a language without a suite of cases)
    simulator_version: str  # the performance model the simulated group counts; "" without a simulator
    rows: list[BoardRow] = field(default_factory=list)
    language: str = ""
    user: Any = None  # whose view: best_over_time ranks the same kernels the board does
    simulator: str = ""  # the backend of the simulated group ("" without one)

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
    def measured_geomean_peak_fraction(self) -> float | None:
        return _geomean(row.measured.best.peak_fraction for row in self.rows if row.measured.best)

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


@lru_cache(maxsize=1)
def reference_results() -> dict[str, ReferenceResult]:
    """AccelOpt's published trn1 bests by NKIBench case name (e.g. "silu_M4096_N7168")."""
    results = {}
    with REFERENCE_CSV.open(newline="") as handle:
        for line in csv.DictReader(handle):
            hfu = float(line["hfu_estimated_percent"] or 0)
            results[line["case"]] = ReferenceResult(
                case_name=line["case"], latency_ms=float(line["latency_ms"]),
                speedup=float(line["best_speedup_over_baseline"]), hfu=hfu or None,
            )
    return results


def reference_for(problem: Problem, platform: str) -> ReferenceResult | None:
    """The published result for a problem's full case on trn1 (its name is the slug plus the shape)."""
    if platform != Platform.TRN1 or problem.case != "full":  # the CSV holds AccelOpt's trn1 measurements
        return None
    name = "_".join([problem.slug, *(f"{k}{v}" for k, v in sorted(problem.parameters.items()))])
    return reference_results().get(name)


def board_case(platform: str, case: str | None) -> str | None:
    """The case a board of this platform shows for a requested one: one of its `board_cases` (the first when the
    request names none or another), or every case (None) for a platform whose boards are not split by case."""
    cases = get_definition(platform).board_cases
    if not cases:
        return None
    return case if case in cases else cases[0]


def _board_problems(platform: str, case: str | None, suite: str | None) -> Any:
    """A platform with a suite (NKI: NKIBench): its problems of the case, or `suite`'s. Another: the public
    problems of its language (FlashInfer-Bench imports for Triton), of `suite` when given."""
    definition = get_definition(platform)
    if definition.suite:
        return Problem.objects.filter(suite=suite or definition.suite, case=case, language=definition.language)
    problems = Problem.objects.filter(language=definition.language, visibility=Visibility.PUBLIC)
    return problems.filter(suite=suite) if suite else problems


def _best_by_problem(evaluations: Any) -> dict[int, Evaluation]:
    best: dict[int, Evaluation] = {}
    for evaluation in evaluations.order_by("latency_ms", "created"):
        best.setdefault(evaluation.kernel.problem_id, evaluation)
    return best


def _correct_only(problems: list[Problem], platform: str, user: Any) -> dict[int, Evaluation]:
    """Per problem, its newest correct, clean correctness-only result: shown as correct with no latency."""
    newest: dict[int, Evaluation] = {}
    for evaluation in visible_evaluations(user).filter(
        kernel__problem__in=problems, platform=platform, backend__in=backends_of(platform, CORRECTNESS_ONLY),
        status=EvaluationStatus.DONE, correct=True, error_kind="", review="",
    ).select_related("kernel", "kernel__author").order_by("-finished", "-id"):
        newest.setdefault(evaluation.kernel.problem_id, evaluation)
    return newest


def build_board(
    platform: str = DEFAULT_PLATFORM, case: str | None = None, *, suite: str | None = None, user: Any = None
) -> Board:
    """The board of one platform (and case, `board_case`): per problem, the simulated best (current model)
    where the platform has a simulator and the measured best, each against its baseline; among the kernels
    `user` may see (None: an anonymous visitor), so a private run's results stay off it."""
    definition = get_definition(platform)
    case = board_case(platform, case)
    problems = list(_board_problems(platform, case, suite).select_related("baseline_kernel").order_by("slug", "case"))
    predicted = backends_of(platform, PREDICTED)
    simulator = predicted[0] if predicted else ""  # one model's numbers per group: the platform's first
    simulator_version = backend_version(simulator) if simulator else ""
    measured_backends = backends_of(platform, MEASURED)
    # A held result (suspicious, or too large a speedup over its parent in a run) keeps correct=True and its
    # latency for the curator, but is never ranked until a curator accepts it (benchmark.review).
    ranked = visible_evaluations(user, Evaluation.objects.rankable()).filter(
        kernel__problem__in=problems, platform=platform
    ).select_related("kernel", "kernel__author", "kernel__problem")
    simulated = ranked.filter(backend=simulator, backend_version=simulator_version)
    best_simulated = _best_by_problem(simulated) if simulator else {}
    best_measured = _best_by_problem(ranked.filter(backend__in=measured_backends))
    baseline_ids = [p.baseline_kernel_id for p in problems if p.baseline_kernel_id]
    baselines: dict[tuple[int, str, str], Evaluation] = {}
    for evaluation in ranked.filter(kernel_id__in=baseline_ids).order_by("latency_ms"):
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
    if backends_of(platform, CORRECTNESS_ONLY):
        correct_only = _correct_only(problems, platform, user)
        for row in rows:
            if row.simulated.best is None and row.measured.best is None:
                row.correct_only = correct_only.get(row.problem.pk)
    return Board(platform=platform, case=case, simulator_version=simulator_version, rows=rows,
                 language=definition.language, user=user, simulator=simulator)


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
        .filter(kernel__problem_id__in=problems, platform=board.platform, backend=board.simulator,
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
