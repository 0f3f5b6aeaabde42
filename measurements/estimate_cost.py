"""What one performance-model estimate costs per trace: `prepare` (dependencies, value numbers, fusion order) and
`estimate` (the replay), timed separately on every cached NKIBench trace.

    PYTHONPATH=$PWD .venv/bin/python measurements/estimate_cost.py var/perf_calibration [--reps 3] [--json OUT]

Run it in two checkouts (e.g. a `git worktree` at the older model) one after the other, alternating, and compare
medians: the machine is noisy, only side-by-side ratios mean anything.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import time
from pathlib import Path

from engine.platforms.nki.perf import PERF_MODEL_VERSION, estimate, prepare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", type=Path, help="directory of cached traces (*.pkl) from manage.py calibrate")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write {trace: [instructions, prepare_s, estimate_s]} here")
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    for path in sorted(args.cache.glob("*.pkl"), key=lambda p: p.stat().st_size):
        with path.open("rb") as f:
            loaded = pickle.load(f)
        trace = loaded[0] if isinstance(loaded, tuple) else loaded
        prep_s, est_s = [], []
        for _ in range(args.reps):
            t = time.perf_counter()
            prepared = prepare(trace)
            prep_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            estimate(prepared, breakdown=False)
            est_s.append(time.perf_counter() - t)
        p, e = statistics.median(prep_s), statistics.median(est_s)
        rows[path.stem] = [len(trace), p, e]
        print(f"{path.stem[:44]:44} {len(trace):7d} instr  prepare {p * 1e3:8.1f} ms  estimate {e * 1e3:8.1f} ms",
              flush=True)
    total_p = sum(r[1] for r in rows.values())
    total_e = sum(r[2] for r in rows.values())
    print(f"{PERF_MODEL_VERSION}: {len(rows)} traces, prepare {total_p:.2f} s + estimate {total_e:.2f} s")
    if args.json:
        args.json.write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
