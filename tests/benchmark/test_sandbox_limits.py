"""Sandbox limits follow a problem's size (the bytes its inputs and outputs move), not its case name."""

from __future__ import annotations

import pytest

from benchmark import conf, services
from benchmark.models import Problem

# A user's own reference; 2048 rows move 8 MiB in and 8 MiB out (over the line), 64 rows 512 KiB.
REFERENCE = """
import numpy as np


def get_inputs():
    return [np.random.normal(size=({rows}, 1024)).astype(np.float32)]


def forward(x):
    return 2 * x
"""
KERNEL = "def kernel(x):\n    return x * 2\n"


def is_large(limits) -> bool:
    assert limits.memory_bytes in (conf.memory_bytes(True), conf.memory_bytes(False))
    return limits.memory_bytes == conf.memory_bytes(True) and limits.cpu_seconds == conf.timeout_seconds(True)


def test_an_uploaded_reference_with_large_inputs_and_outputs_gets_the_large_limits(engineer, fake_pipeline):
    kernel, _, _ = services.upload_kernel(engineer, kernel_source=KERNEL, reference_source=REFERENCE.format(rows=2048))
    assert kernel.problem.hbm_bytes == 2 * 2048 * 1024 * 4 > conf.LARGE_PROBLEM_HBM_BYTES
    assert is_large(fake_pipeline.calls[0]["limits"])


def test_a_small_uploaded_reference_keeps_the_small_limits(engineer, fake_pipeline):
    kernel, _, _ = services.upload_kernel(engineer, kernel_source=KERNEL, reference_source=REFERENCE.format(rows=64))
    assert kernel.problem.hbm_bytes == 2 * 64 * 1024 * 4
    assert not is_large(fake_pipeline.calls[0]["limits"])


def test_evaluating_a_kernel_against_a_large_reference_file_uses_the_large_limits(fake_pipeline):
    """`manage.py evaluate --reference` with a full-size reference no longer runs into the small memory cap."""
    services.evaluate_source(KERNEL, reference_source=REFERENCE.format(rows=2048))
    services.evaluate_source(KERNEL, reference_source=REFERENCE.format(rows=64))
    assert [is_large(call["limits"]) for call in fake_pipeline.calls] == [True, False]


def test_a_reference_that_cannot_be_measured_is_evaluated_with_the_large_limits(fake_pipeline):
    broken = "def get_inputs():\n    raise ValueError('no inputs')\n\n\ndef forward(x):\n    return x\n"
    assert services.reference_size(broken) is None
    services.evaluate_source(KERNEL, reference_source=broken)
    assert is_large(fake_pipeline.calls[0]["limits"])


@pytest.mark.parametrize(("case", "hbm_bytes", "large"), [
    ("mini", 1024**2, False), ("full", 1024**3, True), ("full", 1024**2, False), ("mini", 64 * 1024**2, True),
])
def test_a_stored_problem_is_sized_by_its_byte_count_whatever_its_case(db, case, hbm_bytes, large):
    problem = Problem.objects.create(slug="double", case=case, reference_source="# ref", hbm_bytes=hbm_bytes)
    assert is_large(services.limits_for(problem)) is large
