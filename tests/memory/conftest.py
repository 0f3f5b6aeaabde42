from __future__ import annotations

import pytest

from benchmark.models import Problem
from memory import services


@pytest.fixture
def problem(db):
    return Problem.objects.create(slug="silu", case="mini", family="elementwise", reference_source="# ref")


@pytest.fixture
def other_problem(db):
    return Problem.objects.create(slug="matmul", case="mini", family="matmul", reference_source="# ref")


@pytest.fixture
def make_entry(db):
    counter = iter(range(10_000))

    def make(**overrides):
        n = next(counter)
        fields = {
            "title": f"rewrite {n}",
            "summary": f"what rewrite {n} does",
            "slow_kernel": f"def kernel():\n    return {n}  # slow\n",
            "fast_kernel": f"def kernel():\n    return {n}  # fast\n",
            "speedup": 1.5,
        }
        fields.update(overrides)
        return services.add_entry(**fields)

    return make
