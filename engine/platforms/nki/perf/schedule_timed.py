"""The schedule's replay with DMA bandwidth booked in time order (`NeuronCoreSpec.dma_time_order`).

schedule.replay walks the trace in program order and books each DMA's bytes on the bandwidth calendars when it
reaches it. A DMA held back (by its queue, or because its data is not ready) is then booked after every DMA
earlier in program order, even one that starts later, and lands behind it. Here the replay is event-driven:
compute instructions are placed as soon as everything they wait for is known (each engine still in program
order, the same rules as schedule.replay), while the DMAs whose start is known wait in a heap and are booked
earliest start first. That order is safe: every instruction not yet placed waits, directly or through others,
on a DMA still in the heap, so it cannot start before the heap's earliest.

With `dma_queue_assignment` the DMAs also go through in-order trigger queues ([DMA-OV]: "DMA transfers within a
queue on the same DMA engine are executed in order"; "the queue ID is typically tied to the trigger engine"): a
DMA starts no earlier than the previous DMA of its queue in program order, plus `dma_queue_issue_s`.
- "kind": loads from HBM, stores to HBM and SBUF-to-SBUF copies on three queues (costs.dma_queue);
- "one": every DMA on one queue (a store waiting for its data holds back the loads behind it);
- "trigger": the queue of the engine that triggers it, taken as the engine that produced a store's data (its
  latest non-DMA producer) or that first reads a load's tile (its earliest non-DMA consumer); DMAs with
  neither (a DMA-only kernel) go on queues of their own by kind, as with "kind".

Spill traffic is booked when the instruction that causes it is placed, as in schedule.replay (not time ordered).
Same results as schedule.replay when no DMA waits behind a later-starting one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from engine.platforms.nki.hardware import NeuronCoreSpec
from engine.platforms.nki.perf.costs import InstructionCosts, dma_engine_seconds
from engine.platforms.nki.perf.deps import Dependencies
from engine.platforms.nki.perf.schedule import Schedule, _Bandwidth, _move, spill_descriptors
from engine.platforms.nki.perf.spills import SpillPlan, interleaved_positions
from engine.platforms.nki.simulator.trace import Engine, LoopKind, Trace

QUEUE_ASSIGNMENTS = ("none", "kind", "one", "trigger")


def _engines(trace: Trace, platform: NeuronCoreSpec, costs: InstructionCosts) -> tuple[list[int], list[float]]:
    """Each instruction's engine and time on it. The Vector/Scalar balance (schedule.replay) depends only on the
    work in program order, not on times, so it is decided up front."""
    n = len(trace)
    engine = np.asarray(trace.columns["engine"], dtype=np.int64).tolist()
    flexible = costs.flexible.tolist()
    seconds = costs.seconds.tolist()
    on_scalar = costs.scalar_seconds.tolist() if len(costs.scalar_seconds) == n else list(seconds)
    to_scalar = costs.to_scalar.tolist() if len(costs.to_scalar) == n else [False] * n
    vector, scalar, dma = int(Engine.VECTOR), int(Engine.SCALAR), int(Engine.DMA)
    busy = [0.0] * 5
    for i in range(n):
        e = engine[i]
        if e == dma:
            continue
        if flexible[i]:
            e = scalar if to_scalar[i] or busy[scalar] < busy[vector] else vector
            engine[i] = e
            if e == scalar:
                seconds[i] = on_scalar[i]
        busy[e] += seconds[i]
    return engine, seconds


def dma_queues(trace: Trace, platform: NeuronCoreSpec, costs: InstructionCosts, deps: Dependencies,
               engine: list[int]) -> list[int]:
    """Per instruction, its DMA trigger queue (-1: none, or not a DMA) under `platform.dma_queue_assignment`."""
    n = len(trace)
    mode = platform.dma_queue_assignment
    if mode not in QUEUE_ASSIGNMENTS:
        raise ValueError(f"dma_queue_assignment must be one of {QUEUE_ASSIGNMENTS}, not {mode!r}")
    dma = int(Engine.DMA)
    is_dma = [e == dma for e in np.asarray(trace.columns["engine"], dtype=np.int64).tolist()]
    if mode == "none":
        return [-1] * n
    if mode == "one":
        return [0 if d else -1 for d in is_dma]
    if mode == "kind":
        kind = costs.dma_queue.tolist() if len(costs.dma_queue) == n else [0] * n
        return [kind[i] if is_dma[i] else -1 for i in range(n)]
    indptr = deps.indptr.tolist()
    preds = deps.indices.tolist()
    consumer = [-1] * n  # earliest non-DMA instruction reading what the DMA wrote
    producer = [-1] * n  # latest non-DMA instruction whose output the DMA reads
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            j = preds[k]
            if is_dma[i] and not is_dma[j] and j > producer[i]:
                producer[i] = j
            if is_dma[j] and not is_dma[i] and consumer[j] < 0:
                consumer[j] = i
    kind = costs.dma_queue.tolist() if len(costs.dma_queue) == n else [0] * n
    queue = [-1] * n
    statement = _affine_load_statements(trace, kind) if platform.affine_load_queues else [-1] * n
    for i in range(n):
        if not is_dma[i]:
            continue
        if statement[i] >= 0:  # a load of an affine loop: its statement's own queue (hardware.py)
            queue[i] = statement[i]
            continue
        first, second = (producer[i], consumer[i]) if kind[i] == 1 else (consumer[i], producer[i])
        by = first if first >= 0 else second
        # No compute engine reads or writes its tile (a DMA-only kernel): queues of their own by kind, as "kind".
        queue[i] = engine[by] if by >= 0 else dma + 1 + kind[i]
    return queue


def _affine_load_statements(trace: Trace, kind: list[int]) -> list[int]:
    """Per instruction: a queue id of its own for each load statement (source line) whose innermost loop is an
    affine_range, numbered past the engines' queues; -1 for everything else."""
    n = len(trace)
    out = [-1] * n
    if not trace.loop_contexts:
        return out
    ctx = np.asarray(trace.columns["loop_ctx"], dtype=np.int64).tolist()
    line = np.asarray(trace.columns["line"], dtype=np.int64).tolist()
    affine = [bool(nest) and trace.loops[nest[-1][0]].kind == LoopKind.AFFINE for nest in trace.loop_contexts]
    ids: dict[int, int] = {}
    for i in range(n):
        if kind[i] == 0 and affine[ctx[i]]:
            out[i] = ids.setdefault(line[i], 1000 + len(ids))
    return out


