"""The affine loops around an innermost one are software-pipelined too (helper QUEUE, issue 19;
`NeuronCoreSpec.affine_outer_pipeline`, spills.interleaved_positions).

The kernel: `for t in affine_range(T)`: load x[t], `for h in affine_range(2)`: y[t, h] = f(x[t, h]) (Vector),
store y[t] (adamw's and silu's shape, the Mamba tutorial's v2 per channel tile). With every DMA on one in-order
queue (the Sync Engine's `qSyncIO0`, [PERF-GUIDE] "Opt #4"), iteration t + 1's load waits behind iteration t's
store, which waits for t's compute: unless the compiler issues the next iterations' loads ahead ([PERF-GUIDE]
"Opt #4": overlap data loading with computation; [STREAM]: double buffering), the loads and the compute take
turns. The same kernel with the outer loop a static_range ("no loop-level optimizations", [NKI-AFFINE]) keeps
program order, and so does the affine one with the effect off (perf-7)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate, prepare
from engine.platforms.nki.perf.costs import instruction_costs
from engine.platforms.nki.perf.spills import interleaved_positions
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, Trace
from tests.perf.builders import hbm, sbuf

TILES = 8
ON = replace(TRN1, affine_outer_pipeline=True, dma_queue_assignment="one")
OFF = replace(ON, affine_outer_pipeline=False)


def outer_kernel(kind: LoopKind, free: int = 4096, tiles: int = TILES, *, split: int = 1,
                 load_loop: bool = False) -> Trace:
    """Per outer iteration t (loop kind `kind`): load x[t] ([128, free] fp32), an inner affine loop of two
    Vector ops on its halves into y[t], store y[t]. Each instance of an inner loop is a loop of its own (as the
    simulator records it), on one source line. `split`: the outer loop is `for a in range(tiles // split)` around
    `for b in range(split)` (adamw's `for i0, i1`); `load_loop`: x[t] is loaded half by half in a loop of its own."""
    tr = Trace()
    tile, half = free * 4, free * 2
    size = 128 * tile
    src, out = hbm(tr, "x", tiles * size), hbm(tr, "y", tiles * size)
    top = tr.add_loop(LoopInfo(kind, tiles // split, 1))
    for t in range(tiles):
        if t % split == 0:
            sub = tr.add_loop(LoopInfo(kind, split, 4)) if split > 1 else -1
        nest = ((top, t // split), (sub, t % split)) if split > 1 else ((top, t),)
        ctx = tr.context_id(nest)
        x, y = sbuf(tr, f"x{t}", tile), sbuf(tr, f"y{t}", tile)
        pieces = [(0, tile)] if not load_loop else [(0, half), (half, tile)]
        loads = tr.add_loop(LoopInfo(LoopKind.AFFINE, 2, 3)) if load_loop else -1
        for p, (lo, hi) in enumerate(pieces):
            at = tr.context_id(nest + ((loads, p),)) if load_loop else ctx
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=(hi - lo) // 4,
                      hbm_read=128 * (hi - lo), sbuf_write=128 * (hi - lo), loop_ctx=at,
                      accesses=((src, False, 0, 1, t * size + 128 * lo, t * size + 128 * hi),
                                (x, True, 0, 128, lo, hi)))
        inner = tr.add_loop(LoopInfo(LoopKind.AFFINE, 2, 2))
        for h in range(2):
            tr.append(engine=Engine.VECTOR, op="tensor_scalar", dtype="float32", partitions=128,
                      free_elems=free // 2, flops=128 * free // 2, loop_ctx=tr.context_id(nest + ((inner, h),)),
                      accesses=((x, False, 0, 128, h * half, (h + 1) * half),
                                (y, True, 0, 128, h * half, (h + 1) * half)))
        tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=free, hbm_write=size,
                  sbuf_read=size, loop_ctx=ctx,
                  accesses=((y, False, 0, 128, 0, tile), (out, True, 0, 1, t * size, (t + 1) * size)))
    return tr.freeze()


def _order(trace: Trace, depth: int, outer: bool, count: int = 3) -> list[str]:
    pos = interleaved_positions(prepare(trace).deps.sbuf, len(trace), depth, outer=outer)
    order = np.arange(len(trace)) if pos is None else np.argsort(pos)
    name = {Engine.DMA: "", Engine.VECTOR: "v"}
    return [f"{name[Engine(int(trace.columns['engine'][i]))] or ('L' if trace.columns['hbm_read'][i] else 'S')}"
            f"{i // (len(trace) // count)}" for i in order]


def test_the_next_iterations_loads_are_issued_before_this_iterations_store():
    """Double buffering: iteration t + 1's load, then t's compute and store; the inner loop's two iterations
    stay in lockstep as before. Off, or with a static outer loop: program order."""
    affine = outer_kernel(LoopKind.AFFINE, tiles=3)
    assert _order(affine, 2, True) == ["L0", "L1", "v0", "v0", "S0", "L2", "v1", "v1", "S1", "v2", "v2", "S2"]
    # Deeper pipelines (the inner loops' lockstep) still issue the loads one iteration ahead, not more.
    assert _order(affine, 3, True) == _order(affine, 2, True)
    in_order = ["L0", "v0", "v0", "S0", "L1", "v1", "v1", "S1", "L2", "v2", "v2", "S2"]
    assert _order(affine, 2, False) == in_order
    assert _order(outer_kernel(LoopKind.STATIC, tiles=3), 2, True) == in_order


def test_loads_ahead_of_the_stores_overlap_the_compute_on_one_queue():
    """On one queue, in program order each iteration's load waits for the previous iteration's compute (through
    its store): T x (load + compute). Pipelined, the loads run back to back under the compute: the kernel is
    faster by about (T - 1) x the shorter of the two (here the compute: one 4096-wide tile's two halves)."""
    affine, static = outer_kernel(LoopKind.AFFINE), outer_kernel(LoopKind.STATIC)
    pipelined = estimate(affine, ON).latency_ms
    in_order = estimate(static, ON).latency_ms
    assert estimate(affine, OFF).latency_ms == pytest.approx(in_order, rel=1e-9)
    costs = instruction_costs(affine, ON)
    compute_ms = float(costs.seconds[np.asarray(affine.columns["engine"]) == Engine.VECTOR].sum()) / TILES * 1e3
    assert in_order - pipelined == pytest.approx((TILES - 1) * compute_ms, rel=0.2)
    # The HBM bytes do not depend on the order (the tiles fit SBUF at any depth).
    assert estimate(affine, ON).profile["hbm_read_bytes"] == estimate(static, ON).profile["hbm_read_bytes"]


def test_queues_that_keep_loads_apart_from_stores_do_not_move():
    """With loads and stores on queues of their own ("kind") no load waits behind a store, and the order changes
    nothing; with "trigger" (perf-7) this kernel's load and store share the Vector Engine's queue (its first
    reader, its producer), so the effect moves it too, to the same pipelined latency as on one queue. perf-8's
    `affine_load_queues` (a queue per affine load statement, helper MM) already keeps them apart: no move."""
    affine = outer_kernel(LoopKind.AFFINE)
    kind = replace(ON, dma_queue_assignment="kind")
    assert estimate(affine, kind).latency_ms == pytest.approx(
        estimate(affine, replace(kind, affine_outer_pipeline=False)).latency_ms, rel=1e-9)
    trigger = replace(ON, dma_queue_assignment="trigger")
    own = estimate(affine, trigger).latency_ms
    assert own == pytest.approx(estimate(affine, replace(trigger, affine_outer_pipeline=False)).latency_ms, rel=1e-9)
    trigger = replace(trigger, affine_load_queues=False)
    pipelined = estimate(affine, trigger).latency_ms
    assert pipelined == pytest.approx(estimate(affine, ON).latency_ms, rel=1e-6)
    assert pipelined < estimate(affine, replace(trigger, affine_outer_pipeline=False)).latency_ms


def test_a_perfect_nest_is_one_pipeline_and_a_loop_of_loads_goes_ahead_whole():
    """adamw's `for i0, i1` (a loop whose body is one loop): the iterations of both are one pipeline, so the
    first load of a's next iteration goes ahead of the last store of this one. A loop of loads only (the matmul
    tutorial's rhs block, loaded tile by tile) is issued ahead as a whole; a loop with compute is not."""
    nested = outer_kernel(LoopKind.AFFINE, tiles=4, split=2)
    assert _order(nested, 2, True, 4) == ["L0", "L1", "v0", "v0", "S0", "L2", "v1", "v1", "S1", "L3", "v2", "v2",
                                          "S2", "v3", "v3", "S3"]
    halves = outer_kernel(LoopKind.AFFINE, tiles=3, load_loop=True)
    assert _order(halves, 2, True)[:6] == ["L0", "L0", "L1", "L1", "v0", "v0"]
