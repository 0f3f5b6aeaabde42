"""A queue per load statement of an affine loop (issue 19, NeuronCoreSpec.affine_load_queues): with trigger queues
both loads of "c = a[t] + b[t]" sit on the Vector Engine's in-order queue and, being small, start one per
dma_queue_issue_s; inside an affine_range each load statement streams on a queue of its own, so the two overlap
(the matmul tutorial's tiled kernel: 1.58 us per iteration on trn1 for two streams of 1.2 us each). Two settings
of one kernel, the packet rate off so the queue interval is the bound: faster by one interval per iteration; the
same loop as a Python range (STATIC) keeps one queue."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.platforms.nki.hardware import DMA_QUEUE_ISSUE_S, TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, Trace
from tests.perf.builders import hbm, sbuf

ITERATIONS = 64
ROW = 256  # bytes per partition: far below what the DMA engines move in one issue interval


def add_kernel(kind: LoopKind) -> Trace:
    tr = Trace()
    a_hbm, b_hbm = hbm(tr, "a", ITERATIONS * 128 * ROW), hbm(tr, "b", ITERATIONS * 128 * ROW)
    loop = tr.add_loop(LoopInfo(kind, ITERATIONS, 1))
    for t in range(ITERATIONS):
        ctx = tr.context_id(((loop, t),))
        a, b, c = sbuf(tr, f"a{t}", ROW), sbuf(tr, f"b{t}", ROW), sbuf(tr, f"c{t}", ROW)
        for line, (src, dst) in ((10, (a_hbm, a)), (11, (b_hbm, b))):
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=ROW // 4,
                      hbm_read=128 * ROW, sbuf_write=128 * ROW, loop_ctx=ctx, line=line,
                      accesses=((src, False, 0, 1, t * 128 * ROW, (t + 1) * 128 * ROW), (dst, True, 0, 128, 0, ROW)))
        tr.append(engine=Engine.VECTOR, op="tensor_tensor", dtype="float32", partitions=128, free_elems=ROW // 4,
                  flops=128 * ROW // 4, loop_ctx=ctx, line=12,
                  accesses=((a, False, 0, 128, 0, ROW), (b, False, 0, 128, 0, ROW), (c, True, 0, 128, 0, ROW)))
    return tr.freeze()


BASE = replace(TRN1, dma_packet_s=0.0, dma_queue_issue_s=DMA_QUEUE_ISSUE_S, dma_queue_assignment="trigger")


def test_two_load_statements_of_an_affine_loop_stream_side_by_side():
    one_queue = estimate(add_kernel(LoopKind.AFFINE), replace(BASE, affine_load_queues=False)).latency_ms
    per_statement = estimate(add_kernel(LoopKind.AFFINE), replace(BASE, affine_load_queues=True)).latency_ms
    assert one_queue == pytest.approx(2 * ITERATIONS * DMA_QUEUE_ISSUE_S * 1e3, rel=0.05)
    assert one_queue - per_statement == pytest.approx(ITERATIONS * DMA_QUEUE_ISSUE_S * 1e3, rel=0.1)


def test_a_python_range_loop_keeps_its_trigger_queue():
    kernel = add_kernel(LoopKind.STATIC)
    assert estimate(kernel, replace(BASE, affine_load_queues=True)).latency_ms == pytest.approx(
        estimate(kernel, replace(BASE, affine_load_queues=False)).latency_ms)
