"""The public leaderboard: per problem, case and platform, the best correct kernel found so far. One board
per platform: NKIBench's problems on trn1/trn2 (simulated or measured), FlashInfer-Bench's Triton problems on
h100/h200 (measured by the cuda backend; a kernel only the CPU interpreter judged is "correctness only").

Each row says whether its number is simulated (and by which performance-model version) or measured on
hardware, and how the kernel was found (the run, its agent and models, its LLM cost). Reference rows come
from `suites/nkibench/accelopt_trn1_best.csv`: the trn1 latencies of the best kernels AccelOpt published
(measured on trn1; copied from the AccelOpt authors' NKIBench results, via
/work/shared/calibration/trn1_accelopt_best.csv of this project's calibration set), so users see where
their simulated numbers stand. The run behind a generated kernel comes from the app that generated it,
through `benchmark.provenance.generating_runs` (benchmark imports no app above it).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmark.models import (
    DEFAULT_SUITE,
    Backend,
    Evaluation,
    EvaluationStatus,
    Platform,
    Problem,
    Visibility,
)
from benchmark.platforms import DEFAULT_PLATFORM, NKI, get_definition
from benchmark.provenance import generating_runs
from benchmark.services.access import visible_evaluations

REFERENCE_CSV = Path(__file__).resolve().parent / "suites" / "nkibench" / "accelopt_trn1_best.csv"
# Backends whose latencies rank: NKI's simulator and hardware, and a GPU's measurement. The Triton
# interpreter reports no latency; a kernel it judged correct shows as "correctness only: no GPU", unranked.
RANKED_BACKENDS = (Backend.SIMULATOR, Backend.NEURON, Backend.CUDA)
MEASURED_BACKENDS = (Backend.NEURON, Backend.CUDA)


@dataclass
class ReferenceResult:
    case_name: str
    latency_ms: float
    speedup: float
    hfu: float | None  # neuron-profile's hardware-FLOPs utilization estimate; None where it reports 0


@dataclass
class LeaderboardRow:
    problem: Problem
    platform: str
    best: Evaluation | None
    baseline: Evaluation | None
    run: Any = None
    reference: ReferenceResult | None = None
    # Triton boards: with no GPU result, the newest correct interpreter result (correct, but no latency).
    correct_only: Evaluation | None = None

    @property
    def speedup(self) -> float | None:
        if self.best is None or self.baseline is None or not self.best.latency_ms or not self.baseline.latency_ms:
            return None
        return self.baseline.latency_ms / self.best.latency_ms

    @property
    def measured(self) -> bool:
        return self.best is not None and self.best.backend in MEASURED_BACKENDS


@dataclass
class Leaderboard:
    rows: list[LeaderboardRow] = field(default_factory=list)
    language: str = NKI  # the board's kernel language: "nki" (NKIBench problems) or "triton" (FlashInfer-Bench)

    def geomean(self, attribute: str) -> float | None:
        values = [v for v in (getattr(row, attribute) for row in self.rows) if v]
        if not values:
            return None
        return math.exp(sum(math.log(v) for v in values) / len(values))

    @property
    def geomean_speedup(self) -> float | None:
        return self.geomean("speedup")

    @property
    def geomean_peak_fraction(self) -> float | None:
        values = [row.best.peak_fraction for row in self.rows if row.best is not None and row.best.peak_fraction]
        if not values:
            return None
        return math.exp(sum(math.log(v) for v in values) / len(values))

    @property
    def reference_geomean_speedup(self) -> float | None:
        values = [row.reference.speedup for row in self.rows if row.reference is not None and row.reference.speedup]
        if not values:
            return None
        return math.exp(sum(math.log(v) for v in values) / len(values))


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


def _ranked(evaluations: Any) -> Any:
    # A held result (suspicious, or too large a speedup over its parent in a run) keeps correct=True and its
    # latency for the curator, but is never ranked until a curator accepts it (benchmark.review).
    return evaluations.rankable().filter(backend__in=RANKED_BACKENDS)


def _board_problems(platform: str, suite: str | None) -> Any:
    """An NKI board: the suite's problems (NKIBench by default). A board of another language: the public
    problems of that language (FlashInfer-Bench imports for Triton), of `suite` when given."""
    language = get_definition(platform).language
    if language == NKI:
        return Problem.objects.filter(suite=suite or DEFAULT_SUITE, language=NKI)
    problems = Problem.objects.filter(language=language, visibility=Visibility.PUBLIC)
    return problems.filter(suite=suite) if suite else problems


def _correct_only(problems: list[Problem], platform: str, user: Any) -> dict[int, Evaluation]:
    """Per problem, its newest correct, clean interpreter result: shown as correct with no latency."""
    newest: dict[int, Evaluation] = {}
    for evaluation in visible_evaluations(user).filter(
        kernel__problem__in=problems, platform=platform, backend=Backend.TRITON_INTERPRETER,
        status=EvaluationStatus.DONE, correct=True, error_kind="", review="",
    ).select_related("kernel", "kernel__author").order_by("-finished", "-id"):
        newest.setdefault(evaluation.kernel.problem_id, evaluation)
    return newest


def build_leaderboard(platform: str = DEFAULT_PLATFORM, *, suite: str | None = None, user: Any = None) -> Leaderboard:
    """The board of one platform: NKIBench's problems on trn1/trn2, FlashInfer-Bench's Triton problems on a GPU.
    Only results of kernels `user` may see rank (None: an anonymous visitor): a private run's stay off it."""
    problems = list(_board_problems(platform, suite).select_related("baseline_kernel").order_by("slug", "case"))
    best: dict[int, Evaluation] = {}
    for evaluation in _ranked(
        visible_evaluations(user).filter(kernel__problem__in=problems, platform=platform)
    ).select_related(
        "kernel", "kernel__author"
    ).order_by("latency_ms", "created"):
        best.setdefault(evaluation.kernel.problem_id, evaluation)
    # A speedup compares the best kernel with its baseline under the same backend and version: a simulated
    # number over a measured one, or one performance model over another, would be no speedup at all.
    baselines: dict[tuple[int, str, str], Evaluation] = {}
    fastest_baseline: dict[int, Evaluation] = {}
    baseline_ids = [p.baseline_kernel_id for p in problems if p.baseline_kernel_id]
    for evaluation in _ranked(Evaluation.objects.filter(kernel_id__in=baseline_ids, platform=platform)).order_by(
        "latency_ms"
    ):
        baselines.setdefault((evaluation.kernel_id, evaluation.backend, evaluation.backend_version), evaluation)
        fastest_baseline.setdefault(evaluation.kernel_id, evaluation)
    runs = generating_runs(e.kernel for e in best.values())
    rows = []
    for problem in problems:
        evaluation = best.get(problem.pk)
        rows.append(LeaderboardRow(
            problem=problem, platform=platform, best=evaluation,
            baseline=(
                baselines.get((problem.baseline_kernel_id, evaluation.backend, evaluation.backend_version))
                if evaluation is not None else fastest_baseline.get(problem.baseline_kernel_id)
            ),
            run=runs.get(evaluation.kernel.run_id) if evaluation is not None and evaluation.kernel.run_id else None,
            reference=reference_for(problem, platform),
        ))
    language = get_definition(platform).language
    if language != NKI:
        correct_only = _correct_only(problems, platform, user)
        for row in rows:
            if row.best is None:
                row.correct_only = correct_only.get(row.problem.pk)
    return Leaderboard(rows=rows, language=language)

