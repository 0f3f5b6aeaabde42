"""Triton problems and kernels as rows, for the per-platform tests that need no FlashInfer-Bench parsing."""

from __future__ import annotations

from typing import Any

import pytest

from benchmark.models import Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256

TRITON_SOURCE = "import torch\nimport triton\n\n\ndef run(x, y):\n    return x\n"


@pytest.fixture
def triton_problem(db: Any) -> Problem:
    problem = Problem.objects.create(
        suite="flashinfer", slug="studio_axpy_h16", case="workloads", family="elementwise", language="triton",
        reference_source="import torch\n\n\ndef run(x, y):\n    return 2.0 * x + y\n",
        definition={"name": "studio_axpy_h16"}, workloads=[{"definition": "studio_axpy_h16", "workload": {"uuid": "w1", "axes": {"batch": 3}, "inputs": {}}}],
    )
    baseline = Kernel.objects.create(problem=problem, source=TRITON_SOURCE, sha256=source_sha256(TRITON_SOURCE),
                                     origin=KernelOrigin.IMPORTED, name="axpy solution", entry_point="main.py::run")
    problem.baseline_kernel = baseline
    problem.save(update_fields=["baseline_kernel"])
    return problem


@pytest.fixture
def nki_problem(db: Any) -> Problem:
    return Problem.objects.create(slug="silu", case="mini", family="elementwise", reference_source="# ref")
