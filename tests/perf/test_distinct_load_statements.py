"""Repeated loads of one HBM region (issue 19, deps._repeated_loads): the compiler keeps a loop-invariant load,
one statement run again, in SBUF; two different statements that load the same region are two DMAs
(neuron-profile counts rmsnorm_matmul's twice-loaded rows read 1.84 times). Two kernels that differ only in the
source line of the second load: as the same statement it is skipped, as another statement it runs, so that
kernel reads one tile more from HBM and is slower by about one tile of DMA."""

from __future__ import annotations

import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.costs import dma_engine_seconds
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, Trace
from tests.perf.builders import hbm, sbuf

TILE = 32 * 1024  # bytes per partition: both tiles fit SBUF with room to spare


def kernel(second_line: int) -> Trace:
    """Two iterations of: load x <- R (line 10 in the first, `second_line` in the second); a = reduce(x[:, :64])
    (a short reduction, so the difference is the DMA's)."""
    tr = Trace()
    size = 128 * TILE
    region = hbm(tr, "R", size)
    loop = tr.add_loop(LoopInfo(LoopKind.AFFINE, 2, 9))
    for it, line in enumerate((10, second_line)):
        ctx = tr.context_id(((loop, it),))
        x, a = sbuf(tr, f"x{it}", TILE), sbuf(tr, f"a{it}", 1024)
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=TILE // 4,
                  hbm_read=size, sbuf_write=size, loop_ctx=ctx, line=line,
                  accesses=((region, False, 0, 1, 0, size), (x, True, 0, 128, 0, TILE)))
        tr.append(engine=Engine.VECTOR, op="tensor_reduce", dtype="float32", partitions=128, free_elems=64,
                  loop_ctx=ctx, line=line + 1, accesses=((x, False, 0, 128, 0, 256), (a, True, 0, 128, 0, 1024)))
    return tr.freeze()


def test_a_second_load_statement_of_a_region_runs_where_a_repeated_statement_is_kept():
    assert 2 * TILE < TRN1.sbuf_bytes_per_partition * TRN1.sbuf_usable_fraction
    hoisted, distinct = estimate(kernel(second_line=10)), estimate(kernel(second_line=20))
    size = 128 * TILE
    assert hoisted.profile["hbm_read_bytes"] == size  # the loop-invariant load ran once
    assert distinct.profile["hbm_read_bytes"] == 2 * size
    assert hoisted.profile["spill_save_bytes"] == distinct.profile["spill_save_bytes"] == 0
    one_tile_ms = dma_engine_seconds(size, 128, TRN1) / TRN1.dma_queues * 1e3
    assert distinct.latency_ms - hoisted.latency_ms == pytest.approx(one_tile_ms, rel=0.25)
