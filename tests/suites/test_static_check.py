"""The suite's own files pass the evaluation pipeline's static check, as uploaded kernels must."""

from __future__ import annotations

import pytest

from engine.evaluator.static_check import check_kernel_source, check_reference_source
from engine.platforms.nki.suites import load_suite

SLUGS = [spec.slug for spec in load_suite("nkibench").problems]


@pytest.mark.parametrize("slug", SLUGS)
def test_the_baseline_and_reference_pass_the_static_check(suite, slug):
    spec = suite.problem(slug)
    assert check_kernel_source(spec.baseline_source).kernel_name == "kernel"
    for case in spec.case_names:
        check_reference_source(spec.reference_source(case))
