"""Where the predicted time goes: a breakdown of one replayed schedule (issue 19, "explain the number").

Pure numpy, no Django. Reads only what the replay produced (schedule.Schedule: each instruction's engine,
start and end, which already include its costs), the dependencies (deps.py) and the spill plan (spills.py);
it changes nothing the model predicts.

- Busy time per engine: the summed durations of its instructions (for DMA, the time at least one DMA is in
  flight), and its share of the latency.
- DMA time by queue: each DMA took the queue that became free first (as the replay assigns them); per queue
  the seconds its DMAs were in flight, and the DMA seconds by direction (loads, stores, on-chip copies).
- Spill traffic: saved and reloaded bytes (and re-fetches of evicted clean tiles) and the time they take at
  the HBM bandwidth.
- Dependency stalls per engine: time the engine sat idle while its next instruction waited for a producer on
  another engine (DMA counts as one engine: no DMA in flight while the next one waited for a compute result).
- The critical path: from the last instruction to finish, back through whatever released each start: a
  producer (the wait after it is a stall: semaphore latency, or a spill reload when the instruction had one),
  or a resource that freed exactly then (the previous instruction on the same engine, a DMA queue, a
  sequential-loop boundary). It covers [0, latency] without overlap, so its shares sum to 1; the largest
  share is the verdict ("bound by: DMA (62% of the critical path)").
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from engine.platforms.nki.hardware import NeuronCoreSpec
from engine.platforms.nki.perf.deps import Dependencies
from engine.platforms.nki.perf.profile import TIMELINE_ENGINES
from engine.platforms.nki.perf.schedule import Schedule
from engine.platforms.nki.perf.spills import SpillPlan
from engine.platforms.nki.simulator.trace import Engine, Trace

# Critical-path categories beyond the engines: waiting on a producer (semaphore) and on a spill reload.
STALL = "stall"
SPILL = "spill"
ENGINE_NAMES = tuple(TIMELINE_ENGINES.values())  # tensor, vector, scalar, gpsimd, dma
PATH_CATEGORIES = (*ENGINE_NAMES, SPILL, STALL)
LABELS = {"tensor": "Tensor Engine", "vector": "Vector Engine", "scalar": "Scalar Engine",
          "gpsimd": "GpSimd Engine", "dma": "DMA", SPILL: "spill reloads", STALL: "dependency stalls"}


@dataclass(frozen=True)
class Breakdown:
    latency_s: float
    busy_s: dict[str, float]  # per engine (dma: time with at least one DMA in flight)
    busy_share: dict[str, float]  # busy_s / latency
    dma_queue_s: list[float]  # per DMA queue, seconds its DMAs were in flight
    dma_s: dict[str, float]  # DMA seconds by direction (load, store, onchip), summed over concurrent DMAs
    spill: dict[str, float]  # save/reload/refetch bytes and the seconds they take at the HBM bandwidth
    stall_s: dict[str, float]  # per engine: idle, waiting for a producer on another engine
    path_s: dict[str, float] = field(default_factory=dict)  # critical path seconds per category
    path_share: dict[str, float] = field(default_factory=dict)  # sums to 1
    path_length: int = 0  # instructions on the critical path
    bound: str = ""  # the category with the largest critical-path share
    verdict: str = ""

    def to_dict(self) -> dict:
        return {"latency_s": self.latency_s, "busy_s": dict(self.busy_s), "busy_share": dict(self.busy_share),
                "dma_queue_s": list(self.dma_queue_s), "dma_s": dict(self.dma_s), "spill": dict(self.spill),
                "stall_s": dict(self.stall_s), "path_s": dict(self.path_s), "path_share": dict(self.path_share),
                "path_length": self.path_length, "bound": self.bound, "verdict": self.verdict}


def verdict_line(path_share: dict[str, float]) -> tuple[str, str]:
    """The largest critical-path share, as (category, one line); ('', '') for an empty path."""
    if not path_share or max(path_share.values()) <= 0:
        return "", ""
    bound = max(PATH_CATEGORIES, key=lambda k: path_share.get(k, 0.0))
    return bound, f"bound by: {LABELS[bound]} ({path_share[bound]:.0%} of the critical path)"


def explain_schedule(trace: Trace, platform: NeuronCoreSpec, deps: Dependencies, spills: SpillPlan,
                     sched: Schedule) -> Breakdown:
    n = len(trace)
    start, end, engine = sched.start_s, sched.end_s, np.asarray(sched.engine, dtype=np.int64)
    latency = float(sched.latency_s)
    dur = end - start
    dma_code = int(Engine.DMA)
    is_dma = engine == dma_code
    elided = np.asarray(spills.elided, dtype=bool) if len(spills.elided) == n else np.zeros(n, dtype=bool)
    live = ~elided  # an elided repeated load never ran

    busy: dict[str, float] = {}
    for code, name in TIMELINE_ENGINES.items():
        rows = (engine == int(code)) & live
        busy[name] = _union_s(start[rows], end[rows]) if int(code) == dma_code else float(dur[rows].sum())
    share = {k: (v / latency if latency > 0 else 0.0) for k, v in busy.items()}

    producers, consumers = _edges(deps, n)
    cross = engine[producers] != engine[consumers]
    stalls = _stalls(start, end, engine, live, producers[cross], consumers[cross], n)

    path_s, length = _critical_path(start, end, engine, producers, consumers, spills.reload_bytes, elided)
    total = sum(path_s.values())
    path_share = {k: (v / total if total > 0 else 0.0) for k, v in path_s.items()}
    bound, verdict = verdict_line(path_share)
    return Breakdown(
        latency_s=latency, busy_s=busy, busy_share=share,
        dma_queue_s=_queue_seconds(start, end, is_dma & live, platform.dma_queues),
        dma_s=_dma_directions(trace, dur, is_dma & live),
        spill=_spill(spills, platform), stall_s=stalls, path_s=path_s, path_share=path_share,
        path_length=length, bound=bound, verdict=verdict,
    )


def _union_s(start: np.ndarray, end: np.ndarray) -> float:
    """Length of the union of intervals."""
    if len(start) == 0:
        return 0.0
    order = np.argsort(start, kind="stable")
    s, e = start[order], np.maximum.accumulate(end[order])
    prev_end = np.concatenate(([s[0]], e[:-1]))
    # Each interval adds what it reaches beyond every earlier end.
    return float(np.maximum(e - np.maximum(s, prev_end), 0.0).sum() + 0.0)


def _edges(deps: Dependencies, n: int) -> tuple[np.ndarray, np.ndarray]:
    indptr = np.asarray(deps.indptr, dtype=np.int64)
    producers = np.asarray(deps.indices, dtype=np.int64)
    consumers = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)) if n else np.zeros(0, np.int64)
    return producers, consumers


def _stalls(start: np.ndarray, end: np.ndarray, engine: np.ndarray, live: np.ndarray, producers: np.ndarray,
            consumers: np.ndarray, n: int) -> dict[str, float]:
    """Per engine: idle time before an instruction that is explained by a producer on another engine."""
    released = np.full(n, -np.inf)  # when the last cross-engine producer of each instruction finished
    if len(producers):
        np.maximum.at(released, consumers, end[producers])
    out: dict[str, float] = {}
    for code, name in TIMELINE_ENGINES.items():
        rows = np.flatnonzero((engine == int(code)) & live)
        if len(rows) == 0:
            out[name] = 0.0
            continue
        rows = rows[np.argsort(start[rows], kind="stable")]
        # The engine is free from the latest end of everything it started before (no DMA in flight, for DMA).
        free = np.concatenate(([0.0], np.maximum.accumulate(end[rows])[:-1]))
        waited = np.minimum(start[rows], released[rows]) - free
        out[name] = float(np.maximum(waited, 0.0).sum())
    return out


def _critical_path(start: np.ndarray, end: np.ndarray, engine: np.ndarray, producers: np.ndarray,
                   consumers: np.ndarray, reload_bytes: np.ndarray, elided: np.ndarray) -> tuple[dict[str, float], int]:
    """Seconds per category along the chain of starts that bound the latency, and its length."""
    path = dict.fromkeys(PATH_CATEGORIES, 0.0)
    n = len(start)
    if n == 0:
        return path, 0
    names = {int(code): name for code, name in TIMELINE_ENGINES.items()}
    tol = 1e-15 + 1e-12 * float(end.max())
    # Vectorized per instruction: its latest-finishing producer, the previous instruction on its engine, and
    # the range of instructions (sorted by end) that finished when it started. The walk then only looks up.
    latest = _latest_producer(end, producers, consumers, n)
    previous = np.full(n, -1, dtype=np.int64)
    for code in np.unique(engine):
        rows = np.flatnonzero(engine == code)
        previous[rows[1:]] = rows[:-1]
    by_end = np.argsort(end, kind="stable")
    lo = np.searchsorted(end[by_end], start - tol)
    hi = np.searchsorted(end[by_end], start + tol, side="right")
    reload = np.asarray(reload_bytes) if len(reload_bytes) == n else np.zeros(n)
    waits_spill = ((reload > 0) & ~elided).tolist()
    start_l, end_l, engine_l = start.tolist(), end.tolist(), engine.tolist()
    latest_l, previous_l, lo_l, hi_l, by_end_l = latest.tolist(), previous.tolist(), lo.tolist(), hi.tolist(), by_end.tolist()
    i = int(np.flatnonzero(end == end.max())[-1])
    length = 0
    while True:
        length += 1
        path[names.get(engine_l[i], "dma")] += end_l[i] - start_l[i]
        s = start_l[i]
        if s <= tol:
            break
        # Released exactly then: by its producer, else the previous instruction on its engine, else whatever
        # freed a resource at that moment (a DMA queue, a loop boundary): the latest such in program order.
        j, p = -1, latest_l[i]
        if p >= 0 and abs(end_l[p] - s) <= tol:
            j = p
        elif previous_l[i] >= 0 and abs(end_l[previous_l[i]] - s) <= tol:
            j = previous_l[i]
        else:
            j = max((k for k in by_end_l[lo_l[i]:hi_l[i]] if k < i), default=-1)
        if j < 0:  # waited beyond every release: for its producer's data (or a spill reload)
            j = p if p >= 0 and end_l[p] <= s + tol else _latest_before(i, hi_l[i], by_end_l)
        gap = s - end_l[j] if j >= 0 else s
        if gap > 0:
            path[SPILL if waits_spill[i] else STALL] += gap
        if j < 0:
            break
        i = j
    return path, length


def _latest_producer(end: np.ndarray, producers: np.ndarray, consumers: np.ndarray, n: int) -> np.ndarray:
    """Per instruction, its producer (earlier in program order) that finished last; -1 if none."""
    out = np.full(n, -1, dtype=np.int64)
    keep = producers < consumers
    producers, consumers = producers[keep], consumers[keep]
    if len(producers):
        order = np.lexsort((end[producers], consumers))
        cons = consumers[order]
        last = np.flatnonzero(np.append(cons[1:] != cons[:-1], True))  # last row of each consumer's group
        out[cons[last]] = producers[order][last]
    return out


def _latest_before(i: int, hi: int, by_end: list[int]) -> int:
    """The earlier (program order) instruction that finished last among the first `hi` by end; -1 if none."""
    for k in range(hi - 1, -1, -1):
        if by_end[k] < i:
            return by_end[k]
    return -1


def _queue_seconds(start: np.ndarray, end: np.ndarray, rows: np.ndarray, queues: int) -> list[float]:
    """Seconds in flight per DMA queue, each DMA (in program order) on the queue that became free first."""
    heap = [(0.0, q) for q in range(max(queues, 1))]
    out = [0.0] * len(heap)
    ends, starts = end.tolist(), start.tolist()
    for k in np.flatnonzero(rows).tolist():
        q = heap[0][1]
        heapq.heapreplace(heap, (ends[k], q))
        out[q] += ends[k] - starts[k]
    return out


def _dma_directions(trace: Trace, dur: np.ndarray, rows: np.ndarray) -> dict[str, float]:
    c = trace.columns
    reads = np.asarray(c["hbm_read"], dtype=np.float64) > 0
    writes = np.asarray(c["hbm_write"], dtype=np.float64) > 0
    return {"load": float(dur[rows & reads].sum()), "store": float(dur[rows & writes & ~reads].sum()),
            "onchip": float(dur[rows & ~reads & ~writes].sum())}


def _spill(spills: SpillPlan, platform: NeuronCoreSpec) -> dict[str, float]:
    save, reload, refetch = spills.spill_save_total, spills.spill_reload_total, spills.refetch_total
    return {"save_bytes": float(save), "reload_bytes": float(reload), "refetch_bytes": float(refetch),
            "seconds": float((save + reload + refetch) / platform.hbm_bytes_per_s)}
