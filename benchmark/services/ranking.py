"""Which numbers count and which is best: the rankable evaluations under the current backend version, the
best per problem or kernel, the theoretical peaks they are measured against, and the querysets the
problem and kernel pages list.

Only a rankable result counts (`Evaluation.is_rankable`): correct, timed, and not held for review.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Count, Max, Prefetch, QuerySet

from benchmark.models import Evaluation, Kernel, KernelOrigin, Problem
from benchmark.services.access import visible_kernels, visible_problems
from benchmark.services.evaluations import backend_version
from engine.platforms.registry import (
    DEFAULT_BACKEND,
    DEFAULT_PLATFORM,
    PREDICTED,
    TESTING,
    find_part,
    get_definition,
)


def best_evaluation(problem: Problem, platform: str = DEFAULT_PLATFORM, backend: str | None = None) -> Evaluation | None:
    """The fastest rankable evaluation (correct, not held for review) of the problem's kernels under the
    current version of the backend (by default the platform's own)."""
    if backend is None:
        backend = get_definition(platform).default_backend.value
    return (
        Evaluation.objects.rankable()
        .filter(kernel__problem=problem, platform=platform, backend=backend, backend_version=backend_version(backend))
        .select_related("kernel")
        .order_by("latency_ms", "id")
        .first()
    )


def best_of(evaluations: Iterable[Evaluation], platform: str) -> Evaluation | None:
    """The fastest rankable evaluation (correct, not held for review) among already-fetched ones (no query)."""
    candidates = [e for e in evaluations if e.platform == platform and e.is_rankable]
    return min(candidates, key=lambda e: (e.latency_ms, e.pk), default=None)


def preferred_evaluation(evaluations: Sequence[Evaluation]) -> Evaluation | None:
    """Which evaluation a kernel page opens on: the newest under the current backend version, else the newest."""
    current = {backend: backend_version(backend) for backend in {e.backend for e in evaluations}}
    for evaluation in evaluations:
        if evaluation.backend_version == current[evaluation.backend]:
            return evaluation
    return evaluations[0] if evaluations else None


def kernel_row_sort_key(row: dict[str, Any]) -> tuple[float, int]:
    """Problem pages list kernels fastest first on the problem's default platform (trn1 for NKI);
    unevaluated and failing ones after."""
    best = row["best"].get(row["kernel"].problem.default_platform)
    return (best.latency_ms if best is not None else float("inf"), -row["kernel"].pk)


def theoretical_peaks(problem: Problem) -> dict[str, float | None]:
    """Theoretical peak latency (ms) on each of the problem's platforms, priced by its language's "peak" part
    from the problem's counts; None where the problem has no counts or its language no peak (Triton's roofline
    is its backend's, per evaluation)."""
    # Found on first use: NKI's peak loads numpy, which a web process otherwise never needs to import.
    peak_of = find_part(problem.language, "peak") if problem.has_peak_counts else None
    return {
        platform: peak_of(platform, vector_flops=problem.vector_flops, matmul_flops=problem.matmul_flops,
                          hbm_bytes=problem.hbm_bytes) if peak_of is not None else None
        for platform in problem.platforms
    }


def current_evaluations(platform: str | None = None, backend: str = DEFAULT_BACKEND) -> QuerySet[Evaluation]:
    """Evaluations under the current backend version (what pages show by default)."""
    evaluations = Evaluation.objects.filter(backend=backend, backend_version=backend_version(backend))
    if platform is not None:
        evaluations = evaluations.filter(platform=platform)
    return evaluations


def problems_with_baselines(user: Any, platform: str = DEFAULT_PLATFORM) -> QuerySet[Problem]:
    """Visible problems with their baseline kernel and its current evaluations (three queries)."""
    return (
        visible_problems(user)
        .select_related("baseline_kernel")
        .prefetch_related(
            Prefetch(
                "baseline_kernel__evaluations",
                queryset=current_evaluations(platform),
                to_attr="current_evaluations",
            )
        )
    )


def problem_kernel_rows(problem: Problem, user: Any = None) -> list[dict[str, Any]]:
    """The problem page's table: each kernel with its best rankable result per platform of the problem's
    language (`best`) and one cell per such platform (that result, else the latest evaluation, so failing or
    pending kernels show something), fastest on the problem's default platform first.

    Where the problem's default backend predicts latency (NKI's simulator), only its results: a model's
    latency and a measured one are not compared in one cell. Otherwise every backend's but a pipeline test's
    (Triton's: the interpreter's correct-only results, and a GPU's measured ones, which rank). Only kernels
    `user` may see are listed (None: an anonymous visitor), so a private run's kernels stay off the page."""
    platforms = [p.value for p in problem.platforms]
    if problem.default_backend.definition.latency == PREDICTED:
        evaluations = current_evaluations(backend=problem.default_backend)
    else:
        backends = [b for b in problem.backends if b.definition.latency != TESTING]
        evaluations = Evaluation.objects.filter(
            backend__in=[b.value for b in backends], backend_version__in=_current_versions(backends),
        )
    kernels = visible_kernels(user).filter(problem=problem).select_related("author", "problem").prefetch_related(
        Prefetch("evaluations", queryset=evaluations, to_attr="current_evaluations")
    )
    rows = []
    for kernel in kernels:
        best = {platform: best_of(kernel.current_evaluations, platform) for platform in platforms}
        latest = {
            platform: next((e for e in kernel.current_evaluations if e.platform == platform), None)
            for platform in platforms
        }
        cells = [best[platform] or latest[platform] for platform in platforms]
        rows.append({"kernel": kernel, "best": best, "cells": cells})
    rows.sort(key=kernel_row_sort_key)
    return rows


def _current_versions(backends: Iterable[str]) -> list[str]:
    """The current version of each backend that can say it (one this machine cannot load is left out)."""
    versions = []
    for backend in backends:
        try:
            versions.append(backend_version(backend))
        except ValidationError:
            continue
    return versions


def generated_groups(kernels: QuerySet[Kernel]) -> list[dict[str, Any]]:
    """Generated kernels among `kernels`, one entry per run that wrote them (newest run first): the run id,
    the problem, how many kernels and when the newest was written. The kernels list shows these instead of
    every rewrite, so that uploads stay visible (issue 20)."""
    groups = (
        kernels.filter(origin=KernelOrigin.GENERATED).order_by()
        .values("run_id", "problem_id").annotate(count=Count("id"), newest=Max("created")).order_by("-newest")
    )
    rows = list(groups)
    problems = Problem.objects.in_bulk({row["problem_id"] for row in rows})
    for row in rows:
        row["problem"] = problems.get(row["problem_id"])
    return rows


def find_kernels(
    user: Any, *, origin: str = "", problem_id: int | None = None, mine: bool = False
) -> QuerySet[Kernel]:
    """The kernels list: visible kernels with their problem, author and current evaluations (as
    `current_evaluations`), narrowed by origin (an unknown one does not narrow), problem and, for a
    signed-in user, authorship."""
    kernels = (
        visible_kernels(user)
        .select_related("problem", "author")
        .prefetch_related(Prefetch("evaluations", queryset=current_evaluations(), to_attr="current_evaluations"))
    )
    if origin in KernelOrigin.values:
        kernels = kernels.filter(origin=origin)
    if problem_id is not None:
        kernels = kernels.filter(problem_id=problem_id)
    if mine and user is not None and user.is_authenticated:
        kernels = kernels.filter(author=user)
    return kernels
