from __future__ import annotations

import types

import numpy as np
import pytest

from benchmark.suites import Suite, load_suite


@pytest.fixture(scope="session")
def suite() -> Suite:
    return load_suite("nkibench")


def exec_reference(source: str, name: str = "reference") -> types.ModuleType:
    """Run a reference file's text as a module, the way the evaluation child does."""
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def seeded_inputs(module: types.ModuleType, seed: int = 0) -> list:
    np.random.seed(seed)
    return list(module.get_inputs())


def relative_l2(output: np.ndarray, reference: np.ndarray) -> float:
    output = np.asarray(output, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    return float(np.linalg.norm(output - reference) / max(np.linalg.norm(reference), 1e-30))
