from __future__ import annotations

import types

import numpy as np
import pytest

from engine.platforms.nki.suites import Suite, load_suite


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
