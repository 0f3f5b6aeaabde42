"""Baselines evaluated through the sandboxed evaluation pipeline, as `load_suite` and `make run` do.

Only the problems that exercise something the direct simulation test does not: a scalar input (eps) and
a reference that restricts the input distributions.
"""

from __future__ import annotations

import pytest

from engine.evaluator import evaluate
from engine.platforms.nki.suites import load_suite


@pytest.mark.parametrize("slug", ["mamba", "add_rmsnorm_matmul", "matmul_add_rmsnorm"])
def test_the_baseline_evaluates_correct_through_the_pipeline(slug):
    spec = load_suite().problem(slug)
    result = evaluate(
        spec.baseline_for("mini"),
        spec.reference_source("mini"),
        peak_counts=spec.peak_counts("mini").as_dict(),
        tolerance=spec.tolerance,
    )
    assert result.correct, f"{slug}: {result.error_kind}: {result.error_message}"
    assert 0 < result.peak_fraction <= 1.0
