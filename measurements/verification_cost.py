"""What verification adds to an evaluation: two checkouts' full pipelines, side by side, interleaved.

    git archive 8211753 | tar -x -C OLD; git archive HEAD | tar -x -C NEW
    .venv/bin/python measurements/verification_cost.py OLD NEW [--rounds 3] [--only silu,matmul]

Each round runs `measurements/evaluate_nkibench.py --workers 1` of both trees (mini cases: static check,
sandboxed reference and kernel, three seeds, the tree's verification, profile), one after the other, the order
swapped every round so that a drift of the machine's load falls on both. Prints each run's per-problem wall
times, then the median per problem and of the totals, and NEW/OLD. Every problem must be correct in every run
(a failed one would be timed for a different amount of work).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROW = re.compile(r"^(\S+)\s+(\S+)\s+\S+\s+\S+\s+([0-9.]+)$")


def run_tree(tree: Path, only: str) -> dict[str, float | None]:
    """Wall seconds per problem of one run of `tree`'s evaluate_nkibench.py (its own sys.path), None where the
    problem was not correct, and 'total' (the whole command)."""
    command = [sys.executable, "measurements/evaluate_nkibench.py", "--workers", "1"] + (["--only", only] if only else [])
    started = time.monotonic()
    out = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=True).stdout
    times: dict[str, float | None] = {"total": time.monotonic() - started}
    for line in out.splitlines():
        match = ROW.match(line.strip())
        if match and match.group(1) != "problem":
            correct = match.group(2) == "correct"
            times[match.group(1)] = float(match.group(3)) if correct else None
            if not correct:
                print(f"{tree}: {match.group(1)} was {match.group(2)}; left out of this run", flush=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated slugs (default: all 14)")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for k in range(args.rounds):
        order = ("old", "new") if k % 2 == 0 else ("new", "old")
        for name in order:
            times = run_tree(getattr(args, name), args.only)
            runs[name].append(times)
            print(f"round {k + 1} {name}: total {times['total']:.1f} s  " +
                  " ".join(f"{p}={t}" for p, t in times.items() if p != "total"), flush=True)
    print(f"{'problem':<24} {'old_s':>8} {'new_s':>8} {'new/old':>8}")
    sums = {"old": 0.0, "new": 0.0}
    for problem in [p for p in runs["old"][0] if p != "total"]:
        medians = {}
        for name in ("old", "new"):
            seen = [r[problem] for r in runs[name] if r.get(problem) is not None]
            medians[name] = statistics.median(seen) if seen else None
        if None in medians.values():
            print(f"{problem:<24} never correct in one tree: left out")
            continue
        sums["old"] += medians["old"]
        sums["new"] += medians["new"]
        print(f"{problem:<24} {medians['old']:>8.2f} {medians['new']:>8.2f} {medians['new'] / medians['old']:>8.3f}")
    print(f"{'sum of medians':<24} {sums['old']:>8.2f} {sums['new']:>8.2f} {sums['new'] / sums['old']:>8.3f}")
    totals = {name: statistics.median(r["total"] for r in runs[name]) for name in ("old", "new")}
    print(f"{'median command wall':<24} {totals['old']:>8.2f} {totals['new']:>8.2f} {totals['new'] / totals['old']:>8.3f}")


if __name__ == "__main__":
    main()
