"""Loop fusion (issue 19, fusion.py): the compiler fuses adjacent producer-consumer affine loops ("loop fusion
optimizations", nki/index.rst), so the second loop's iteration k consumes what the first loop's iteration k made
while it is still in SBUF. Kernels that differ only in that: the same two loops with fusion on and off, and two
loops the compiler may not fuse (the consumer reads the producer's iterations in reverse)."""

from __future__ import annotations

from dataclasses import replace

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.deps import build_dependencies
from engine.platforms.nki.perf.fusion import fused_order
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, Trace
from tests.perf.builders import hbm, sbuf

TRIPS = 4
TILE = 48 * 1024  # bytes per partition: three fit SBUF, TRIPS of them do not
OFF = replace(TRN1, loop_fusion=False)


def kernel(*, reverse: bool = False) -> Trace:
    """for k in affine_range(TRIPS): b[k] = exp(load(x[k]));  for k in affine_range(TRIPS): store(exp(b[j])), with
    j = k (or TRIPS - 1 - k when `reverse`)."""
    tr = Trace()
    size = 128 * TILE
    x, out = hbm(tr, "x", TRIPS * size), hbm(tr, "out", TRIPS * size)
    first, second = tr.add_loop(LoopInfo(LoopKind.AFFINE, TRIPS, 1)), tr.add_loop(LoopInfo(LoopKind.AFFINE, TRIPS, 5))
    b = [sbuf(tr, f"b{k}", TILE) for k in range(TRIPS)]
    for k in range(TRIPS):
        ctx = tr.context_id(((first, k),))
        a = sbuf(tr, f"a{k}", TILE)
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=TILE // 4,
                  hbm_read=size, sbuf_write=size, loop_ctx=ctx, line=2,
                  accesses=((x, False, 0, 1, k * size, (k + 1) * size), (a, True, 0, 128, 0, TILE)))
        tr.append(engine=Engine.SCALAR, op="activation", dtype="float32", partitions=128, free_elems=TILE // 4,
                  flops=128 * TILE // 4, loop_ctx=ctx, line=3,
                  accesses=((a, False, 0, 128, 0, TILE), (b[k], True, 0, 128, 0, TILE)))
    for k in range(TRIPS):
        ctx = tr.context_id(((second, k),))
        j = TRIPS - 1 - k if reverse else k
        c = sbuf(tr, f"c{k}", TILE)
        tr.append(engine=Engine.SCALAR, op="activation", dtype="float32", partitions=128, free_elems=TILE // 4,
                  flops=128 * TILE // 4, loop_ctx=ctx, line=6,
                  accesses=((b[j], False, 0, 128, 0, TILE), (c, True, 0, 128, 0, TILE)))
        tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=TILE // 4,
                  hbm_write=size, sbuf_read=size, loop_ctx=ctx, line=7,
                  accesses=((c, False, 0, 128, 0, TILE), (out, True, 0, 1, k * size, (k + 1) * size)))
    return tr.freeze()


def test_fused_producer_consumer_loops_keep_each_tile_in_sbuf():
    capacity = TRN1.sbuf_bytes_per_partition * TRN1.sbuf_usable_fraction
    assert 3 * TILE < capacity < TRIPS * TILE
    on, off = estimate(kernel()), estimate(kernel(), OFF)
    assert on.profile["spill_save_bytes"] == on.profile["spill_reload_bytes"] == 0
    assert off.profile["spill_save_bytes"] > 0 and off.profile["spill_reload_bytes"] > 0
    assert off.profile["hbm_write_bytes"] - on.profile["hbm_write_bytes"] == off.profile["spill_save_bytes"]
    # The spills cost HBM traffic (and a reload before its use) that the fused kernel does not pay.
    spill_ms = (off.profile["spill_save_bytes"] + off.profile["spill_reload_bytes"]) / TRN1.hbm_bytes_per_s * 1e3
    assert off.latency_ms - on.latency_ms > 0.5 * spill_ms


def test_loops_whose_fusion_would_break_a_dependency_stay_apart():
    trace, forward = kernel(reverse=True), kernel()
    deps, forward_deps = build_dependencies(trace), build_dependencies(forward)
    assert fused_order(forward, forward_deps.indptr, forward_deps.indices) is not None
    assert fused_order(trace, deps.indptr, deps.indices) is None
    on, off = estimate(trace), estimate(trace, OFF)
    assert on.latency_ms == off.latency_ms and on.profile == off.profile