def release_order(last_barrier: list[int]) -> list[int]:
    """The instructions in the order their sequential barriers release them: by barrier, then program order
    (program order itself unless sequential_prefetch moves a load behind an earlier barrier)."""
    return sorted(range(len(last_barrier)), key=last_barrier.__getitem__)


class _Gate:
    """Which instructions may run next: every one of their `waits` done and their sequential barrier drained
    (every instruction before the barrier done). The compiler-order list schedule (pipelined_order) and the replay
    walk the trace through one; `ready` receives each instruction as it becomes runnable."""

    def __init__(self, waits: list[list[int]], last_barrier: list[int], ready: Callable[[int], None]) -> None:
        n = len(waits)
        self.pending = [len(w) for w in waits]
        self.succ: list[list[int]] = [[] for _ in range(n)]
        for i, w in enumerate(waits):
            for j in w:
                self.succ[j].append(i)
        self.last_barrier = last_barrier
        self.by_barrier = release_order(last_barrier)
        self.is_released = [False] * n
        self.released = 0
        self.ready = ready

    def release(self, done_prefix: int) -> None:
        """Release the instructions whose barrier is at or before `done_prefix` (everything before it is done)."""
        by_barrier, last_barrier, n = self.by_barrier, self.last_barrier, len(self.by_barrier)
        released = self.released
        while released < n and last_barrier[by_barrier[released]] <= done_prefix:
            r = by_barrier[released]
            self.is_released[r] = True
            if self.pending[r] == 0:
                self.ready(r)
            released += 1
        self.released = released

    def done(self, i: int) -> None:
        pending, is_released, ready = self.pending, self.is_released, self.ready
        for k in self.succ[i]:
            pending[k] -= 1
            if pending[k] == 0 and is_released[k]:
                ready(k)


