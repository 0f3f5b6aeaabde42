"""A sequential_range loop run outermost (perf-10 candidate, interchange.sequential_major_order and valnum.py's bound
per sequential iteration; NeuronCoreSpec.sequential_outermost, on). trn1's lora counters say the compiler ran the
baseline's sequential K-chunk loop outside its affine column-block loop: the transposed input, too large for SBUF
whole, is made once per K chunk and kept across the column blocks. Kernels that differ only in that: one with the
flag on and off, and the same loops with an affine K loop, which the rule must leave alone (the matmul baseline)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.interchange import sequential_major_order
from engine.platforms.nki.perf.valnum import SBUF_BYTES, numbered_dependencies
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, MemorySpace, Trace
from tests.perf.builders import hbm, sbuf

BLOCKS, CHUNKS = 3, 4
WIDTH = 64 * 1024  # x's bytes per partition per K chunk: 8 MiB per chunk fits SBUF, the 32 MiB of all four do not
# One iteration in flight: here the block loop's body holds no affine loop, and spills.interleaved_positions would
# run its iterations side by side (in lora, affine loops inside the K loop are the innermost ones).
OFF = replace(TRN1, affine_interleave=1, sequential_outermost=False)
ON = replace(OFF, sequential_outermost=True)


def kernel(kind: LoopKind = LoopKind.SEQUENTIAL) -> Trace:
    """for a in affine_range(BLOCKS): for s in <kind>(CHUNKS): load x[s] (the same in every a), transpose it,
    multiply by w[a, s], accumulate into acc[a]; then store acc[a] (after the K loop)."""
    tr = Trace()
    step = 128 * WIDTH
    x, w = hbm(tr, "x", CHUNKS * step), hbm(tr, "w", BLOCKS * CHUNKS * 128 * 512)
    out = hbm(tr, "out", BLOCKS * 128 * 2048)
    outer = tr.add_loop(LoopInfo(LoopKind.AFFINE, BLOCKS, 1))
    for a in range(BLOCKS):
        acc = sbuf(tr, f"acc{a}", 2048)
        inner = tr.add_loop(LoopInfo(kind, CHUNKS, 2))  # one loop id per instance, as the tracer does
        for s in range(CHUNKS):
            ctx = tr.context_id(((outer, a), (inner, s)))
            k = a * CHUNKS + s
            wt = sbuf(tr, f"w{k}", 2048)
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=512,
                      hbm_read=128 * 2048, sbuf_write=128 * 2048, loop_ctx=ctx, line=3,
                      accesses=((w, False, 0, 1, k * 128 * 2048, (k + 1) * 128 * 2048), (wt, True, 0, 128, 0, 2048)))
            xt, pt, tt = sbuf(tr, f"x{k}", WIDTH), sbuf(tr, f"p{k}", WIDTH, MemorySpace.PSUM), sbuf(tr, f"t{k}", WIDTH)
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=WIDTH // 4,
                      hbm_read=step, sbuf_write=step, loop_ctx=ctx, line=4,
                      accesses=((x, False, 0, 1, s * step, (s + 1) * step), (xt, True, 0, 128, 0, WIDTH)))
            tr.append(engine=Engine.TENSOR, op="nc_matmul", dtype="float32", partitions=128, free_elems=WIDTH // 4,
                      flops=2 * 128 * 128 * (WIDTH // 4), is_transpose=True, loop_ctx=ctx, line=5,
                      accesses=((xt, False, 0, 128, 0, WIDTH), (pt, True, 0, 128, 0, WIDTH)))
            tr.append(engine=Engine.VECTOR, op="copy", dtype="float32", partitions=128, free_elems=WIDTH // 4,
                      loop_ctx=ctx, line=6, accesses=((pt, False, 0, 128, 0, WIDTH), (tt, True, 0, 128, 0, WIDTH)))
            o = sbuf(tr, f"o{k}", 2048, MemorySpace.PSUM)
            tr.append(engine=Engine.TENSOR, op="nc_matmul", dtype="float32", partitions=128, free_elems=512,
                      flops=2 * 128 * 128 * 512, loop_ctx=ctx, line=7,
                      accesses=((wt, False, 0, 128, 0, 2048), (tt, False, 0, 128, 0, WIDTH), (o, True, 0, 128, 0, 2048)))
            reads = ((o, False, 0, 128, 0, 2048),) + (((acc, False, 0, 128, 0, 2048),) if s else ())
            tr.append(engine=Engine.VECTOR, op="tensor_tensor" if s else "copy", dtype="float32", partitions=128,
                      free_elems=512, loop_ctx=ctx, line=8, accesses=reads + ((acc, True, 0, 128, 0, 2048),))
        tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=512,
                  hbm_write=128 * 2048, sbuf_read=128 * 2048, loop_ctx=tr.context_id(((outer, a),)), line=9,
                  accesses=((acc, False, 0, 128, 0, 2048), (out, True, 0, 1, a * 128 * 2048, (a + 1) * 128 * 2048)))
    return tr.freeze()


def test_the_sizes_straddle_sbuf():
    assert 128 * WIDTH <= SBUF_BYTES < CHUNKS * 128 * WIDTH


def test_the_sequential_loop_runs_outside_the_affine_one_and_the_stores_after_it():
    trace = kernel()
    use = numbered_dependencies(trace).sbuf.sequential_major
    assert use is not None  # the product is kept only per sequential iteration
    order = np.argsort(sequential_major_order(trace, use.vn_elided))
    nests = [trace.loop_contexts[c] for c in np.asarray(trace.columns["loop_ctx"])[order]]
    in_k = [(nest[1][1], nest[0][1]) for nest in nests if len(nest) == 2]
    assert in_k == sorted(in_k)  # every block's chunk 0, then every block's chunk 1, ...
    assert [len(nest) for nest in nests[-BLOCKS:]] == [1] * BLOCKS  # the stores after the whole K loop


def test_the_transposed_chunk_is_made_once_and_kept_across_the_blocks():
    off, on = estimate(kernel(), OFF), estimate(kernel(), ON)
    x_bytes = CHUNKS * 128 * WIDTH
    assert off.profile["transpose_flops"] == BLOCKS * on.profile["transpose_flops"]
    assert on.profile["spill_save_bytes"] == on.profile.get("spill_reload_bytes", 0) == 0  # one chunk fits
    assert on.profile["hbm_read_bytes"] == off.profile["hbm_read_bytes"] - (BLOCKS - 1) * x_bytes  # x read once
    # Faster by more than half the skipped reads of x at the HBM rate (the transposes skipped too).
    assert off.latency_ms - on.latency_ms > 0.5 * (BLOCKS - 1) * x_bytes / TRN1.hbm_bytes_per_s * 1e3


def test_an_affine_k_loop_is_left_alone():
    trace = kernel(LoopKind.AFFINE)
    assert numbered_dependencies(trace).sbuf.sequential_major is None
    off, on = estimate(trace, OFF), estimate(trace, ON)
    assert on.latency_ms == off.latency_ms and on.profile == off.profile
    assert on.profile["transpose_flops"] == estimate(kernel(), OFF).profile["transpose_flops"]  # once per block
