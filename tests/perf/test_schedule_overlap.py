"""Affine iterations overlap; sequential iterations do not."""

from __future__ import annotations

from dataclasses import replace

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.simulator.trace import LoopKind
from tests.perf.builders import streaming_kernel


def test_it_predicts_affine_loops_faster_than_the_same_loop_sequential():
    overlapped = estimate(streaming_kernel(32, 2048, kind=LoopKind.AFFINE, ops_per_tile=2))
    serialized = estimate(streaming_kernel(32, 2048, kind=LoopKind.SEQUENTIAL, ops_per_tile=2))
    assert overlapped.latency_ms < 0.75 * serialized.latency_ms


def test_a_sequential_loop_costs_about_the_sum_of_its_iterations():
    """Drained at every boundary (sequential_prefetch off, perf-7): the sum. With each load fetched one iteration
    ahead (the default) it hides under the previous iteration's compute and store: less, but more than the sum
    without the loads."""
    drained = replace(TRN1, sequential_prefetch=False)
    one = estimate(streaming_kernel(1, 2048, kind=LoopKind.SEQUENTIAL), drained).latency_ms
    many = estimate(streaming_kernel(16, 2048, kind=LoopKind.SEQUENTIAL), drained).latency_ms
    assert 14 * one < many < 17 * one
    prefetched = estimate(streaming_kernel(16, 2048, kind=LoopKind.SEQUENTIAL)).latency_ms
    report = estimate(streaming_kernel(1, 2048, kind=LoopKind.SEQUENTIAL))
    load_ms = report.timeline["dma"][0][1] - report.timeline["dma"][0][0]
    assert 16 * (one - load_ms) < prefetched < many


def test_an_affine_loop_is_limited_by_its_busiest_resource_not_the_sum():
    # 64 tiles of 1 MiB in and out: DMA traffic dominates (perf-3: the DMA engines' time, which is more than
    # HBM's at these rates); compute hides under it.
    from engine.platforms.nki.hardware import TRN1
    from engine.platforms.nki.perf.costs import dma_engine_seconds

    report = estimate(streaming_kernel(64, 2048, kind=LoopKind.AFFINE))
    moved = report.profile["hbm_read_bytes"] + report.profile["hbm_write_bytes"]
    dma_seconds = dma_engine_seconds(moved, 128 * 2 * 64, TRN1) / TRN1.dma_queues
    assert moved / (410 * 2**30) < dma_seconds
    assert dma_seconds * 1e3 <= report.latency_ms < 1.3 * dma_seconds * 1e3
