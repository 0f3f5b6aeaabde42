"""One iteration in flight, overflowing SBUF only through data kept across iterations (helper MAMBA3, issue 19).

Four NeuronCoreSpec flags, all off by default (docs/history/performance-model.md, "perf-10 candidates: mamba HBM bytes and the
stall"). Each acts only where an iteration's own tiles fit SBUF once but not twice and the kept copies of repeated
loads overflow it (spills.one_slot_regime: the NKIBench Mamba baseline, none of the other 13 nor the pairs'
kernels). There one iteration runs at a time, and: `sbuf_in_place` (an output takes the slot of the operand that
dies into it), `spill_next_use` (evict the kept data whose next use is furthest), `single_slot_waits` (a load
waits until its statement's previous tile, and what took that tile's slot, was last read: [STREAM] "with one
slot, each load and compute pair executes in sequence"), and `partition_rows_kept` False (one-partition rows
re-loaded at every repeat).

The kernel is the Mamba baseline's shape, small: a state loop around a channel-tile loop, two inputs per channel
tile loaded again at every state (repeated loads of one region), an element-wise chain and an accumulator per
channel tile, 28 KiB per partition each."""

from __future__ import annotations

from dataclasses import replace

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.costs import dma_engine_seconds
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, Trace
from tests.perf.builders import hbm, sbuf

TILE = 28 * 1024  # bytes per partition: [128, 7168] fp32, as the Mamba baseline
STATES, CHANNELS = 6, 2
ONE_SLOT = replace(TRN1, sbuf_in_place=True, partition_rows_kept=False, spill_next_use=True)
WAITS = replace(ONE_SLOT, single_slot_waits=True)


def mamba_like(temporaries: int = 2) -> Trace:
    """acc[c] += g(f(x[c]), y[c]) for every state and channel tile c; x[c], y[c] loaded at every state.
    `temporaries`: fresh tiles computed from x, all read by the product; more of them make the iteration's own
    tiles overflow SBUF."""
    tr = Trace()
    x, y = hbm(tr, "x", CHANNELS * 128 * TILE), hbm(tr, "y", CHANNELS * 128 * TILE)
    out = hbm(tr, "out", CHANNELS * 128 * TILE)
    acc = [sbuf(tr, f"acc{c}", TILE) for c in range(CHANNELS)]
    outer, inner = tr.add_loop(LoopInfo(LoopKind.AFFINE, STATES, 1)), tr.add_loop(LoopInfo(LoopKind.AFFINE, CHANNELS, 2))

    def op(engine: Engine, ctx: int, line: int, reads: list[int], write: int) -> None:
        tr.append(engine=engine, op="tensor_tensor", dtype="float32", partitions=128, free_elems=TILE // 4,
                  flops=128 * TILE // 4, loop_ctx=ctx, line=line,
                  accesses=tuple((r, False, 0, 128, 0, TILE) for r in reads) + ((write, True, 0, 128, 0, TILE),))

    for s in range(STATES):
        for c in range(CHANNELS):
            ctx = tr.context_id(((outer, s), (inner, c)))
            tiles = []
            for line, src in ((10, x), (11, y)):
                buf = sbuf(tr, f"in{line}_{s}_{c}", TILE)
                tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=TILE // 4,
                          hbm_read=128 * TILE, sbuf_write=128 * TILE, loop_ctx=ctx, line=line,
                          accesses=((src, False, 0, 1, c * 128 * TILE, (c + 1) * 128 * TILE),
                                    (buf, True, 0, 128, 0, TILE)))
                tiles.append(buf)
            a, b = tiles
            temps = []
            for k in range(temporaries):
                temps.append(sbuf(tr, f"t{k}_{s}_{c}", TILE))
                op(Engine.SCALAR, ctx, 20 + k, [a], temps[-1])
            prod = sbuf(tr, f"p{s}_{c}", TILE)
            op(Engine.VECTOR, ctx, 30, temps + [b], prod)
            op(Engine.VECTOR, ctx, 31, [acc[c], prod] if s else [prod], acc[c])
    for c in range(CHANNELS):
        tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=TILE // 4,
                  hbm_write=128 * TILE, sbuf_read=128 * TILE, line=40,
                  accesses=((acc[c], False, 0, 128, 0, TILE), (out, True, 0, 1, c * 128 * TILE, (c + 1) * 128 * TILE)))
    return tr.freeze()


def test_flags_off_are_the_shipped_model():
    trace = mamba_like()
    shipped = estimate(trace, TRN1)
    off = estimate(trace, replace(TRN1, sbuf_in_place=False, partition_rows_kept=True, spill_next_use=False,
                                  single_slot_waits=False))
    assert off.latency_ms == shipped.latency_ms and off.profile == shipped.profile


def test_kept_inputs_and_accumulators_compete_and_the_loads_wait_for_their_slot():
    """Two accumulators and four kept inputs (168 KiB) beside an iteration's temporaries overflow the usable
    172.8 KiB; the iteration alone fits. With one slot per tile, each re-load waits for its slot, so the kernel
    is slower than the same plan without the waits by at least a re-load per state step at the DMA rate."""
    trace = mamba_like()
    plan, waits = estimate(trace, ONE_SLOT), estimate(trace, WAITS)
    assert plan.profile["hbm_read_bytes"] == waits.profile["hbm_read_bytes"]
    assert plan.profile["hbm_read_bytes"] > 2 * CHANNELS * 128 * TILE  # something is re-loaded or spilled
    reload_ms = dma_engine_seconds(128 * TILE, 128, TRN1) / TRN1.dma_queues * 1e3
    assert waits.latency_ms - plan.latency_ms > (STATES - 1) * reload_ms


def test_kernels_whose_own_tiles_overflow_are_left_alone():
    """Six fresh temporaries per iteration: its own tiles overflow SBUF, so none of the four rules applies."""
    trace = mamba_like(temporaries=6)
    shipped, on = estimate(trace, TRN1), estimate(trace, WAITS)
    assert on.latency_ms == shipped.latency_ms and on.profile == shipped.profile


def test_furthest_next_use_keeps_the_accumulators_where_the_longest_gaps_spill_them():
    """Kept inputs and accumulators have gaps of about one state step; ranked by length (the shipped planner) the
    accumulators go first and are saved and reloaded at every step, while furthest-next-use evicts the inputs
    due last, clean re-loads: no spill at all, fewer bytes moved."""
    trace = mamba_like()
    ranked, belady = estimate(trace, replace(WAITS, spill_next_use=False)), estimate(trace, WAITS)
    assert ranked.profile["spill_save_bytes"] >= (STATES - 1) * 128 * TILE
    assert belady.profile["spill_save_bytes"] == 0
    moved = lambda r: r.profile["hbm_read_bytes"] + r.profile["hbm_write_bytes"]  # noqa: E731
    assert moved(ranked) - moved(belady) >= (STATES - 1) * 128 * TILE


def test_an_output_over_its_dying_operand_leaves_room_for_kept_data():
    """With the element-wise outputs in place of the operands that die into them, one more kept tile fits: fewer
    re-loads than with every output in a slot of its own."""
    trace = mamba_like()
    apart, in_place = estimate(trace, replace(WAITS, sbuf_in_place=False)), estimate(trace, WAITS)
    assert apart.profile["hbm_read_bytes"] - in_place.profile["hbm_read_bytes"] >= (STATES - 1) * 128 * TILE
