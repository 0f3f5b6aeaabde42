"""Replay of a trace as a schedule on one NeuronCore.

Each compute engine is a queue in program order: an instruction starts when its engine is free, every
instruction it depends on (deps.py) has finished, and, inside a `sequential_range` loop, the previous iteration
has drained. `affine_range` iterations carry no such barrier, so the next iteration's loads overlap the current
iteration's compute whenever the data allows it. (Until perf-10 four more constants could delay an instruction: a
cross-engine sync latency, a same-engine write-back wait, an issue window and a reorder window; all four were 0 on
every platform and are gone since perf-12: docs/history/performance-model.md.)

Ops the compiler may place on either Vector or Scalar Engine (costs.py: tensor_scalar, copies, memset) go to
whichever of the two has had less work so far, as the compiler balances them, each at its engine's clock; with
`psum_reads_on_scalar` those that read PSUM go to the Scalar Engine.

DMAs: at most `dma_queues` DMA instructions are outstanding. Each books two calendars of fixed time buckets,
filled in order (a DMA ready early can use capacity a later-issued DMA left free, so a store waiting for
compute does not block the next load): HBM bytes at the HBM bandwidth, and DMA engine time (costs.py: bytes at
one engine's rate plus a cost per contiguous buffer) against `dma_queues` engines; a DMA of P < 16 partitions
spreads over P engines at most; with `dma_queue_issue_s` its queue (costs.py: loads, stores, on-chip) starts
at most one DMA per that interval. It finishes `dma_fixed_s` (the documented semaphore-to-start latency) after
its last byte moves. Spill traffic (spills.py) is charged to the same calendars: an instruction whose operand
was evicted waits for its reload (a clean re-fetch is prefetched as soon as the previous use of that data is
done; a spill reload is issued when the engine reaches the use), and a spill save takes bandwidth after the
instruction that produced the data, without stalling anyone.

This replay books DMA bandwidth in program order; with `dma_time_order` estimate() uses schedule_timed.py
instead, which books it earliest start first and adds in-order DMA trigger queues.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from engine.platforms.nki.hardware import NeuronCoreSpec
from engine.platforms.nki.perf.costs import InstructionCosts, dma_engine_seconds
from engine.platforms.nki.perf.deps import Dependencies
from engine.platforms.nki.perf.spills import SpillPlan
from engine.platforms.nki.simulator.trace import Engine, Trace

_BUCKET_S = 0.5e-6


class _Bandwidth:
    """Bytes per time bucket still free; `consume` books a transfer and returns when its last byte moves."""

    def __init__(self, bytes_per_s: float) -> None:
        self.capacity = bytes_per_s * _BUCKET_S
        self.free: list[float] = []
        self.first_open = 0  # every bucket before this one is full
        # Per bucket: itself while it has room, else a later bucket that may have (path-compressed), so a
        # transfer booked behind a long run of full buckets (a spill reload late in a DMA-bound kernel) skips
        # the run instead of walking it bucket by bucket.
        self._next: list[int] = []

    def _grow(self, b: int) -> None:
        while b >= len(self.free):
            n = len(self.free)
            self.free.extend([self.capacity] * 1024)
            self._next.extend(range(n, n + 1024))

    def _open_from(self, b: int) -> int:
        """The first bucket at or after `b` that is not known to be full."""
        nxt = self._next
        root = b
        while root < len(nxt) and nxt[root] != root:
            root = nxt[root]
        while b != root:
            nxt[b], b = root, nxt[b]
        return root

    def consume(self, start: float, nbytes: float) -> float:
        if nbytes <= 0:
            return start
        first = max(int(start / _BUCKET_S), self.first_open)
        b = self._open_from(first)
        if first == self.first_open:  # the full buckets skipped lie at the front: first_open passes them too
            self.first_open = b
        free = self.free
        cap = self.capacity
        while True:
            self._grow(b)
            avail = free[b]
            if avail > 0.0:
                # Inside the starting bucket, bytes can only move after `start`.
                if b * _BUCKET_S < start:
                    avail = min(avail, cap * ((b + 1) * _BUCKET_S - start) / _BUCKET_S)
                if nbytes <= avail:
                    free[b] -= nbytes
                    used = cap - free[b]
                    if free[b] <= 0.0:
                        self._next[b] = b + 1
                        if b == self.first_open:
                            self.first_open = b + 1
                    return max(start, b * _BUCKET_S + _BUCKET_S * used / cap)
                free[b] -= avail
                nbytes -= avail
                if free[b] <= 0.0:
                    self._next[b] = b + 1
            front = b == self.first_open and free[b] <= 1e-9
            b = self._open_from(b + 1)
            if front:
                self.first_open = b


def _move(fabric: _Bandwidth, engines: _Bandwidth, start: float, nbytes: float, engine_s: float) -> float:
    """When a transfer's last byte moves: both the memory side and the DMA engines' time must be booked."""
    return max(fabric.consume(start, nbytes), engines.consume(start, engine_s))


@dataclass(frozen=True)
class Schedule:
    start_s: np.ndarray
    end_s: np.ndarray
    engine: np.ndarray  # the engine each instruction ran on (differs from the trace for flexible ops)
    latency_s: float


def spill_descriptors(spills: SpillPlan, platform: NeuronCoreSpec, n: int) -> tuple[list[float], list[float]]:
    """Per instruction: the DMA descriptors its spill reload and save pay. Spill traffic moves whole partition rows
    of the evicted data: one descriptor per SBUF row they span (NeuronCoreSpec.spill_descriptors_per_row), else
    one per partition of the core for every transfer (perf-9)."""
    if platform.spill_descriptors_per_row and len(spills.reload_rows) == n and len(spills.save_rows) == n:
        return spills.reload_rows.tolist(), spills.save_rows.tolist()
    every = [float(platform.partitions)] * n
    return every, every


def replay(
    trace: Trace,
    platform: NeuronCoreSpec,
    costs: InstructionCosts,
    deps: Dependencies,
    barriers: np.ndarray,
    spills: SpillPlan,
) -> Schedule:
    n = len(trace)
    start = np.zeros(n)
    end = np.zeros(n)
    if n == 0:
        return Schedule(start, end, np.zeros(0, dtype=np.int64), 0.0)
    engine = np.asarray(trace.columns["engine"], dtype=np.int64).tolist()
    flexible = costs.flexible.tolist()
    vector, scalar = int(Engine.VECTOR), int(Engine.SCALAR)
    seconds = costs.seconds.tolist()
    on_vector = list(seconds)
    on_scalar = costs.scalar_seconds.tolist() if len(costs.scalar_seconds) == n else on_vector
    to_scalar = costs.to_scalar.tolist() if len(costs.to_scalar) == n else [False] * n
    dma_bytes = costs.dma_bytes.tolist()
    touches_hbm = costs.dma_touches_hbm.tolist()
    engine_s = costs.dma_engine_s.tolist()
    lanes = costs.dma_lanes.tolist()
    issue_s = platform.dma_queue_issue_s
    queue_of = costs.dma_queue.tolist() if issue_s and len(costs.dma_queue) == n else [0] * n
    queue_free: dict[int, float] = {}  # per DMA queue, when it can start its next DMA
    indptr = deps.indptr.tolist()
    preds = deps.indices.tolist()
    barrier_at = barriers.tolist()
    reload_at = spills.reload_bytes.tolist()
    save_at = spills.save_bytes.tolist()
    spill_any = bool(spills.reload_bytes.any() or spills.save_bytes.any())
    elided = spills.elided.tolist()
    reload_after = spills.reload_after.tolist()

    hbm = _Bandwidth(platform.hbm_bytes_per_s)
    onchip = _Bandwidth(platform.dma_sbuf_bytes_per_s)
    engines = _Bandwidth(float(platform.dma_queues))  # engine-seconds per second: every DMA engine's time
    queues = [0.0] * platform.dma_queues  # a heap of the times the queues become free
    engine_free = [0.0] * 5
    busy = [0.0] * 5
    fixed = platform.dma_fixed_s
    dma = int(Engine.DMA)
    reload_rows, save_rows = spill_descriptors(spills, platform, n)

    def spill_engine_s(nbytes: float, rows: float) -> float:
        return float(dma_engine_seconds(nbytes, rows, platform))

    start_l = [0.0] * n
    end_l = [0.0] * n
    drained = 0.0  # latest end so far: where a sequential iteration boundary waits
    floor = 0.0
    for i in range(n):
        if barrier_at[i]:
            floor = drained
        ready = floor
        e = engine[i]
        for k in range(indptr[i], indptr[i + 1]):
            t = end_l[preds[k]]
            if t > ready:
                ready = t
        if spill_any and reload_at[i] > 0.0:
            after = reload_after[i]
            # (A previous use later in program order, which the compiler's order put first: issue when ready.)
            if 0 <= after < i:
                issue = end_l[after]
            elif after == -2:
                issue = ready if e == dma else min(ready, engine_free[e])
            else:
                issue = ready
            ready = max(ready, _move(hbm, engines, issue, reload_at[i], spill_engine_s(reload_at[i], reload_rows[i])) + fixed)
        if elided[i]:
            s = f = ready  # a repeated load whose data stayed in SBUF, or loop-invariant computation (valnum.py)
        elif e == dma:
            s = max(ready, queues[0])
            if issue_s:
                s = max(s, queue_free.get(queue_of[i], 0.0))
                queue_free[queue_of[i]] = s + issue_s
            # The bytes cross HBM (or the on-chip fabric) and occupy DMA engine time; a DMA spreads over at
            # most one engine per partition, so a narrow one cannot use the whole pool.
            last_byte = _move(hbm if touches_hbm[i] else onchip, engines, s, dma_bytes[i], engine_s[i])
            last_byte = max(last_byte, s + engine_s[i] / lanes[i])
            f = last_byte + fixed
            heapq.heapreplace(queues, f)
        else:
            if flexible[i]:
                # The compiler balances work between the two engines over the whole kernel.
                e = scalar if to_scalar[i] or busy[scalar] < busy[vector] else vector
                engine[i] = e
                seconds[i] = on_scalar[i] if e == scalar else on_vector[i]  # each engine's own clock
            busy[e] += seconds[i]
            s = ready if ready > engine_free[e] else engine_free[e]
            f = s + seconds[i]
            if f > engine_free[e]:
                engine_free[e] = f
        start_l[i] = s
        end_l[i] = f
        if spill_any and save_at[i] > 0.0:
            _move(hbm, engines, f, save_at[i], spill_engine_s(save_at[i], save_rows[i]))
        if f > drained:
            drained = f
    start[:] = start_l
    end[:] = end_l
    return Schedule(start, end, np.asarray(engine, dtype=np.int64), float(end.max()))
