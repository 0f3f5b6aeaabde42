"""How many PSUM accumulation groups the performance model's schedule keeps open at once, per cached trace.

[ARCH-V2] gives 8 PSUM banks of 2 KiB per partition, so at most 8 accumulation groups can be open; this says
whether that limit would ever bind in the model's schedule (docs/history/performance-model.md, "perf-4 candidates: SBUF
working set..."). A group of a 2 KiB bank of a PSUM tensor runs from a write that follows a read of it (or its
first write) to its last access before the next such write; times are the replay's.

    .venv/bin/python measurements/psum_groups.py var/perf_calibration var/perf_calibration/pairs
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platforms.nki.hardware import TRN1  # noqa: E402
from engine.platforms.nki.perf import prepare  # noqa: E402
from engine.platforms.nki.perf.costs import instruction_costs  # noqa: E402
from engine.platforms.nki.perf.schedule import replay  # noqa: E402
from engine.platforms.nki.perf.spills import plan_spills  # noqa: E402
from engine.platforms.nki.simulator.trace import MemorySpace, Trace  # noqa: E402


def open_groups(trace: Trace) -> tuple[int, int]:
    """(groups, most open at once) of 2 KiB PSUM banks in the model's schedule of `trace`."""
    n = len(trace)
    acc = trace.access
    space = np.array([int(t.space) for t in trace.tensors])
    tensor = np.asarray(acc["tensor"], dtype=np.int64)
    rows = np.flatnonzero(space[tensor] == MemorySpace.PSUM) if len(tensor) else np.zeros(0, dtype=np.int64)
    if len(rows) == 0:
        return 0, 0
    p = TRN1
    prepared = prepare(trace)
    spills = plan_spills(prepared.deps.sbuf, n, p.sbuf_bytes_per_partition * p.sbuf_usable_fraction, p.partitions,
                         p.affine_interleave)
    sched = replay(trace, p, instruction_costs(trace, p), prepared.deps, prepared.barriers, spills)
    owner = np.repeat(np.arange(n), np.asarray(trace.columns["access_count"], dtype=np.int64))[rows]
    lo = np.asarray(acc["byte_lo"], dtype=np.int64)[rows]
    hi = np.asarray(acc["byte_hi"], dtype=np.int64)[rows]
    write = np.asarray(acc["is_write"])[rows] != 0
    bank = p.psum_bank_bytes_per_partition
    spans: list[tuple[float, float]] = []
    state: dict[tuple[int, int], list] = {}  # bank -> [open, close, read since opened]
    for t, i, a, b, w in zip(tensor[rows].tolist(), owner.tolist(), lo.tolist(), hi.tolist(), write.tolist(),
                             strict=True):
        for k in range(a // bank, max(a // bank + 1, -(-b // bank))):
            g = state.get((t, k))
            if w and (g is None or g[2]):
                if g is not None:
                    spans.append((g[0], g[1]))
                state[(t, k)] = [sched.start_s[i], sched.end_s[i], False]
            elif g is not None:
                g[1] = max(g[1], sched.end_s[i])
                g[2] = g[2] or not w
    spans += [(g[0], g[1]) for g in state.values()]
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = now = 0
    for _, d in events:
        now += d
        most = max(most, now)
    return len(spans), most


def main(directories: list[str]) -> None:
    for directory in directories:
        for path in sorted(Path(directory).glob("*.pkl")):
            with path.open("rb") as f:
                trace = pickle.load(f)
            groups, most = open_groups(trace)
            if groups:
                print(f"{path.stem[:60]:60s} groups {groups:6d}  most open at once {most}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["var/perf_calibration"])
