"""SBUF working set over time (issue 19): the compiler pipelines the iterations of an affine_range loop over
the engines its body uses ([NKI-AFFINE] in engine/platforms/nki/hardware.py), so one iteration per engine is in flight and
their tiles are live together; a static_range loop is left in program order. Two kernels that differ only in
the loop kind: the affine one's working set no longer fits, it re-fetches and is slower by those bytes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate, prepare
from engine.platforms.nki.perf.costs import dma_engine_seconds
from engine.platforms.nki.perf.spills import interleaved_positions
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, Trace
from tests.perf.builders import hbm, sbuf

TILES = 12
STAGES = 3  # DMA, Scalar, Vector


def pipeline_kernel(kind: LoopKind, tile_bytes: int, tiles: int = TILES, small_bytes: int | None = None) -> Trace:
    """Per iteration: load x (DMA, `tile_bytes` per partition), a = reduce(x) (Scalar), b = a * a (Vector),
    store b (DMA); a and b are `small_bytes` per partition (default: as x)."""
    tr = Trace()
    small_bytes = small_bytes or tile_bytes
    free, small = tile_bytes // 4, small_bytes // 4
    size = 128 * tile_bytes
    src, out = hbm(tr, "x", tiles * size), hbm(tr, "out", tiles * 128 * small_bytes)
    loop = tr.add_loop(LoopInfo(kind, tiles, 1))
    for t in range(tiles):
        ctx = tr.context_id(((loop, t),))
        x = sbuf(tr, f"x{t}", tile_bytes)
        a, b = (sbuf(tr, f"{k}{t}", small_bytes) for k in "ab")
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=free, hbm_read=size,
                  sbuf_write=size, loop_ctx=ctx,
                  accesses=((src, False, 0, 1, t * size, (t + 1) * size), (x, True, 0, 128, 0, tile_bytes)))
        tr.append(engine=Engine.SCALAR, op="activation", dtype="float32", partitions=128, free_elems=free,
                  flops=128 * free, loop_ctx=ctx,
                  accesses=((x, False, 0, 128, 0, tile_bytes), (a, True, 0, 128, 0, small_bytes)))
        tr.append(engine=Engine.VECTOR, op="tensor_tensor", dtype="float32", partitions=128, free_elems=small,
                  flops=128 * small, loop_ctx=ctx,
                  accesses=((a, False, 0, 128, 0, small_bytes), (b, True, 0, 128, 0, small_bytes)))
        tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=small,
                  hbm_write=128 * small_bytes, sbuf_read=128 * small_bytes, loop_ctx=ctx,
                  accesses=((b, False, 0, 128, 0, small_bytes),
                            (out, True, 0, 1, t * 128 * small_bytes, (t + 1) * 128 * small_bytes)))
    return tr.freeze()


def test_an_affine_loop_runs_one_iteration_per_engine_side_by_side():
    """The compiler's order: the first instruction of three iterations (one per engine of the body), then the
    second of each, ...; a static_range loop keeps program order."""
    use = prepare(pipeline_kernel(LoopKind.AFFINE, 4096, tiles=4)).deps.sbuf
    pos = interleaved_positions(use, 16, TRN1.affine_interleave)
    order = np.argsort(pos)
    # Instruction 4*t + k is step k of iteration t.
    assert order[:6].tolist() == [0, 4, 8, 1, 5, 9]
    assert order[12:].tolist() == [12, 13, 14, 15]  # the fourth iteration starts the next group
    static = prepare(pipeline_kernel(LoopKind.STATIC, 4096, tiles=4)).deps.sbuf
    assert interleaved_positions(static, 16, TRN1.affine_interleave) is None


def test_tiles_that_fit_one_at_a_time_but_not_three_at_a_time_are_fetched_again():
    """With the pipeline depth not bounded by SBUF (affine_interleave_unfit=0, perf-5; since helper PIPE the depth
    is the deepest that fits: tests/perf/test_pipeline_depth.py). Three iterations, each loading an 80 KiB-per-partition tile x and reducing it to 1 KiB. In program order
    one x is live at a time; pipelined, the three are (240 KiB, over the usable 172.8 KiB), so the compiler
    lets whole x tiles go, in the order of the data, until the rest fits: x0 (its gap ends before the peak, at
    the first reduce, which still holds x0, x1, x2), then x1. Each comes back from HBM (x is a copy of HBM: a
    re-fetch, no spill save). The kernels are DMA-bound: the pipelined one is slower by two tiles of DMA."""
    tile = 80 * 1024
    capacity = TRN1.sbuf_bytes_per_partition * TRN1.sbuf_usable_fraction
    assert tile < capacity < STAGES * tile
    unbounded = replace(TRN1, affine_interleave_unfit=0)
    in_order = estimate(pipeline_kernel(LoopKind.STATIC, tile, tiles=STAGES, small_bytes=1024), unbounded)
    pipelined = estimate(pipeline_kernel(LoopKind.AFFINE, tile, tiles=STAGES, small_bytes=1024), unbounded)
    size = 128 * tile
    assert in_order.profile["hbm_read_bytes"] == STAGES * size
    assert pipelined.profile["hbm_read_bytes"] == (STAGES + 2) * size
    assert pipelined.profile["spill_save_bytes"] == 0
    one_tile_ms = dma_engine_seconds(size, 128, TRN1) / TRN1.dma_queues * 1e3
    assert pipelined.latency_ms - in_order.latency_ms == pytest.approx(2 * one_tile_ms, rel=0.15)


def test_small_tiles_fit_side_by_side_and_the_loop_kind_changes_nothing():
    """The same kernels with 4 KiB tiles: three iterations fit, nothing moves (the s512 Mamba pair)."""
    in_order = estimate(pipeline_kernel(LoopKind.STATIC, 4096))
    pipelined = estimate(pipeline_kernel(LoopKind.AFFINE, 4096))
    assert pipelined.profile["hbm_read_bytes"] == in_order.profile["hbm_read_bytes"]
    assert pipelined.latency_ms == pytest.approx(in_order.latency_ms, rel=1e-9)
