"""Our references follow NKIBench's reference contract and compute the same math as AccelOpt's."""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.suites import load_suite

from .conftest import exec_reference, seeded_inputs

SLUGS = [spec.slug for spec in load_suite("nkibench").problems]


@pytest.mark.parametrize("slug", SLUGS)
def test_the_mini_reference_runs_and_round_trips_through_the_nki_transforms(suite, slug):
    module = exec_reference(suite.problem(slug).reference_source("mini"))
    inputs = seeded_inputs(module)
    expected = module.forward(*inputs)
    assert expected.dtype == np.float32 and np.all(np.isfinite(expected))
    nki_inputs = module.transform_to_nki_inputs(inputs)
    # NKIBench's layouts reshape only (test_nkibench_interface.py pins which): the sizes stay.
    assert [np.size(a) for a in nki_inputs] == [np.size(a) for a in inputs]
    (compared,) = module.transform_nki_outputs(expected.copy(), expected)
    assert compared.shape == expected.shape


def test_the_output_transform_names_a_wrong_output_size(suite):
    module = exec_reference(suite.problem("silu").reference_source("mini"))
    expected = module.forward(*seeded_inputs(module))
    with pytest.raises(ValueError, match=r"output 0 has shape \(256, 256\); expected \(256, 512\)"):
        module.transform_nki_outputs(np.zeros((256, 256), np.float32), expected)


def test_inputs_are_reproducible_from_the_seed(suite):
    module = exec_reference(suite.problem("adamw").reference_source("mini"))
    first, second = seeded_inputs(module, seed=7), seeded_inputs(module, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert np.all(first[3] >= 0), "v (the second moment) must be non-negative"
