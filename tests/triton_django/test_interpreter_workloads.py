"""The Triton interpreter checks more than the smallest workload (issue 24): a kernel correct at the smallest
workload (batch 3: 48 elements, one block of 64) but wrong at a larger one (batch 8: 128 elements, whose second
block it never computes) is judged incorrect, the failing workload named. Runs in the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark import services
from benchmark.models import Problem

FIXTURES = Path(__file__).resolve().parent / "fixtures"

pytestmark = pytest.mark.django_db

ONE_BLOCK = """import torch
import triton
import triton.language as tl


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, 2.0 * x + y, mask=mask)


def run(x, y):
    out = torch.zeros_like(x)
    _axpy[(1,)](x, y, out, x.numel(), BLOCK=64)  # one block: every element only while n <= 64
    return out
"""


@pytest.fixture
def problem(settings) -> Problem:
    settings.ACCELOPT_EVALUATION_INLINE = True
    return services.import_flashinfer(services.flashinfer_items_from_paths([str(FIXTURES)]),
                                      platform="h100").problems[0]


def test_a_kernel_wrong_only_at_a_larger_workload_is_caught_by_the_interpreter(problem, engineer):
    _, _, evaluation = services.upload_kernel(engineer, kernel_source=ONE_BLOCK, problem=problem, wait=True)
    evaluation.refresh_from_db()
    assert evaluation.backend == "triton-interpreter"
    assert evaluation.correct is False and evaluation.error_kind == "incorrect"
    assert evaluation.error_message.startswith("workload studio-axpy-b8:"), evaluation.error_message


def test_the_same_kernel_with_a_grid_over_every_block_is_correct_on_every_workload(problem, engineer):
    fixed = ONE_BLOCK.replace("_axpy[(1,)]", "_axpy[(triton.cdiv(x.numel(), 64),)]")
    _, _, evaluation = services.upload_kernel(engineer, kernel_source=fixed, problem=problem, wait=True)
    evaluation.refresh_from_db()
    assert evaluation.correct is True, evaluation.error_message
    assert [w["uuid"] for w in evaluation.profile["workloads"]] == ["studio-axpy-b3", "studio-axpy-b8"]
    assert evaluation.latency_ms is None
