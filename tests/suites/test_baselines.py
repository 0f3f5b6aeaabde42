"""Every baseline kernel, simulated on its mini case, matches its reference within the suite tolerance."""

from __future__ import annotations

import types

import numpy as np
import pytest

import engine.platforms.nki.simulator
from engine.evaluator.checks import relative_l2
from engine.platforms.nki.suites import load_suite

from .conftest import exec_reference, seeded_inputs

SLUGS = [spec.slug for spec in load_suite("nkibench").problems]

pytestmark = pytest.mark.skipif(
    not hasattr(engine.platforms.nki.simulator, "simulate"), reason="the NKI simulator (engine.platforms.nki.simulator.simulate) is not built yet"
)


@pytest.fixture(scope="module")
def simulator():
    engine.platforms.nki.simulator.install()
    return engine.platforms.nki.simulator


def load_kernel(source: str, name: str):
    module = types.ModuleType(name)
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)
    return module.kernel


@pytest.mark.parametrize("slug", SLUGS)
def test_the_baseline_matches_the_reference_on_the_mini_case(suite, simulator, slug):
    spec = suite.problem(slug)
    reference = exec_reference(spec.reference_source("mini"))
    inputs = seeded_inputs(reference, seed=1)
    expected = reference.forward(*[np.copy(a) if hasattr(a, "shape") else a for a in inputs])
    kernel = load_kernel(spec.baseline_for("mini"), f"baseline_{slug}")

    simulation = simulator.simulate(kernel, reference.transform_to_nki_inputs(inputs), platform="trn1")

    outputs = reference.transform_nki_outputs(simulation.outputs, expected)
    expected_outputs = expected if isinstance(expected, (tuple, list)) else (expected,)
    for index, (got, want) in enumerate(zip(outputs, expected_outputs, strict=True)):
        error = relative_l2(got, want)
        assert error <= spec.tolerance, f"{slug} output {index}: relative L2 error {error:.3g}"
