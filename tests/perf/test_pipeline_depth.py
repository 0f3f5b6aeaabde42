"""The software pipeline's depth is bounded by SBUF (helper PIPE, issue 19; spills.pipeline_depth).

A software pipeline needs an SBUF slot per step in flight ([STREAM] in engine/platforms/nki/hardware.py), so the compiler
keeps as many iterations of an affine loop side by side as their tiles fit the usable SBUF (at most
affine_interleave); where even one iteration at a time does not fit, it still double-buffers
(affine_interleave_unfit = 2) and spills. Each test: the same kernel with the loop pipelined (affine_range) and
in program order (static_range), and the bound turned off (perf-5: always affine_interleave deep)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate, lowered, prepare
from engine.platforms.nki.perf.costs import dma_engine_seconds
from engine.platforms.nki.perf.lowering import statement_weight
from engine.platforms.nki.perf.spills import pipeline_depth
from engine.platforms.nki.simulator.trace import LoopKind
from tests.perf.test_partition_broadcast import BANK, _run
from tests.perf.test_sbuf_working_set import STAGES, pipeline_kernel

CAPACITY = TRN1.sbuf_bytes_per_partition * TRN1.sbuf_usable_fraction
UNBOUNDED = replace(TRN1, affine_interleave_unfit=0)  # perf-5


def _depth(trace, spec=TRN1) -> int:
    use = prepare(trace).deps.sbuf
    return pipeline_depth(use, len(trace), spec.sbuf_bytes_per_partition * spec.sbuf_usable_fraction,
                          spec.partitions, spec.affine_interleave, spec.affine_interleave_unfit)


def _one_tile_ms(size: int) -> float:
    return dma_engine_seconds(size, 128, TRN1) / TRN1.dma_queues * 1e3


def test_iterations_that_fit_two_at_a_time_run_two_at_a_time_and_nothing_is_fetched_again():
    """Three iterations of an 80 KiB tile each: three side by side (240 KiB) do not fit the usable 172.8 KiB, two
    do. The compiler pipelines two deep, so the affine loop reads its input once, like program order; without the
    bound (three deep) two tiles are fetched again, which costs two tiles of DMA."""
    tile = 80 * 1024
    assert 2 * tile < CAPACITY < STAGES * tile
    affine = pipeline_kernel(LoopKind.AFFINE, tile, tiles=STAGES, small_bytes=1024)
    assert _depth(affine) == 2
    size = 128 * tile
    bounded = estimate(affine)
    in_order = estimate(pipeline_kernel(LoopKind.STATIC, tile, tiles=STAGES, small_bytes=1024))
    unbounded = estimate(affine, UNBOUNDED)
    assert bounded.profile["hbm_read_bytes"] == in_order.profile["hbm_read_bytes"] == STAGES * size
    assert unbounded.profile["hbm_read_bytes"] == (STAGES + 2) * size
    assert unbounded.latency_ms - bounded.latency_ms == pytest.approx(2 * _one_tile_ms(size), rel=0.15)


def test_an_iteration_that_does_not_fit_alone_is_still_double_buffered():
    """Each iteration holds its 96 KiB tile and the 96 KiB product at once (192 KiB: over the usable SBUF even in
    program order). The compiler still keeps two iterations in flight (double buffering) and lets more go than
    program order would, but fewer than three iterations side by side."""
    tile = 96 * 1024
    assert tile < CAPACITY < 2 * tile
    affine = pipeline_kernel(LoopKind.AFFINE, tile, tiles=STAGES)
    assert _depth(affine) == TRN1.affine_interleave_unfit == 2
    assert _depth(affine, UNBOUNDED) == TRN1.affine_interleave
    read = {name: estimate(trace, spec).profile["hbm_read_bytes"] for name, trace, spec in (
        ("in_order", pipeline_kernel(LoopKind.STATIC, tile, tiles=STAGES), TRN1),
        ("double", affine, TRN1), ("unbounded", affine, UNBOUNDED))}
    assert read["in_order"] < read["double"] < read["unbounded"]


def test_the_matmuls_and_copies_of_a_broadcast_are_not_statements_of_the_kernel():
    """A 1024-wide broadcast is lowered to two matmuls and two copies (lowering.py); they weigh nothing in a spill
    gap's length, every instruction the simulator traced weighs one. So the lowering changes what instructions
    cost, not which data the planner evicts."""
    _, trace = _run(2 * BANK, 2 * BANK)
    prepared = prepare(trace)
    low = lowered(prepared, TRN1.psum_bank_bytes_per_partition)
    weight = statement_weight(low.trace, len(trace.tensors))
    assert len(low.trace) > len(trace)
    assert weight is not None and weight.sum() == len(trace)
    assert np.all(weight[np.asarray(low.trace.columns["opcode"]) == low.trace.op_names.index("broadcast_matmul")] == 0)
    assert statement_weight(prepared.trace, len(trace.tensors)) is None
