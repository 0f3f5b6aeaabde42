"""Leave-one-out over problems: each problem predicted by constants fitted without it."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate, prepare
from engine.platforms.nki.perf.validation import Predictor, fit, format_validation, leave_one_out
from tests.perf.builders import streaming_kernel

GRID = {"engine_dispatch_cycles": (0.0, 64.0, 256.0)}
# Without perf-8's DMA queue interval, packet rate and statement queues: small DMAs would bound these kernels.
BASE = replace(TRN1, dma_queue_issue_s=0.0, dma_packet_s=0.0, affine_load_queues=False)


def _problems():
    # Instruction-bound kernels (small tiles, many ops), so the dispatch cost moves every latency.
    shapes = [(16, 64, 4), (32, 32, 6), (24, 128, 3), (64, 16, 8), (8, 256, 2)]
    return [prepare(streaming_kernel(t, f, ops_per_tile=k)) for t, f, k in shapes]


def test_measurements_the_model_can_reproduce_give_no_leave_one_out_error():
    prepared = _problems()
    truth = replace(BASE, engine_dispatch_cycles=256.0)
    measured = [estimate(p, truth).latency_ms for p in prepared]
    v = leave_one_out([f"p{i}" for i in range(len(prepared))], prepared, measured, BASE, grid=GRID)
    assert v.training[0] > 0.05  # the shipped constants are wrong for these "measurements"
    assert v.leave_one_out[0] < 1e-9  # every fold finds the true dispatch cost from the others
    assert all(m == {"engine_dispatch_cycles": 256.0} for m in v.loo_constants)
    text = format_validation(v)
    assert "leave-one-out: median" in text and "training:" in text


def test_a_problem_unlike_the_others_shows_its_error_only_when_left_out():
    prepared = _problems()
    truth = replace(BASE, engine_dispatch_cycles=256.0)
    measured = [estimate(p, truth).latency_ms for p in prepared]
    measured[0] *= 1.6  # one problem the model cannot explain
    v = leave_one_out([f"p{i}" for i in range(len(prepared))], prepared, measured, BASE, grid=GRID)
    loo_errors = [abs(math.log(p / m)) for p, m in zip(v.loo, v.measured, strict=True)]
    assert loo_errors[0] > 0.4 and max(loo_errors[1:]) < 1e-9


def test_the_fit_replays_each_constant_set_once():
    prepared = _problems()
    predict = Predictor(prepared, GRID)
    measured = np.array([estimate(p, replace(BASE, engine_dispatch_cycles=0.0)).latency_ms for p in prepared])
    subset = np.ones(len(prepared), dtype=bool)
    fitted = fit(predict, measured, BASE, subset)
    assert fitted.engine_dispatch_cycles == 0.0
    before = len(predict.memo)
    fit(predict, measured, BASE, subset)
    assert len(predict.memo) == before
