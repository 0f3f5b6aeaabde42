"""What explaining a predicted latency costs (engine/platforms/nki/perf/explain.py, issue 19), and what it says.

For every cached NKIBench trace (`manage.py calibrate --cache DIR` writes them as pickles), times
`estimate(prepared)` with and without the breakdown, alternating, and prints the medians, their ratio and the
verdict. The trace is prepared once (dependencies), as calibration and the profile child reuse it.

    PYTHONPATH=$PWD nice -n 10 .venv/bin/python measurements/explain_overhead.py var/perf_calibration --reps 5
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import time
from pathlib import Path

from engine.platforms.nki.perf import estimate, prepare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", type=Path, help="directory of cached traces (*.pkl) from manage.py calibrate")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for path in sorted(args.cache.glob("*.pkl"), key=lambda p: p.stat().st_size):
        with path.open("rb") as f:
            loaded = pickle.load(f)
        trace = loaded[0] if isinstance(loaded, tuple) else loaded
        prepared = prepare(trace)
        with_s, without_s = [], []
        for _ in range(args.reps):
            t = time.perf_counter()
            report = estimate(prepared)
            with_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            plain = estimate(prepared, breakdown=False)
            without_s.append(time.perf_counter() - t)
        assert plain.latency_ms == report.latency_ms and plain.profile == report.profile
        w, wo = statistics.median(with_s), statistics.median(without_s)
        rows.append((w / wo, w, wo))
        b = report.breakdown
        print(f"{path.stem[:44]:44} {len(trace):7d} instr  path {b.path_length:6d}  {wo * 1e3:8.1f} ms -> "
              f"{w * 1e3:8.1f} ms  x{w / wo:5.2f}  {b.verdict}")
    ratios = [r for r, _, _ in rows]
    total_w, total_wo = sum(w for _, w, _ in rows), sum(wo for _, _, wo in rows)
    print(f"median ratio x{statistics.median(ratios):.2f}; all traces {total_wo:.2f} s -> {total_w:.2f} s "
          f"(x{total_w / total_wo:.2f})")


if __name__ == "__main__":
    main()