def pipelined_order(waits: list[list[int]], last_barrier: list[int], pos: np.ndarray) -> list[int]:
    """The compiler's order `pos` (spills.interleaved_positions) made one the replay can run: the instructions
    one by one, each time the one earliest in `pos` among those whose `waits` are all taken and whose sequential
    barrier has drained (every instruction before it taken). Linking a queue's DMAs in this order cannot make an
    instruction wait on one that waits on it; in `pos` itself it can (a store inside a sequential_range, whose
    barrier waits for the earlier DMA that the queue puts behind it)."""
    n = len(waits)
    rank = pos.tolist()
    taken = [False] * n
    order: list[int] = []
    heap: list[tuple[int, int]] = []
    gate = _Gate(waits, last_barrier, lambda r: heapq.heappush(heap, (rank[r], r)))
    done_prefix = 0
    while True:
        gate.release(done_prefix)
        if not heap:
            break
        _, i = heapq.heappop(heap)
        taken[i] = True
        order.append(i)
        gate.done(i)
        while done_prefix < n and taken[done_prefix]:
            done_prefix += 1
    return order


def replay_time_ordered(
    trace: Trace,
    platform: NeuronCoreSpec,
    costs: InstructionCosts,
    deps: Dependencies,
    barriers: np.ndarray,
    spills: SpillPlan,
) -> Schedule:
    n = len(trace)
    engine, seconds = _engines(trace, platform, costs)
    queue = dma_queues(trace, platform, costs, deps, engine)
    issue_s = platform.dma_queue_issue_s
    dma = int(Engine.DMA)
    dma_bytes = costs.dma_bytes.tolist()
    touches_hbm = costs.dma_touches_hbm.tolist()
    engine_s = costs.dma_engine_s.tolist()
    lanes = costs.dma_lanes.tolist()
    indptr = deps.indptr.tolist()
    preds = deps.indices.tolist()
    reload_at = spills.reload_bytes.tolist()
    save_at = spills.save_bytes.tolist()
    spill_any = bool(spills.reload_bytes.any() or spills.save_bytes.any())
    elided = spills.elided.tolist()
    reload_after = spills.reload_after.tolist()
    fixed = platform.dma_fixed_s

    reload_rows, save_rows = spill_descriptors(spills, platform, n)

    def spill_engine_s(nbytes: float, rows: float) -> float:
        return float(dma_engine_seconds(nbytes, rows, platform))

    # What each instruction waits for, as predecessors that must be placed first: its data (deps), a spill
    # reload's earlier use, the previous instruction on its compute engine, the previous DMA on
    # its queue. A sequential-loop barrier waits for every earlier instruction (handled by `released` below).
    waits: list[list[int]] = [[] for _ in range(n)]
    last_on: dict[tuple[str, int], int] = {}
    last_barrier = [0] * n
    b = previous = 0
    barrier_at = barriers.tolist()
    # With sequential_prefetch an HBM load waits for the barrier before its iteration's: one iteration ahead.
    prefetch = costs.dma_queue.tolist() if platform.sequential_prefetch and len(costs.dma_queue) == n else None
    # With dma_queue_compiler_order a queue runs its DMAs in the compiler's order ([NKI-AFFINE]: iterations of an
    # affine loop software-pipelined, as spills.py takes the SBUF working set), linked below; else program order.
    pos = (interleaved_positions(deps.sbuf, n, platform.affine_interleave,
                                 outer=platform.affine_outer_pipeline)
           if platform.dma_queue_compiler_order else None)
    for i in range(n):
        if barrier_at[i]:
            b, previous = i, b
        last_barrier[i] = previous if prefetch is not None and engine[i] == dma and prefetch[i] == 0 else b
        w = preds[indptr[i]:indptr[i + 1]]
        if spill_any and 0 <= reload_after[i] < i:
            w.append(reload_after[i])
        lane = ("q", queue[i]) if engine[i] == dma else ("e", engine[i])
        if elided[i] or engine[i] == dma and (queue[i] < 0 or pos is not None):
            lane = None
        if lane is not None:
            if lane in last_on:
                w.append(last_on[lane])
            last_on[lane] = i
        waits[i] = w
    if pos is not None:
        for i in pipelined_order(waits, last_barrier, pos):
            if engine[i] == dma and queue[i] >= 0 and not elided[i]:
                if ("q", queue[i]) in last_on:
                    waits[i].append(last_on[("q", queue[i])])
                last_on[("q", queue[i])] = i
    runnable: list[int] = []
    gate = _Gate(waits, last_barrier, runnable.append)

    start = [0.0] * n
    end = [0.0] * n
    placed = [False] * n
    prefix_max = [0.0] * (n + 1)  # latest end among instructions [0, k): a barrier's floor
    done_prefix = 0
    dma_heap: list[tuple[float, int]] = []
    ready_of = [0.0] * n
    queue_start: dict[int, float] = {}
    engine_free = [0.0] * 5
    hbm = _Bandwidth(platform.hbm_bytes_per_s)
    onchip = _Bandwidth(platform.dma_sbuf_bytes_per_s)
    engines = _Bandwidth(float(platform.dma_queues))
    outstanding = [0.0] * platform.dma_queues

    def finish(i: int, s: float, f: float) -> None:
        nonlocal done_prefix
        start[i], end[i], placed[i] = s, f, True
        gate.done(i)
        if i == done_prefix:
            while done_prefix < n and placed[done_prefix]:
                prefix_max[done_prefix + 1] = max(prefix_max[done_prefix], end[done_prefix])
                done_prefix += 1
            gate.release(done_prefix)

    def ready_time(i: int) -> float:
        e = engine[i]
        ready = prefix_max[last_barrier[i]] if barrier_at[last_barrier[i]] else 0.0
        for k in range(indptr[i], indptr[i + 1]):
            t = end[preds[k]]
            if t > ready:
                ready = t
        if spill_any and reload_at[i] > 0.0:
            after = reload_after[i]
            if 0 <= after < i:
                issue = end[after]
            elif after == -2:
                issue = ready if e == dma else min(ready, engine_free[e])
            else:
                issue = ready
            moved = _move(hbm, engines, issue, reload_at[i], spill_engine_s(reload_at[i], reload_rows[i]))
            ready = max(ready, moved + fixed)
        return ready

    def place_compute(i: int, ready: float) -> None:
        e = engine[i]
        s = max(ready, engine_free[e])
        f = s + seconds[i]
        engine_free[e] = max(engine_free[e], f)
        if spill_any and save_at[i] > 0.0:
            _move(hbm, engines, f, save_at[i], spill_engine_s(save_at[i], save_rows[i]))
        finish(i, s, f)

    def dma_key(i: int) -> float:
        # Fixed once the DMA is runnable (its queue's previous DMA is booked); its start is this or, when all
        # `dma_queues` DMAs are outstanding, the first to finish: the same for every DMA, so the heap's order holds.
        s = ready_of[i]
        if queue[i] >= 0 and queue[i] in queue_start:
            s = max(s, queue_start[queue[i]] + issue_s)
        return s

    gate.release(done_prefix)
    while done_prefix < n:
        while runnable:
            i = runnable.pop()
            ready = ready_time(i)
            if elided[i]:  # a kept repeated load, or loop-invariant computation (valnum.py)
                finish(i, ready, ready)
            elif engine[i] != dma:
                place_compute(i, ready)
            else:
                ready_of[i] = ready
                heapq.heappush(dma_heap, (dma_key(i), i))
        if not dma_heap:
            break
        key, i = heapq.heappop(dma_heap)
        s = max(key, outstanding[0])
        if queue[i] >= 0:
            queue_start[queue[i]] = s
        last_byte = _move(hbm if touches_hbm[i] else onchip, engines, s, dma_bytes[i], engine_s[i])
        f = max(last_byte, s + engine_s[i] / lanes[i]) + fixed
        heapq.heapreplace(outstanding, f)
        if spill_any and save_at[i] > 0.0:
            _move(hbm, engines, f, save_at[i], spill_engine_s(save_at[i], save_rows[i]))
        finish(i, s, f)
    if done_prefix < n:
        raise RuntimeError("time-ordered replay stalled: an instruction waits on one placed after it")
    s_arr, e_arr = np.asarray(start), np.asarray(end)
    return Schedule(s_arr, e_arr, np.asarray(engine, dtype=np.int64), float(e_arr.max()) if n else 0.0)
