"""The cuda backend's method on a real GPU (skipped where PyTorch sees none, as on our CPU machines; the
conftest sets TRITON_INTERPRET=1 unless it is set: run these alone with `TRITON_INTERPRET=0 pytest tests/triton/test_cuda.py`)."""

from __future__ import annotations

import os

import pytest
import torch

from engine.platforms.triton import catalog
from engine.platforms.triton.local import evaluate_case

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1",
    reason="needs an NVIDIA GPU, and Triton compiling for it (TRITON_INTERPRET unset)",
)


@pytest.mark.parametrize("name", catalog.SMALL_WORKLOADS)
def test_on_a_gpu_our_solutions_are_correct_timed_and_under_the_roofline(name, tmp_path):
    workload = catalog.workload(name)
    definition = catalog.definition(workload.definition)
    result = evaluate_case(definition, workload, catalog.solution(definition.name), workdir=tmp_path,
                           device="cuda", time_it=True)
    assert result.status in ("correct", "unstable_timing"), result.message
    assert result.latency_ms is not None and result.latency_ms > 0 and result.reference_ms is not None
    assert result.peak_fraction is None or result.peak_fraction <= 1.0
