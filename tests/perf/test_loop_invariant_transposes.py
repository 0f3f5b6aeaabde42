"""Loop-invariant computation (issue 19, valnum.py): the compiler hoists a loop-invariant load *and* its Tensor
Engine transposes out of a loop that does not index them, and keeps the transposed product (neuron-profile's
transpose_flops for swiglu, bmm and bmm_softmax are the trace's divided by the repeat count). Kernels that
differ only in that effect: the same transposes with value numbering on and off, or of a loop-invariant tile and
of a tile the loop indexes; a kept product that does not fit is saved once and reloaded at each repeat; one
larger than SBUF is recomputed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import PreparedTrace, estimate
from engine.platforms.nki.perf.deps import SbufUse, build_dependencies, sequential_barriers
from engine.platforms.nki.perf.spills import plan_spills
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, MemorySpace, Trace
from tests.perf.builders import hbm, sbuf

REPEATS = 4
OFF = replace(TRN1, value_numbering=False)


def kernel(*, invariant: bool = True, width: int = 512, blocks: int = 1, pressure: int = 0) -> Trace:
    """REPEATS iterations of an affine loop: for each of `blocks` column blocks, load x (the same region in every
    iteration when `invariant`, else the iteration's own), transpose it on the PE into PSUM, copy it to SBUF and
    multiply it with the iteration's weights; copy the result out and store it. `width`: bytes per partition of
    x's block; `pressure`: bytes per partition of a scratch tile each iteration writes and reads back after the
    transposes (SBUF pressure that may evict the kept product)."""
    tr = Trace()
    x = hbm(tr, "x", REPEATS * blocks * 128 * width)
    w = hbm(tr, "w", REPEATS * 128 * 512)
    out = hbm(tr, "out", REPEATS * 128 * 2048)
    scratch_src = hbm(tr, "s", REPEATS * 128 * max(pressure, 4))
    loop = tr.add_loop(LoopInfo(LoopKind.AFFINE, REPEATS, 1))
    step = 128 * width
    for it in range(REPEATS):
        ctx = tr.context_id(((loop, it),))
        wt = sbuf(tr, f"w{it}", 512)
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=128,
                  hbm_read=128 * 512, sbuf_write=128 * 512, loop_ctx=ctx, line=20,
                  accesses=((w, False, 0, 1, it * 128 * 512, (it + 1) * 128 * 512), (wt, True, 0, 128, 0, 512)))
        if pressure:
            s = sbuf(tr, f"scratch{it}", pressure)
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=pressure // 4,
                      hbm_read=128 * pressure, sbuf_write=128 * pressure, loop_ctx=ctx, line=30,
                      accesses=((scratch_src, False, 0, 1, it * 128 * pressure, (it + 1) * 128 * pressure),
                                (s, True, 0, 128, 0, pressure)))
        o = sbuf(tr, f"o{it}", 2048, MemorySpace.PSUM)
        for b in range(blocks):
            xt, pt, tt = sbuf(tr, f"x{it}_{b}", width), sbuf(tr, f"p{it}_{b}", width, MemorySpace.PSUM), \
                sbuf(tr, f"t{it}_{b}", width)
            lo = (b if invariant else it * blocks + b) * step
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=width // 4,
                      hbm_read=step, sbuf_write=step, loop_ctx=ctx, line=10,
                      accesses=((x, False, 0, 1, lo, lo + step), (xt, True, 0, 128, 0, width)))
            tr.append(engine=Engine.TENSOR, op="nc_matmul", dtype="float32", partitions=128, free_elems=width // 4,
                      flops=2 * 128 * 128 * (width // 4), is_transpose=True, loop_ctx=ctx, line=11,
                      accesses=((xt, False, 0, 128, 0, width), (pt, True, 0, 128, 0, width)))
            tr.append(engine=Engine.VECTOR, op="copy", dtype="float32", partitions=128, free_elems=width // 4,
                      loop_ctx=ctx, line=12, accesses=((pt, False, 0, 128, 0, width), (tt, True, 0, 128, 0, width)))
            tr.append(engine=Engine.TENSOR, op="nc_matmul", dtype="float32", partitions=128, free_elems=128,
                      flops=2 * 128 * 128 * 128, loop_ctx=ctx, line=13,
                      accesses=((tt, False, 0, 128, 0, 512), (wt, False, 0, 128, 0, 512), (o, True, 0, 128, 0, 512)))
        if pressure:
            tr.append(engine=Engine.VECTOR, op="tensor_reduce", dtype="float32", partitions=128, free_elems=64,
                      loop_ctx=ctx, line=31, accesses=((s, False, 0, 128, 0, pressure), (o, True, 0, 128, 0, 512)))
        y = sbuf(tr, f"y{it}", 2048)
        tr.append(engine=Engine.VECTOR, op="copy", dtype="float32", partitions=128, free_elems=512, loop_ctx=ctx,
                  line=14, accesses=((o, False, 0, 128, 0, 2048), (y, True, 0, 128, 0, 2048)))
        tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=512,
                  hbm_write=128 * 2048, sbuf_read=128 * 2048, loop_ctx=ctx, line=15,
                  accesses=((y, False, 0, 128, 0, 2048), (out, True, 0, 1, it * 128 * 2048, (it + 1) * 128 * 2048)))
    return tr.freeze()


def test_a_loop_invariant_transpose_runs_once_and_its_product_is_kept():
    width = 64 * 1024  # a long transpose chain: PE and Vector time well above the DMA of the weights
    on, off = estimate(kernel(width=width)), estimate(kernel(width=width), OFF)
    assert off.profile["transpose_flops"] == pytest.approx(REPEATS * on.profile["transpose_flops"])
    # x read once: its repeats feed only the elided transposes (without value numbering, the kept repeated load
    # competes with the transposed copies for SBUF and some repeats re-fetch).
    assert on.profile["hbm_read_bytes"] == 128 * width + REPEATS * 128 * 512 <= off.profile["hbm_read_bytes"]
    assert on.profile["spill_save_bytes"] == on.profile["spill_reload_bytes"] == 0  # 64 KiB per partition fits
    # REPEATS - 1 transposes and their copies skipped: the PE transposes at one column per cycle and the Vector
    # copy are in series on each iteration's chain, so at least the PE's share of that time is saved.
    pe_s = (width // 4) / TRN1.engine_clock_hz
    assert off.latency_ms - on.latency_ms > 0.5 * (REPEATS - 1) * pe_s * 1e3


def test_a_transpose_of_a_tile_the_loop_indexes_runs_every_time():
    width = 16 * 1024
    hoisted, indexed = estimate(kernel(width=width)), estimate(kernel(width=width, invariant=False))
    assert indexed.profile["transpose_flops"] == pytest.approx(REPEATS * hoisted.profile["transpose_flops"])
    assert indexed.profile["transpose_flops"] == estimate(kernel(width=width, invariant=False),
                                                          OFF).profile["transpose_flops"]
    # The indexed kernel loads, transposes and copies REPEATS tiles, the hoisted one one.
    pe_s = (width // 4) / TRN1.engine_clock_hz
    assert indexed.latency_ms - hoisted.latency_ms > (REPEATS - 1) * pe_s * 1e3


def test_a_kept_product_that_does_not_fit_is_saved_once_and_reloaded_at_each_repeat():
    width = 96 * 1024
    capacity = TRN1.sbuf_bytes_per_partition * TRN1.sbuf_usable_fraction
    assert width < capacity < width + 96 * 1024  # the product fits alone, not beside the scratch tile
    r = estimate(kernel(width=width, pressure=96 * 1024))
    product = 128 * width
    assert r.profile["transpose_flops"] == pytest.approx(estimate(kernel(width=width)).profile["transpose_flops"])
    assert r.profile["spill_save_bytes"] == product
    # Saved once (the first instance), reloaded at each repeat whose gap crosses the pressure, never recomputed.
    reloads = r.profile["spill_reload_bytes"] / product
    assert reloads == int(reloads) and 1 <= reloads <= REPEATS - 1
    # The spill traffic is HBM traffic: the save is written, the reloads read, besides the kernel's own bytes.
    assert r.profile["hbm_write_bytes"] == REPEATS * 128 * 2048 + product
    kernel_reads = 128 * width + REPEATS * 128 * (512 + 96 * 1024)
    refetch = r.breakdown.spill["refetch_bytes"]  # scratch tiles the pressure re-fetches (clean: not spills)
    assert r.profile["hbm_read_bytes"] == kernel_reads + r.profile["spill_reload_bytes"] + refetch


def test_a_product_larger_than_sbuf_is_recomputed():
    blocks, width = 4, 64 * 1024  # 4 blocks of 8 MiB transposed: 32 MiB, over the 24 MiB SBUF
    assert blocks * 128 * width > TRN1.sbuf_bytes_per_partition * TRN1.partitions
    on, off = estimate(kernel(width=width, blocks=blocks)), estimate(kernel(width=width, blocks=blocks), OFF)
    assert on.profile["transpose_flops"] == off.profile["transpose_flops"]
    assert on.latency_ms == off.latency_ms


def test_value_numbering_off_is_the_model_without_it():
    """NeuronCoreSpec.value_numbering False replays the trace as perf-7 did (dependencies without value numbers)."""
    for trace in (kernel(width=16 * 1024), kernel(width=96 * 1024, pressure=96 * 1024)):
        plain = PreparedTrace(trace, build_dependencies(trace), sequential_barriers(trace))
        off, before = estimate(trace, OFF), estimate(plain, TRN1)
        assert off.latency_ms == before.latency_ms
        assert off.profile == before.profile


def test_a_kept_product_spills_whole():
    """Two chunks of one kept product (written by instruction 0, reused by the repeat at 4) and a scratch tile
    live over 2..3: evicting one chunk would fit, but the compiler spills the product, a tensor of its own, whole:
    both chunks are saved once and reloaded at the repeat."""
    kib = 1024
    use = SbufUse(
        inst=np.array([0, 0, 4, 4, 2, 3]), is_write=np.array([True, True, False, False, True, False]),
        chunk_bytes=np.array([64 * kib] * 6), partitions=np.full(6, 128), prev_inst=np.array([-1, -1, 0, 0, -1, 2]),
        producer=np.array([-1, -1, 0, 1, -1, 4]), clean=np.zeros(6, dtype=bool),
        virtual=np.array([True, True, True, True, False, False]), source_bytes=np.zeros(6, dtype=np.int64))
    plan = plan_spills(use, 6, capacity_per_partition=150 * kib)
    assert plan.spill_save_total == plan.spill_reload_total == 2 * 128 * 64 * kib
    assert plan.elided[4] and plan.reload_bytes[4] == 2 * 128 * 64 * kib
