"""perf-5 candidates (issue 19): DMA bandwidth booked in time order, in-order DMA trigger queues
(engine/platforms/nki/perf/schedule_timed.py; [DMA-OV]). Each test: two kernels, or one kernel under two settings, that
differ only in the effect, predicted in the right order by the margin the constants imply. perf-5 ships time
order with trigger queues in the compiler's order (no issue interval); PERF4 is the program-order booking before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.platforms.nki.hardware import DMA_QUEUE_ISSUE_S, TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.costs import dma_engine_seconds
from engine.platforms.nki.simulator import simulate
from engine.platforms.nki.simulator.trace import Engine, LoopKind, Trace
from tests.perf import nki_kernels
from tests.perf.builders import dma_only_kernel, hbm, sbuf, streaming_kernel

PERF4 = replace(TRN1, dma_time_order=False, dma_queue_assignment="none", dma_queue_compiler_order=False,
                dma_queue_issue_s=0.0, dma_packet_s=0.0, affine_load_queues=False)
TIMED = replace(PERF4, dma_time_order=True)  # time order alone, no queues
FREE = 4096  # 128 x 16 KiB fp32 tiles: one DMA keeps every DMA engine busy for its whole transfer
TILE = FREE * 4


def _dma(tr: Trace, op: str, src: int, dst: int, nbytes: int) -> None:
    load = op == "load"
    tr.append(engine=Engine.DMA, op=op, dtype="float32", partitions=128, free_elems=nbytes // 512,
              hbm_read=nbytes if load else 0, hbm_write=0 if load else nbytes,
              sbuf_write=nbytes if load else 0, sbuf_read=0 if load else nbytes,
              accesses=((src, False, 0, 128 if not load else 1, 0, nbytes if load else nbytes // 128),
                        (dst, True, 0, 1 if not load else 128, 0, nbytes // 128 if load else nbytes)))


def _op(tr: Trace, engine: Engine, src: int, dst: int, ops: int = 1, free: int = FREE, chain: bool = True) -> None:
    """`ops` ops writing dst, each reading the previous one's result (chain) or all reading src."""
    for _ in range(ops):
        tr.append(engine=engine, op="tensor_tensor", dtype="float32", partitions=128, free_elems=free,
                  accesses=((src, False, 0, 128, 0, TILE), (dst, True, 0, 128, 0, TILE)))
        src = dst if chain else src


