"""perf-4 candidates (issue 19), one effect per test: two kernels that differ only in it, predicted in the right
order by the margin the documented constants of engine/platforms/nki/hardware.py imply.

- the DMA queues' issue interval ([DMA-OV], [DMA-CURVE], [DMA-BW]);
- the Scalar Engine's own clock ([ARCH-V2]: 1.4 GHz, Vector 1.12 GHz);
- PSUM reads on the Scalar Engine ([ARCH-V2]: Vector and Scalar cannot access PSUM in parallel)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.platforms.nki.hardware import DMA_QUEUE_ISSUE_S, TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.costs import dma_engine_seconds
from engine.platforms.nki.simulator.trace import Engine, MemorySpace, Trace
from tests.perf.builders import dma_only_kernel, sbuf

# --- DMA queues: one DMA started per issue interval on each queue --------------------------------------------


def test_small_dmas_on_one_queue_take_the_issue_interval_each():
    """Same bytes: 1024 DMAs of 128 x 256 B rows against 64 DMAs of 128 x 4 KiB rows (loads and stores). The
    small ones take less DMA engine time than the issue interval, so each queue (loads, stores) starts one per
    dma_queue_issue_s: 1024 x 1.3 us, against the large ones' engine time (their bytes over 16 engines). The
    interval alone (the packet rate off, tests/perf/test_dma_packet_rate.py); TRN1 ships it on since perf-8."""
    assert TRN1.dma_queue_issue_s == DMA_QUEUE_ISSUE_S
    queued = replace(TRN1, dma_packet_s=0.0)
    small = estimate(dma_only_kernel(1024, 128, 64), queued)
    large = estimate(dma_only_kernel(64, 128, 1024), queued)
    assert small.profile["hbm_read_bytes"] == large.profile["hbm_read_bytes"]
    queue_bound_s = 1024 * DMA_QUEUE_ISSUE_S
    engine_bound_s = 2 * 64 * dma_engine_seconds(128 * 4096, 128, TRN1) / TRN1.dma_queues
    assert small.latency_ms / large.latency_ms == pytest.approx(queue_bound_s / engine_bound_s, rel=0.1)
    # Without the issue interval (perf-3 to perf-7) the small DMAs are only slower by their per-buffer cost.
    unqueued = replace(queued, dma_queue_issue_s=0.0)
    assert estimate(dma_only_kernel(1024, 128, 64), unqueued).latency_ms < 0.5 * small.latency_ms


def test_four_kib_rows_are_not_slowed_by_the_issue_interval():
    """A 128 x 4 KiB DMA keeps the engines busy longer than the issue interval: silu's and matmul's rows run at
    the engines' rate with or without it."""
    kernel = dma_only_kernel(64, 128, 1024)
    with_queues = estimate(kernel, TRN1).latency_ms
    without = estimate(kernel, replace(TRN1, dma_queue_issue_s=0.0)).latency_ms
    assert with_queues == pytest.approx(without, rel=0.02)


# --- the Scalar Engine's clock -----------------------------------------------------------------------------


def _chain(engine: Engine, ops: int, free: int, *, source: MemorySpace = MemorySpace.SBUF,
           op: str = "activation", dependent: bool = True) -> Trace:
    """`ops` one-input ops of 128 x `free` fp32 on `engine`, each reading the previous result (or, with
    dependent=False, every op reading its own tile of `source`)."""
    tr = Trace()
    tile = free * 4
    src = sbuf(tr, "x", tile, space=source)
    for k in range(ops):
        dst = sbuf(tr, f"y{k}", tile)
        read = src if dependent or k == 0 else sbuf(tr, f"x{k}", tile, space=source)
        tr.append(engine=engine, op=op, dtype="float32", partitions=128, free_elems=free,
                  accesses=((read, False, 0, 128, 0, tile), (dst, True, 0, 128, 0, tile)))
        if dependent:
            src = dst
    return tr.freeze()


def test_the_scalar_engine_runs_the_same_cycles_at_its_own_faster_clock():
    """64 dependent activations of 2048 elements: the same cycles on Scalar (1.4 GHz) and Vector (1.12 GHz)."""
    on_scalar = estimate(_chain(Engine.SCALAR, 64, 2048)).latency_ms
    on_vector = estimate(_chain(Engine.VECTOR, 64, 2048)).latency_ms
    assert on_vector / on_scalar == pytest.approx(TRN1.scalar_clock_hz / TRN1.engine_clock_hz, rel=0.01)


# --- PSUM reads go to the Scalar Engine ---------------------------------------------------------------------


def test_copies_out_of_psum_run_on_the_scalar_engine_and_copies_in_sbuf_are_balanced():
    """64 independent tensor_copy ops (either engine may run them), reading PSUM or SBUF. From PSUM they all go to
    the Scalar Engine (Vector and Scalar cannot read PSUM at once), from SBUF the two engines share them: the
    PSUM version takes all the copies at Scalar's rate, the SBUF one about the two engines' combined rate."""
    ops, free = 64, 2048
    psum = estimate(_chain(Engine.VECTOR, ops, free, source=MemorySpace.PSUM, op="tensor_copy", dependent=False))
    sbuf_ = estimate(_chain(Engine.VECTOR, ops, free, source=MemorySpace.SBUF, op="tensor_copy", dependent=False))
    assert psum.profile["vector_engine_active_time_percent"] == 0.0
    assert psum.profile["scalar_engine_active_time_percent"] == pytest.approx(1.0, abs=0.01)
    assert sbuf_.profile["vector_engine_active_time_percent"] > 0.3
    expected = (TRN1.scalar_clock_hz + TRN1.engine_clock_hz) / TRN1.scalar_clock_hz  # 1.8
    assert psum.latency_ms / sbuf_.latency_ms == pytest.approx(expected, rel=0.1)
