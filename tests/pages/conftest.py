"""Fixtures for the HTML page tests: a problem with a baseline, and runs owned by an engineer."""

from __future__ import annotations

from typing import Any

import pytest

from benchmark.models import Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256
from tests.conftest import TEST_PASSWORD

BASELINE = "import neuronxcc.nki as nki\n\n@nki.jit\ndef kernel(x):\n    return x\n"


@pytest.fixture
def problem(db: Any) -> Problem:
    problem = Problem.objects.create(slug="double", case="mini", family="elementwise", reference_source="# ref",
                                     parameters={"M": 4})
    baseline = Kernel.objects.create(problem=problem, source=BASELINE, sha256=source_sha256(BASELINE),
                                     origin=KernelOrigin.BASELINE, name="double baseline")
    problem.baseline_kernel = baseline
    problem.save(update_fields=["baseline_kernel"])
    return problem


@pytest.fixture
def login(client: Any) -> Any:
    def sign_in(user: Any) -> Any:
        assert client.login(username=user.username, password=TEST_PASSWORD)
        return client

    return sign_in
