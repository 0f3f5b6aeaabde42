"""The DMA packet rate (issue 19, NeuronCoreSpec.dma_packet_s): [DMA-BW] says small payloads make "the DMA packet
rate -- not HBM bandwidth -- the limiting factor"; a packet is one partition row's contiguous run. An engine spends
at least dma_packet_s on a packet, so rows shorter than dma_packet_s x the engine's rate move at the packet rate,
longer rows at the byte rate, as before.

Two kernels that differ only in the row length of the same bytes: 1 KiB rows (the matmul tutorial's [128, 512]
bf16 tiles) against 4 KiB rows. With the packet rate on, the 1 KiB kernel is slower by the ratio of the packet
floor to the bytes' time; the 4 KiB kernel does not move."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.costs import dma_engine_seconds
from tests.perf.builders import dma_only_kernel

MIB_PER_KERNEL = 64
PACKET_S = 0.1e-6


def kernel(row_bytes: int):
    free = row_bytes // 4
    return dma_only_kernel(MIB_PER_KERNEL * 1024 * 1024 // (128 * row_bytes), 128, free)


def test_short_rows_move_at_the_packet_rate():
    off = replace(TRN1, dma_queue_issue_s=0.0, dma_packet_s=0.0)  # the packet rate alone
    on = replace(off, dma_packet_s=PACKET_S)
    short_on, short_off = estimate(kernel(1024), on).latency_ms, estimate(kernel(1024), off).latency_ms
    packet_bound = 128 * PACKET_S
    byte_bound = float(dma_engine_seconds(128 * 1024, 128, off))
    assert packet_bound > byte_bound  # 1 KiB rows: below the packet floor
    assert short_on / short_off == pytest.approx(packet_bound / byte_bound, rel=0.1)


def test_long_rows_do_not_move():
    off = replace(TRN1, dma_queue_issue_s=0.0, dma_packet_s=0.0)  # the packet rate alone
    on = replace(off, dma_packet_s=PACKET_S)
    assert float(dma_engine_seconds(128 * 4096, 128, off)) > 128 * PACKET_S  # 4 KiB rows: above it
    assert estimate(kernel(4096), on).latency_ms == pytest.approx(estimate(kernel(4096), off).latency_ms)


def test_the_packet_floor_stays_within_the_documented_curve():
    """[DMA-CURVE]: one 128-partition DMA of <= 1 KiB per partition takes 1.14 us on the 16 engines, so a packet
    costs at most 1.14 us x 16 / 128; TRN1's value must not exceed it."""
    assert 0 < TRN1.dma_packet_s <= 1.14e-6 * TRN1.dma_queues / 128
