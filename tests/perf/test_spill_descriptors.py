"""A spill transfer costed as a DMA of its shape (NeuronCoreSpec.spill_descriptors_per_row, on since perf-10):
one descriptor per SBUF partition row its chunks span, where perf-9 counts 128 for every spill transfer. trn1's bmm
reloads chunks on 64 partitions; at 128 descriptors each pays twice the per-packet floor. One kernel (a batch loop
around a block loop that reuses a transposed input kept on 64 partitions, with SBUF made small enough for it to
spill), the flag off and on."""

from __future__ import annotations

from dataclasses import replace

import engine.platforms.nki.perf as perf
from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, MemorySpace, Trace
from tests.perf.builders import hbm, sbuf

BATCHES, BLOCKS = 6, 2
WIDTH = 16 * 1024  # x's bytes per partition per batch; transposed (as bmm's [128, 64] tiles) 32 KiB on 64 partitions:
# one batch's fits SBUF, BATCHES of them (192 KiB per partition, 12 MiB in all) do not
# One iteration in flight: here the block loop is innermost, and spills.interleaved_positions would pipeline its two
# iterations side by side again (in bmm, loops inside it are the innermost ones; a limit of the candidate).
# One batch's transposed input (32 KiB per partition) does not fit: the kept product spills.
ON = replace(TRN1, affine_interleave=1, sbuf_usable_fraction=0.1, spill_descriptors_per_row=True)
OFF = replace(ON, spill_descriptors_per_row=False)


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


def test_a_spill_counts_the_rows_it_spans(monkeypatch):
    plans = []
    plan_spills = perf.plan_spills
    monkeypatch.setattr(perf, "plan_spills", lambda *a, **k: plans.append(plan_spills(*a, **k)) or plans[-1])
    estimate(kernel(halves=True), ON)
    plan = plans[-1]
    reloads, saves = plan.reload_bytes > 0, plan.save_bytes > 0
    assert reloads.any() and saves.any()
    # The product (the transposed input) lives on 64 partitions: one descriptor per row, not 128; the other
    # spilled tiles span all 128.
    assert set(plan.reload_rows[reloads].tolist()) == {64.0, 128.0}
    assert 64.0 in plan.save_rows[saves].tolist()


def test_fewer_descriptors_cost_less_and_move_no_bytes():
    off, on = estimate(kernel(halves=True), OFF), estimate(kernel(halves=True), ON)
    for counter in ("hbm_read_bytes", "hbm_write_bytes", "spill_save_bytes", "spill_reload_bytes"):
        assert on.profile[counter] == off.profile[counter] > 0
    # 64 fewer descriptors per spill transfer: at least their descriptor bytes of engine time less each.
    assert on.latency_ms < off.latency_ms


def test_on_for_trn1():
    assert TRN1.spill_descriptors_per_row is True
