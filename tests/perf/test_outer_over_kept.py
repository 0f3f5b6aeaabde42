"""Where the next row block's prefetch fits only without the kept copies of repeated loads, the compiler still
pipelines the row loop and re-reads the kept data (helper HBMA, issue 19;
`NeuronCoreSpec.affine_outer_over_kept_copies`, spills.pipeline_depth and plan_spills).

The kernel (matmul_add_rmsnorm's shape): `for t in affine_range(T)`: load x[t], `for h in affine_range(4)`:
load w[h], y[t, h] = f(x[t, h], w[h]) (w loaded again in every t: a repeated load the compiler keeps in SBUF), store
y[t]. SBUF holds w, x[t] and y[t], but not x[t + 1] beside them: trn1 reads matmul_add_rmsnorm's weights 1.85
times (neuron-profile), so the pipeline wins over the kept copy."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, Trace
from tests.perf.builders import hbm, sbuf

TILES, FREE, PARTS = 6, 1024, 4
TILE = FREE * 4  # bytes per partition of x[t] and y[t]; w is twice that, loaded in PARTS pieces
WPART = 2 * TILE // PARTS
# The live set peaks at 3.25 tiles with w kept, 4.25 with x[t + 1] prefetched too, 3.25 then without the kept w.
SPEC = replace(TRN1, affine_outer_pipeline=True, affine_outer_over_kept_copies=False, sbuf_usable_fraction=1.0,
               sbuf_bytes_per_partition=4 * TILE)
ON = replace(SPEC, affine_outer_over_kept_copies=True)


def kept_weights_kernel() -> Trace:
    tr = Trace()
    size = 128 * TILE
    src, weights, out = hbm(tr, "x", TILES * size), hbm(tr, "w", 2 * size), hbm(tr, "y", TILES * size)
    top = tr.add_loop(LoopInfo(LoopKind.AFFINE, TILES, 1))
    for t in range(TILES):
        ctx = tr.context_id(((top, t),))
        x, w, y = sbuf(tr, f"x{t}", TILE), sbuf(tr, f"w{t}", 2 * TILE), sbuf(tr, f"y{t}", TILE)
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=FREE, hbm_read=size,
                  sbuf_write=size, loop_ctx=ctx,
                  accesses=((src, False, 0, 1, t * size, (t + 1) * size), (x, True, 0, 128, 0, TILE)))
        inner = tr.add_loop(LoopInfo(LoopKind.AFFINE, PARTS, 2))
        for h in range(PARTS):  # w's pieces loaded with the compute that reads them (matmul_add_rmsnorm's k loop)
            part, at = (h * TILE // PARTS, (h + 1) * TILE // PARTS), tr.context_id(((top, t), (inner, h)))
            piece = (h * WPART, (h + 1) * WPART)
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=WPART // 4,
                      hbm_read=128 * WPART, sbuf_write=128 * WPART, loop_ctx=at,
                      accesses=((weights, False, 0, 1, 128 * piece[0], 128 * piece[1]), (w, True, 0, 128, *piece)))
            tr.append(engine=Engine.VECTOR, op="tensor_tensor", dtype="float32", partitions=128,
                      free_elems=FREE // PARTS, flops=128 * FREE // PARTS, loop_ctx=at,
                      accesses=((x, False, 0, 128, *part), (w, False, 0, 128, *piece), (y, True, 0, 128, *part)))
        tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=FREE, hbm_write=size,
                  sbuf_read=size, loop_ctx=ctx,
                  accesses=((y, False, 0, 128, 0, TILE), (out, True, 0, 1, t * size, (t + 1) * size)))
    return tr.freeze()


def test_the_row_loop_is_pipelined_and_the_kept_weights_are_read_again():
    trace = kept_weights_kernel()
    once = (TILES + 2) * 128 * TILE  # every x[t] and w once
    kept = estimate(trace, SPEC).profile
    assert kept["hbm_read_bytes"] == pytest.approx(once)  # off: no pipelining, w kept
    assert kept["spill_reload_bytes"] == 0
    on = estimate(trace, ON).profile
    # On: w is read again in the iterations after the first, x[t] still once (a prefetched tile is not dropped).
    assert once < on["hbm_read_bytes"] <= once + (TILES - 1) * 2 * 128 * TILE
    # The fewest pieces that cover the excess (a quarter tile, in two stretches): two per iteration, not the
    # prefix of the longest gaps (four or five per iteration).
    assert on["hbm_read_bytes"] <= once + (TILES - 1) * 2 * 128 * WPART
    assert on["spill_reload_bytes"] == 0 and on["spill_save_bytes"] == 0


def test_the_flag_needs_the_outer_pipeline_and_changes_nothing_where_it_fits():
    trace = kept_weights_kernel()
    alone = replace(ON, affine_outer_pipeline=False)
    assert estimate(trace, alone).profile == estimate(trace, replace(alone, affine_outer_over_kept_copies=False)).profile
    roomy = replace(ON, sbuf_bytes_per_partition=8 * TILE)  # x[t + 1] fits beside w: nothing moves
    assert (estimate(trace, roomy).profile["hbm_read_bytes"]
            == estimate(trace, replace(roomy, affine_outer_over_kept_copies=False)).profile["hbm_read_bytes"])


def test_where_nothing_fits_nothing_is_fetched_ahead():
    """Where even one iteration overflows SBUF (swiglu on perf-8), the flag keeps the loops around in program
    order: the same plan and latency as without the outer pipeline."""
    trace = kept_weights_kernel()
    tight = replace(ON, sbuf_bytes_per_partition=2 * TILE)
    plain = replace(tight, affine_outer_pipeline=False)
    assert estimate(trace, tight).profile == estimate(trace, plain).profile
    assert estimate(trace, tight).latency_ms == estimate(trace, plain).latency_ms