def _store_then_early_load() -> Trace:
    """A store that starts a little after a later load: load A, A -> B (8 ops reading A), B -> C (short), store
    C; the second load writes A again, so it waits only for A -> B and starts before the store; then its tile
    is worked on (long) and stored."""
    tr = Trace()
    x0, x1, out0, out1 = (hbm(tr, n, 128 * TILE) for n in ("x0", "x1", "out0", "out1"))
    a, b, c, d = (sbuf(tr, n, TILE) for n in "abcd")
    _dma(tr, "load", x0, a, 128 * TILE)
    _op(tr, Engine.VECTOR, a, b, ops=8, chain=False)  # all read A: the second load waits for the last
    _op(tr, Engine.VECTOR, b, c, free=FREE // 16)  # ~0.5 us, well under the transfer's ~7 us
    _dma(tr, "store", c, out0, 128 * TILE)
    _dma(tr, "load", x1, a, 128 * TILE)
    _op(tr, Engine.SCALAR, a, d, ops=8)
    _dma(tr, "store", d, out1, 128 * TILE)
    return tr.freeze()


def test_a_load_starting_before_a_store_is_not_booked_behind_it():
    """In program order the store is booked first and the load, which starts earlier, gets the DMA bandwidth
    only before the store starts and after it ends; in time order it goes first. Time order is faster by about
    the store's transfer, less the short op's time."""
    kernel = _store_then_early_load()
    program = estimate(kernel, PERF4).latency_ms
    timed = estimate(kernel, TIMED).latency_ms
    transfer_ms = dma_engine_seconds(128 * TILE, 128, TRN1) / TRN1.dma_queues * 1e3
    assert program - timed > 0.5 * transfer_ms
    assert program - timed < 1.1 * transfer_ms


@pytest.mark.parametrize("kernel", [streaming_kernel(32, 2048), dma_only_kernel(64, 128, 1024)])
def test_time_order_alone_barely_moves_kernels_whose_dmas_start_in_program_order(kernel):
    """Without queues and with DMAs starting in program order the two bookings agree (within 2%: in time order
    a load that is ready may go before a store booked earlier in program order)."""
    assert estimate(kernel, TIMED).latency_ms == pytest.approx(estimate(kernel, PERF4).latency_ms, rel=0.02)


def _two_tiles(second_engine: Engine) -> Trace:
    """Tile 0: load, 8 Vector ops, store. Tile 1 (independent): load, 8 ops on `second_engine`, store."""
    tr = Trace()
    x0, x1, out0, out1 = (hbm(tr, n, 128 * TILE) for n in ("x0", "x1", "out0", "out1"))
    a0, b0, a1, b1 = (sbuf(tr, n, TILE) for n in ("a0", "b0", "a1", "b1"))
    _dma(tr, "load", x0, a0, 128 * TILE)
    _op(tr, Engine.VECTOR, a0, b0, ops=8)
    _dma(tr, "store", b0, out0, 128 * TILE)
    _dma(tr, "load", x1, a1, 128 * TILE)
    _op(tr, second_engine, a1, b1, ops=8)
    _dma(tr, "store", b1, out1, 128 * TILE)
    return tr.freeze()


def test_one_in_order_queue_holds_the_next_load_behind_a_store_waiting_for_its_data():
    """With every DMA on one in-order queue, tile 1's load waits for tile 0's store, which waits for tile 0's
    compute: tile 1's compute no longer overlaps tile 0's (Scalar and Vector would run them side by side). The
    loss is about one tile's compute."""
    kernel = _two_tiles(Engine.SCALAR)
    free = estimate(kernel, TIMED).latency_ms
    one = estimate(kernel, replace(TIMED, dma_queue_assignment="one")).latency_ms
    assert one > 1.5 * free


def test_trigger_queues_hold_back_only_loads_triggered_by_the_same_engine():
    """Queues tied to the trigger engine: tile 0's store is Vector's (its producer), tile 1's load is the queue
    of the engine that reads it. On Scalar it is not held back by the store; on Vector it is: Vector runs the
    two tiles one after the other anyway, so what is added is the load, which now shares the DMA engines with
    the store that starts with it (two transfers' time) and its fixed latency."""
    trigger = replace(TIMED, dma_queue_assignment="trigger")
    other = _two_tiles(Engine.SCALAR)
    assert estimate(other, trigger).latency_ms == pytest.approx(estimate(other, TIMED).latency_ms, rel=0.01)
    same = _two_tiles(Engine.VECTOR)
    transfer_ms = dma_engine_seconds(128 * TILE, 128, TRN1) / TRN1.dma_queues * 1e3
    added = estimate(same, trigger).latency_ms - estimate(same, TIMED).latency_ms
    assert added == pytest.approx(2 * transfer_ms + TRN1.dma_fixed_s * 1e3, rel=0.1)


def test_small_dmas_take_the_issue_interval_each_in_time_order_too():
    """1024 DMAs of 128 x 256 B: each queue (loads, stores) starts one per dma_queue_issue_s, as in program
    order (tests/perf/test_dma_queues_and_clocks.py)."""
    queued = replace(TIMED, dma_queue_assignment="kind", dma_queue_issue_s=DMA_QUEUE_ISSUE_S)
    small = estimate(dma_only_kernel(1024, 128, 64), queued).latency_ms
    assert small == pytest.approx(1024 * DMA_QUEUE_ISSUE_S * 1e3, rel=0.05)
    with pytest.raises(ValueError, match="dma_queue_assignment"):
        estimate(dma_only_kernel(4, 128, 64), replace(TIMED, dma_queue_assignment="engine"))


def test_trigger_queues_in_the_compilers_order_keep_an_affine_loop_overlapped():
    """A streaming affine loop whose one engine reads every loaded tile and stores every result: on its trigger
    queue in program order tile t+1's load waits behind tile t's store (which waits for tile t's compute), so
    load and compute no longer overlap; in the compiler's software-pipelined order ([NKI-AFFINE]) the next
    tiles' loads go first and the loop is as fast as without queues. A sequential loop is the same either way."""
    trigger = replace(TIMED, dma_queue_assignment="trigger")
    compiler = replace(trigger, dma_queue_compiler_order=True)
    loop = streaming_kernel(32, 2048)
    unqueued = estimate(loop, TIMED).latency_ms
    assert estimate(loop, compiler).latency_ms == pytest.approx(unqueued, rel=0.01)
    assert estimate(loop, trigger).latency_ms > 1.2 * unqueued
    sequential = streaming_kernel(32, 2048, kind=LoopKind.SEQUENTIAL)
    assert estimate(sequential, compiler).latency_ms == pytest.approx(estimate(sequential, trigger).latency_ms)


def test_a_store_inside_a_sequential_loop_still_runs_in_the_compilers_order():
    """The compiler's order puts the next tiles' loads ahead of this tile's store on their trigger queue, but the
    store sits in a sequential_range, whose barrier waits for every earlier instruction, those loads' queue
    predecessors included: the queue follows that order only as far as the barriers allow (it once stalled the
    replay, tests/scale's slow kernel). Repeating each store 3 times adds at least the repeated stores' transfer."""
    compiler = replace(TIMED, dma_queue_assignment="trigger", dma_queue_compiler_order=True)
    x = nki_kernels.inputs()
    once = estimate(simulate(nki_kernels.exp_streaming(), x).trace, compiler).latency_ms
    thrice = estimate(simulate(nki_kernels.exp_stores_repeated(3), x).trace, compiler).latency_ms
    store_ms = dma_engine_seconds(nki_kernels.ROWS * nki_kernels.COLS * 4, 128, TRN1) / TRN1.dma_queues * 1e3
    assert thrice - once > 2 * store_ms * 0.9
