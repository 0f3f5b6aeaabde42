"""Double buffering only where two iterations' own tiles fit SBUF (helper MAMBA2, issue 19; off by default).

NeuronCoreSpec.affine_unfit_within_sbuf: where even program order does not fit the usable SBUF, the shipped model
keeps affine_interleave_unfit (2) iterations in flight anyway (double buffering, tests/perf/test_pipeline_depth.py).
A double buffer is a second slot for each tile an iteration makes, so with the flag on the compiler double-buffers
only where those slots fit (kept copies of repeated loads aside), else runs one iteration at a time. Evidence:
trn1's Mamba baseline spills one accumulator tile per state step, not the two iterations' temporaries
(docs/history/performance-model.md, "perf-8 candidates: mamba HBM bytes"). The two kernels: one iteration's tiles fit twice,
or do not fit even once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate, prepare
from engine.platforms.nki.perf.costs import dma_engine_seconds
from engine.platforms.nki.perf.spills import pipeline_depth
from engine.platforms.nki.simulator.trace import LoopKind
from tests.perf.test_pipeline_depth import CAPACITY
from tests.perf.test_sbuf_working_set import STAGES, pipeline_kernel

ON = replace(TRN1, affine_unfit_within_sbuf=True)


def _depth(trace, spec=TRN1) -> int:
    return pipeline_depth(prepare(trace).deps.sbuf, len(trace), CAPACITY, spec.partitions, spec.affine_interleave,
                          spec.affine_interleave_unfit, unfit_within_sbuf=spec.affine_unfit_within_sbuf)


def test_an_iteration_too_big_for_two_slots_runs_alone_and_spills_like_program_order():
    """Each iteration holds its 96 KiB tile and its 96 KiB product (192 KiB, over the usable SBUF even alone).
    With the flag the loop runs one iteration at a time: it reads HBM exactly as its program-order twin (a
    static_range loop), where double buffering (the default) re-fetches and spills more and is slower by
    about that DMA."""
    tile = 96 * 1024
    assert tile < CAPACITY < 2 * tile
    affine = pipeline_kernel(LoopKind.AFFINE, tile, tiles=STAGES)
    assert _depth(affine) == 2 and _depth(affine, ON) == 1
    in_order = estimate(pipeline_kernel(LoopKind.STATIC, tile, tiles=STAGES), ON)
    single, double = estimate(affine, ON), estimate(affine, TRN1)
    assert single.profile["hbm_read_bytes"] == in_order.profile["hbm_read_bytes"]
    extra = double.profile["hbm_read_bytes"] - single.profile["hbm_read_bytes"]
    assert extra >= 128 * tile  # at least one tile more fetched with two iterations in flight
    assert double.latency_ms > single.latency_ms
    per_tile_ms = dma_engine_seconds(128 * tile, 128, TRN1) / TRN1.dma_queues * 1e3
    moved = extra + double.profile["hbm_write_bytes"] - single.profile["hbm_write_bytes"]  # spill saves too
    assert double.latency_ms - single.latency_ms == pytest.approx(moved / (128 * tile) * per_tile_ms, rel=0.25)


def test_iterations_that_fit_two_slots_are_still_double_buffered():
    """An iteration of a 64 KiB tile and a 64 KiB product: program order fits (128 KiB), so the flag changes
    nothing; the bound is the shipped one (the deepest whose live set fits)."""
    tile = 64 * 1024
    affine = pipeline_kernel(LoopKind.AFFINE, tile, tiles=STAGES)
    assert _depth(affine, ON) == _depth(affine) >= 1
    assert estimate(affine, ON).latency_ms == estimate(affine, TRN1).latency_ms
