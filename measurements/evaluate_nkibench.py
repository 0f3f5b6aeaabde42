"""Time the full evaluation pipeline (static check, sandboxed reference and kernel, 3 seeds, profile) on the
14 NKIBench baselines, the way `load_suite` and the upload page run it: through the local executor.

    .venv/bin/python measurements/evaluate_nkibench.py                 # mini cases, 2 workers
    .venv/bin/python measurements/evaluate_nkibench.py --case full --workers 1 --only silu,matmul

Prints one row per problem (outcome, predicted latency, peak fraction, wall time of that evaluation) and
the wall time of the whole batch. No database: the problems come straight from the suite files. The
limits are benchmark.conf's defaults (120 s / 4 GiB per child for mini shapes, 1800 s / 12 GiB for full).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.evaluator import EvaluationRequest, Limits, LocalExecutor  # noqa: E402
from engine.platforms.nki.suites import load_suite  # noqa: E402

LIMITS = {
    "mini": Limits(wall_seconds=120, cpu_seconds=120, memory_bytes=4 * 1024**3),
    "full": Limits(wall_seconds=1800, cpu_seconds=1800, memory_bytes=12 * 1024**3),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=sorted(LIMITS), default="mini")
    parser.add_argument("--platform", default="trn1")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated slugs (default: all 14)")
    args = parser.parse_args()

    specs = load_suite("nkibench").problems
    if args.only:
        wanted = set(args.only.split(","))
        specs = [spec for spec in specs if spec.slug in wanted]
    started = time.monotonic()
    with LocalExecutor(max_workers=args.workers) as executor:
        futures = []
        for spec in specs:
            counts = spec.peak_counts(args.case)
            request = EvaluationRequest(
                kernel_source=spec.baseline_for(args.case),
                reference_source=spec.reference_source(args.case),
                platform=args.platform,
                peak_counts=(counts.vector_flops, counts.matmul_flops, counts.hbm_bytes) if counts else None,
                tolerance=spec.tolerance,
                limits=LIMITS[args.case],
            )
            futures.append((spec, executor.submit(request)))
        print(f"{'problem':<24} {'outcome':<16} {'latency_ms':>12} {'peak':>7} {'wall_s':>8}")
        for spec, future in futures:
            result = future.result()
            outcome = "correct" if result.correct else str(result.error_kind or "incorrect")
            latency = f"{result.latency_ms:.5g}" if result.latency_ms is not None else "-"
            peak = f"{result.peak_fraction:.1%}" if result.peak_fraction is not None else "-"
            print(f"{spec.slug:<24} {outcome:<16} {latency:>12} {peak:>7} {result.wall_time_s:>8.1f}", flush=True)
            if not result.correct:
                print(f"    {result.error_message[:200]}", flush=True)
    print(f"total wall time for {len(futures)} {args.case} evaluations with {args.workers} workers: "
          f"{time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
