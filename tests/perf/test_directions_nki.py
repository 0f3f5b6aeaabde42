"""The direction list again, on NKI kernels we wrote, run through the simulator and then the model."""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.perf import estimate
from engine.platforms.nki.simulator import simulate
from tests.perf import nki_kernels as k


@pytest.fixture(scope="module")
def x():
    return k.inputs()


def _run(kernel, inputs):
    sim = simulate(kernel, inputs)
    np.testing.assert_allclose(sim.outputs[0], np.exp(inputs[0]), rtol=2e-5)  # same computation
    return estimate(sim.trace)


def test_half_the_hbm_traffic_is_predicted_faster(x):
    half, full = _run(k.exp_streaming(), x), _run(k.exp_round_trip(), x)
    traffic = [r.profile["hbm_read_bytes"] + r.profile["hbm_write_bytes"] for r in (half, full)]
    assert traffic[1] == 2 * traffic[0]
    assert half.latency_ms < full.latency_ms


def test_affine_range_overlapping_dma_with_compute_is_predicted_faster_than_sequential_range(x):
    assert _run(k.exp_streaming(), x).latency_ms < _run(k.exp_sequential(), x).latency_ms


def test_fewer_larger_tiles_are_predicted_faster(x):
    assert _run(k.exp_streaming(2048), x).latency_ms < _run(k.exp_streaming(128), x).latency_ms


def test_streaming_tiles_is_predicted_faster_than_keeping_a_working_set_that_spills():
    wide = k.inputs(k.RESIDENT_COLS)
    resident = _run(k.exp_resident(), wide)
    streaming = _run(k.exp_streaming(cols=k.RESIDENT_COLS), wide)
    assert resident.profile["spill_save_bytes"] > 0 and streaming.profile["spill_save_bytes"] == 0
    assert streaming.latency_ms < resident.latency_ms


def test_a_deliberately_redundant_kernel_is_predicted_slower(x):
    assert _run(k.exp_redundant(), x).latency_ms > _run(k.exp_streaming(), x).latency_ms
