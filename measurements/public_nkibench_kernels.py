"""Every public NKIBench kernel, unmodified, against the matching built-in problem's full case (issue 20).

    .venv/bin/python measurements/public_nkibench_kernels.py /path/to/AccelOpt/NKIBench [--workers 1] [--only silu]

Reads NKIBench's summary.json, and evaluates each kernel it lists (`kernels/<slug>_<shape>_0.py`) against
OUR suite's `<slug>:full` problem: our reference, our peak counts and tolerance, not the kernel's own
reference file. That is what a user uploading the public kernel to `<slug>:full` gets. Prints one row
per kernel (outcome, predicted latency, fraction of peak, wall time) and how many of them are correct.
The full evaluation pipeline runs (static check, sandbox, record then verify, 3 seeds, profile), through
the local executor, with benchmark.conf's limits for full shapes. No database.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.evaluator import EvaluationRequest, Limits, LocalExecutor  # noqa: E402
from engine.platforms.nki.suites import load_suite  # noqa: E402

FULL_LIMITS = Limits(wall_seconds=1800, cpu_seconds=1800, memory_bytes=12 * 1024**3)


def public_kernels(nkibench: Path) -> list[tuple[str, Path]]:
    """(slug, kernel file) for every kernel summary.json lists, in its order."""
    summary = json.loads((nkibench / "summary.json").read_text())
    kernels = []
    for slug, entry in summary.items():
        for case in entry["cases"].values():
            for impl in case["impls"]:
                kernels.append((slug, (nkibench / impl["kernel"]).resolve()))
    return kernels


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("nkibench", type=Path, help="AccelOpt's NKIBench/ directory")
    parser.add_argument("--platform", default="trn1")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated slugs (default: every kernel listed)")
    args = parser.parse_args()

    specs = {spec.slug: spec for spec in load_suite("nkibench").problems}
    kernels = public_kernels(args.nkibench)
    if args.only:
        kernels = [(slug, path) for slug, path in kernels if slug in set(args.only.split(","))]
    missing = sorted({slug for slug, _ in kernels if slug not in specs})
    if missing:
        print(f"no built-in problem for: {', '.join(missing)}", file=sys.stderr)
        return 2
    started = time.monotonic()
    correct = 0
    with LocalExecutor(max_workers=args.workers) as executor:
        futures = []
        for slug, path in kernels:
            spec = specs[slug]
            counts = spec.peak_counts("full")
            futures.append((slug, path, executor.submit(EvaluationRequest(
                kernel_source=path.read_text(), reference_source=spec.reference_source("full"),
                platform=args.platform, tolerance=spec.tolerance, limits=FULL_LIMITS,
                peak_counts=(counts.vector_flops, counts.matmul_flops, counts.hbm_bytes) if counts else None,
            ))))
        print(f"{'kernel':<48} {'problem':<28} {'outcome':<12} {'latency_ms':>11} {'peak':>7} {'wall_s':>7}")
        for slug, path, future in futures:
            result = future.result()
            ok = bool(result.correct) and not result.error_kind
            correct += ok
            outcome = "correct" if ok else str(result.error_kind or "incorrect")
            latency = f"{result.latency_ms:.5g}" if result.latency_ms is not None else "-"
            peak = f"{result.peak_fraction:.1%}" if result.peak_fraction is not None else "-"
            print(f"{path.name:<48} {slug + ':full':<28} {outcome:<12} {latency:>11} {peak:>7} "
                  f"{result.wall_time_s or 0:>7.1f}", flush=True)
            if not ok:
                print(f"    {result.error_message[:300]}", flush=True)
    print(f"{correct} of {len(kernels)} public NKIBench kernels correct on our full cases "
          f"({time.monotonic() - started:.0f} s, {args.workers} worker(s))")
    return 0 if correct == len(kernels) else 1


if __name__ == "__main__":
    sys.exit(main())
