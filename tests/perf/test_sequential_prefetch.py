"""Loads across a sequential_range boundary (issue 19, NeuronCoreSpec.sequential_prefetch): the loop-carried
dependency holds the next iteration's compute until this one has drained, but not its loads, which read nothing
the loop writes; the DMA queues fetch them one iteration ahead ([STREAM]: double buffering). The matmul tutorial's
fully optimized kernel (a sequential K-block loop) measured 6.97 ms at 85% HFU on trn1; draining the queues at each
of its 56 boundaries cost 1.23 ms of the model's 8.49 ms (docs/history/performance-model.md, perf-8 candidates: matmul tutorial).

Two kernels that differ only in that switch: N iterations of "load a tile, fold it into a running accumulator"
(two Vector ops, longer than the load). Drained, each iteration costs its load and its compute one after the
other; prefetched, every load but the first hides under the previous iteration's compute, so the loop is faster
by (N - 1) loads."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.costs import instruction_costs
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, Trace
from tests.perf.builders import hbm, sbuf

ITERATIONS = 8
FREE = 2048  # fp32 elements per partition: an 8 KiB row, one 1 MiB DMA per iteration
TILE = FREE * 4


def accumulate_kernel(kind: LoopKind = LoopKind.SEQUENTIAL) -> Trace:
    """acc = 0; for t: x = load(X[t]); acc = acc + x; acc = acc * x (loop-carried); store(acc)."""
    tr = Trace()
    x_hbm, out = hbm(tr, "x", ITERATIONS * 128 * TILE), hbm(tr, "out", 128 * TILE)
    acc = sbuf(tr, "acc", TILE)
    loop = tr.add_loop(LoopInfo(kind, ITERATIONS, 1))
    for t in range(ITERATIONS):
        ctx = tr.context_id(((loop, t),))
        x = sbuf(tr, f"x{t}", TILE)
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=FREE,
                  hbm_read=128 * TILE, sbuf_write=128 * TILE, loop_ctx=ctx,
                  accesses=((x_hbm, False, 0, 1, t * 128 * TILE, (t + 1) * 128 * TILE), (x, True, 0, 128, 0, TILE)))
        for _ in range(2):
            tr.append(engine=Engine.VECTOR, op="tensor_tensor", dtype="float32", partitions=128, free_elems=FREE,
                      flops=128 * FREE, loop_ctx=ctx, accesses=((x, False, 0, 128, 0, TILE),
                                                                (acc, False, 0, 128, 0, TILE), (acc, True, 0, 128, 0, TILE)))
    tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=FREE,
              hbm_write=128 * TILE, sbuf_read=128 * TILE,
              accesses=((acc, False, 0, 128, 0, TILE), (out, True, 0, 1, 0, 128 * TILE)))
    return tr.freeze()


def test_a_sequential_loop_prefetches_its_next_load_under_the_current_compute():
    trace = accumulate_kernel()
    drained = estimate(trace, replace(TRN1, sequential_prefetch=False)).latency_ms
    prefetched = estimate(trace, TRN1).latency_ms
    assert TRN1.sequential_prefetch  # on by default
    costs = instruction_costs(trace, TRN1)
    engine = np.asarray(trace.columns["engine"])
    compute_ms = float(costs.seconds[engine == Engine.VECTOR][:2].sum()) * 1e3
    load_ms = (float(costs.dma_engine_s[0] / costs.dma_lanes[0]) + TRN1.dma_fixed_s) * 1e3
    assert load_ms < compute_ms  # compute-bound: every load after the first can hide
    assert drained - prefetched == pytest.approx((ITERATIONS - 1) * load_ms, rel=0.05)


def test_prefetching_does_not_make_a_sequential_loop_an_affine_one():
    """The compute still waits for the previous iteration (the dependency the loop declares), and a load runs at
    most one iteration ahead: an affine loop without the accumulator's chain is not slower."""
    assert estimate(accumulate_kernel(LoopKind.AFFINE)).latency_ms <= estimate(accumulate_kernel()).latency_ms


def test_off_reproduces_the_full_drain():
    """sequential_prefetch=False: each iteration starts when the previous one has drained (perf-7): the loop
    costs about the sum of its iterations."""
    off = replace(TRN1, sequential_prefetch=False)
    one_iteration = estimate(accumulate_kernel(), off).latency_ms / ITERATIONS
    costs = instruction_costs(accumulate_kernel(), off)
    load_ms = (float(costs.dma_engine_s[0] / costs.dma_lanes[0]) + off.dma_fixed_s) * 1e3
    assert one_iteration > load_ms
