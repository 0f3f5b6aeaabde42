"""Problems in bulk: loading a built-in suite (problems, baseline kernels, their evaluations) and importing a
directory in AccelOpt's NKIBench layout. Both are idempotent: a second run changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from benchmark.models import (
    DEFAULT_CASE,
    DEFAULT_SUITE,
    Evaluation,
    Kernel,
    KernelOrigin,
    Problem,
    Visibility,
)
from benchmark.services.evaluations import request_evaluation, wait_for_evaluations
from benchmark.services.kernels import create_kernel
from engine.platforms.registry import DEFAULT_PLATFORM

# The default suite of `import_nkibench`: problems read from someone else's NKIBench directory.
IMPORTED_SUITE = "imported"


@dataclass
class LoadSummary:
    suite: str
    problems_created: int = 0
    problems_updated: int = 0
    kernels_created: int = 0
    evaluations: list[Evaluation] = field(default_factory=list)

    @property
    def problems(self) -> int:
        return self.problems_created + self.problems_updated


def load_suite(
    name: str,
    *,
    evaluate_cases: Sequence[str] = (DEFAULT_CASE,),
    platforms: Sequence[str] = (DEFAULT_PLATFORM,),
    wait: bool = True,
) -> LoadSummary:
    """Create or update a suite's problems and baseline kernels, then evaluate the baselines.

    Idempotent: a second run changes nothing and finds the evaluations in the cache.
    """
    # Imported here: a suite's specs load the evaluation checks, and with them numpy.
    from engine.platforms.nki import suites

    suite = suites.load_suite(name)
    summary = LoadSummary(suite=name)
    to_evaluate: list[Kernel] = []
    for spec in suite.problems:
        for case in spec.cases:
            with transaction.atomic():
                problem, created = Problem.objects.update_or_create(
                    suite=name, slug=spec.slug, case=case, defaults=_spec_fields(spec, case)
                )
                kernel, kernel_created = create_kernel(
                    problem, spec.baseline_for(case), origin=KernelOrigin.BASELINE, name=f"{spec.slug} baseline"
                )
                if problem.baseline_kernel_id != kernel.pk:
                    problem.baseline_kernel = kernel
                    problem.save(update_fields=["baseline_kernel"])
            summary.problems_created += created
            summary.problems_updated += not created
            summary.kernels_created += kernel_created
            if case in evaluate_cases:
                to_evaluate.append(kernel)
    for kernel in to_evaluate:
        for platform in platforms:
            summary.evaluations.append(request_evaluation(kernel, platform))
    if wait:
        wait_for_evaluations(summary.evaluations)
        for evaluation in summary.evaluations:
            evaluation.refresh_from_db()
    return summary


def _spec_fields(spec: Any, case: str) -> dict[str, Any]:
    """A `engine.platforms.nki.suites.ProblemSpec`'s case as Problem fields."""
    counts = spec.peak_counts(case)  # PeakCounts, or None when the suite does not know them
    return {
        "family": spec.family,
        "title": spec.title,
        "description": spec.description,
        "parameters": dict(spec.cases[case]),
        "reference_source": spec.reference_source(case),
        "vector_flops": counts.vector_flops if counts else None,
        "matmul_flops": counts.matmul_flops if counts else None,
        "hbm_bytes": counts.hbm_bytes if counts else None,
        "tolerance": spec.tolerance,
        "visibility": Visibility.PUBLIC,
    }


@dataclass
class ImportSummary:
    suite: str
    problems: list[Problem] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    kernels_created: int = 0

    @property
    def kernels_existing(self) -> int:
        return len(self.kernels) - self.kernels_created


def import_nkibench(path: str | Path, *, suite: str = IMPORTED_SUITE, user: Any = None) -> ImportSummary:
    """Import a directory in AccelOpt's public NKIBench layout (summary.json, reference/, kernels/).

    Each (problem, case) becomes a public problem of `suite` with its own reference file (their references
    reshape inputs for their kernels, so their kernels only run against them), and each case's kernel an
    imported kernel of it. Peak counts come with the spec when the slug is one of our NKIBench problems.
    Idempotent, like load_suite.
    """
    from engine.platforms.nki.suites import read_nkibench_dir  # numpy, as in load_suite

    if suite == DEFAULT_SUITE:
        raise ValidationError(f"import into a suite of its own, not the built-in {DEFAULT_SUITE!r}")
    specs = read_nkibench_dir(Path(path))
    summary = ImportSummary(suite=suite)
    for spec in specs:
        for case in spec.cases:
            with transaction.atomic():
                problem, _ = Problem.objects.update_or_create(
                    suite=suite, slug=spec.slug, case=case, defaults=_spec_fields(spec, case)
                )
                kernel, created = create_kernel(
                    problem, spec.baseline_for(case), origin=KernelOrigin.IMPORTED, author=user,
                    name=f"{spec.slug} case {case} (imported)",
                )
                if problem.baseline_kernel_id is None:
                    problem.baseline_kernel = kernel  # the directory's kernel is the reference point here
                    problem.save(update_fields=["baseline_kernel"])
            summary.problems.append(problem)
            summary.kernels.append(kernel)
            summary.kernels_created += created
    return summary
