"""Loop interchange around a loop-invariant product (perf-9 candidate, interchange.py; NeuronCoreSpec.loop_interchange,
off). trn1's bmm spill counters say the compiler ran the baseline's column-block loop outside its batch loop and kept
the whole transposed input across it. Kernels that differ only in that: one perfect nest with the flag on and off,
and nests the rule must leave alone (no loop-invariant reuse; a statement between the two loops)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.interchange import interchanged_order
from engine.platforms.nki.perf.valnum import numbered_dependencies
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, MemorySpace, Trace
from tests.perf.builders import hbm, sbuf

BATCHES, BLOCKS = 6, 2
WIDTH = 16 * 1024  # x's bytes per partition per batch; transposed (as bmm's [128, 64] tiles) 32 KiB on 64 partitions:
# one batch's fits SBUF, BATCHES of them (192 KiB per partition, 12 MiB in all) do not
# One iteration in flight: here the block loop is innermost, and spills.interleaved_positions would pipeline its two
# iterations side by side again (in bmm, loops inside it are the innermost ones; a limit of the candidate).
OFF = replace(TRN1, affine_interleave=1)
ON = replace(OFF, loop_interchange=True)


def kernel(*, invariant: bool = True, between: bool = False, halves: bool = False) -> Trace:
    """for a in affine_range(BATCHES): for b in affine_range(BLOCKS): load x[a] (x[a, b] unless `invariant`),
    transpose it, multiply by w[a, b], store out[a, b]. `between`: a load in the batch loop outside the block loop
    (not a perfect nest). `halves`: the last copy and the store run in an innermost affine loop over the output's
    two halves (bmm's shape: loops inside the block loop are the innermost ones)."""
    tr = Trace()
    step = 128 * WIDTH
    # (x as large as it is read: valnum.py keeps a repeated load only when its whole tensor fits SBUF)
    x, w = hbm(tr, "x", BATCHES * (1 if invariant else BLOCKS) * step), hbm(tr, "w", BATCHES * BLOCKS * 128 * 512)
    out, z = hbm(tr, "out", BATCHES * BLOCKS * 128 * 2048), hbm(tr, "z", BATCHES * 128 * 512)
    outer = tr.add_loop(LoopInfo(LoopKind.AFFINE, BATCHES, 1))
    for a in range(BATCHES):
        if between:
            zt = sbuf(tr, f"z{a}", 512)
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=128,
                      hbm_read=128 * 512, sbuf_write=128 * 512, loop_ctx=tr.context_id(((outer, a),)), line=2,
                      accesses=((z, False, 0, 1, a * 128 * 512, (a + 1) * 128 * 512), (zt, True, 0, 128, 0, 512)))
        inner = tr.add_loop(LoopInfo(LoopKind.AFFINE, BLOCKS, 3))  # one loop id per instance, as the tracer does
        for b in range(BLOCKS):
            ctx = tr.context_id(((outer, a), (inner, b)))
            k = a * BLOCKS + b
            wt = sbuf(tr, f"w{k}", 512)
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=128,
                      hbm_read=128 * 512, sbuf_write=128 * 512, loop_ctx=ctx, line=4,
                      accesses=((w, False, 0, 1, k * 128 * 512, (k + 1) * 128 * 512), (wt, True, 0, 128, 0, 512)))
            xt, pt, tt = sbuf(tr, f"x{k}", WIDTH), sbuf(tr, f"p{k}", 2 * WIDTH, MemorySpace.PSUM), \
                sbuf(tr, f"t{k}", 2 * WIDTH)
            lo = (a if invariant else k) * step
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=WIDTH // 4,
                      hbm_read=step, sbuf_write=step, loop_ctx=ctx, line=5,
                      accesses=((x, False, 0, 1, lo, lo + step), (xt, True, 0, 128, 0, WIDTH)))
            tr.append(engine=Engine.TENSOR, op="nc_matmul", dtype="float32", partitions=128, free_elems=WIDTH // 4,
                      flops=2 * 128 * 128 * (WIDTH // 4), is_transpose=True, loop_ctx=ctx, line=6,
                      accesses=((xt, False, 0, 128, 0, WIDTH), (pt, True, 0, 64, 0, 2 * WIDTH)))
            tr.append(engine=Engine.VECTOR, op="copy", dtype="float32", partitions=128, free_elems=WIDTH // 4,
                      loop_ctx=ctx, line=7, accesses=((pt, False, 0, 64, 0, 2 * WIDTH), (tt, True, 0, 64, 0, 2 * WIDTH)))
            o, y = sbuf(tr, f"o{k}", 2048, MemorySpace.PSUM), sbuf(tr, f"y{k}", 2048)
            tr.append(engine=Engine.TENSOR, op="nc_matmul", dtype="float32", partitions=128, free_elems=128,
                      flops=2 * 128 * 128 * 128, loop_ctx=ctx, line=8,
                      accesses=((tt, False, 0, 64, 0, 2 * WIDTH), (wt, False, 0, 128, 0, 512), (o, True, 0, 128, 0, 512)))
            parts = 2 if halves else 1
            last = tr.add_loop(LoopInfo(LoopKind.AFFINE, parts, 9)) if halves else None
            for h in range(parts):
                c = tr.context_id(((outer, a), (inner, b), (last, h))) if halves else ctx
                lo_b, hi_b = h * 2048 // parts, (h + 1) * 2048 // parts
                at = k * 128 * 2048 + h * 128 * 2048 // parts
                tr.append(engine=Engine.VECTOR, op="copy", dtype="float32", partitions=128, free_elems=512 // parts,
                          loop_ctx=c, line=9, accesses=((o, False, 0, 128, lo_b, hi_b), (y, True, 0, 128, lo_b, hi_b)))
                tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=512 // parts,
                          hbm_write=128 * 2048 // parts, sbuf_read=128 * 2048 // parts, loop_ctx=c, line=10,
                          accesses=((y, False, 0, 128, lo_b, hi_b), (out, True, 0, 1, at, at + 128 * 2048 // parts)))
    return tr.freeze()


def test_the_block_loop_runs_outside_the_batch_loop():
    trace = kernel()
    pos = interchanged_order(trace, numbered_dependencies(trace).sbuf.vn_elided)
    assert pos is not None
    order = np.argsort(pos)
    ctx = np.asarray(trace.columns["loop_ctx"])[order]
    block_major = [(nest[1][1], nest[0][1]) for nest in (trace.loop_contexts[c] for c in ctx)]
    assert block_major == sorted(block_major)  # every batch's block 0, then every batch's block 1


def test_the_whole_product_is_kept_across_the_outer_block_loop_and_spills():
    off, on = estimate(kernel(), OFF), estimate(kernel(), ON)
    assert off.profile["spill_save_bytes"] == off.profile["spill_reload_bytes"] == 0  # one batch at a time fits
    product = BATCHES * 64 * 2 * WIDTH
    assert 0 < on.profile["spill_save_bytes"] <= product  # all batches' products do not fit together
    assert on.profile["spill_reload_bytes"] >= on.profile["spill_save_bytes"]  # reloaded in the later block pass
    assert on.profile["hbm_read_bytes"] == off.profile["hbm_read_bytes"] + on.profile["spill_reload_bytes"]
    assert on.profile["transpose_flops"] == off.profile["transpose_flops"]  # still once per batch


def test_nests_without_reuse_or_not_perfect_are_left_alone():
    for trace in (kernel(invariant=False), kernel(between=True)):
        assert interchanged_order(trace, numbered_dependencies(trace).sbuf.vn_elided) is None
        off, on = estimate(trace, OFF), estimate(trace, ON)
        assert on.latency_ms == off.latency_ms and on.profile == off.profile


def test_the_interchanged_order_holds_with_the_loops_around_pipelined():
    """With the shipped pipeline (iterations in flight, the loops around the innermost ones pipelined too:
    spills.interleaved_positions) the outer iterations run in the interchanged order, not the program's: the block
    loop still runs outside the batch loop, so the whole product is kept across it and spills."""
    pipelined = replace(TRN1, loop_interchange=False)
    assert pipelined.affine_interleave > 1 and pipelined.affine_outer_pipeline
    off = estimate(kernel(halves=True), pipelined)
    on = estimate(kernel(halves=True), replace(pipelined, loop_interchange=True))
    assert off.profile["spill_save_bytes"] == off.profile["spill_reload_bytes"] == 0
    assert 0 < on.profile["spill_save_bytes"] <= BATCHES * 64 * 2 * WIDTH
    assert on.profile["spill_reload_bytes"] >= on.profile["spill_save_bytes"]
    assert on.profile["hbm_read_bytes"] == off.profile["hbm_read_bytes"] + on.profile["spill_reload_bytes"]
