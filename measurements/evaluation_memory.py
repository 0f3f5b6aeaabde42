"""Peak memory of one evaluation: the calling (parent) process and its largest child.

    .venv/bin/python measurements/evaluation_memory.py                          # silu, full shape (112 MiB arrays)
    .venv/bin/python measurements/evaluation_memory.py --problem bmm --shape B=2,M=1024,K=64,N=1024

Runs `evaluate()` once, the way the web app's LocalExecutor does (in a thread of the calling process), and
prints the parent's peak RSS before and after, the largest child's peak RSS, the output size and the wall
time. Run it in a fresh process: ru_maxrss is a high-water mark and never goes down.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.evaluator import EvaluationRequest, Limits, LocalExecutor  # noqa: E402
from engine.platforms.nki.suites import load_suite  # noqa: E402
from engine.platforms.nki.suites.specs import render_reference  # noqa: E402


def peak_mib(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # Linux reports KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", default="silu")
    parser.add_argument("--shape", default="", help="NAME=VALUE,... overriding the full case (default: full)")
    args = parser.parse_args()

    spec = next(s for s in load_suite("nkibench").problems if s.slug == args.problem)
    values = dict(spec.case("full"))
    for item in filter(None, args.shape.split(",")):
        name, value = item.split("=")
        values[name] = int(value)
    reference = render_reference(spec.references["full"], values, where=f"{spec.slug} reference")
    request = EvaluationRequest(
        kernel_source=spec.baseline_for("full"), reference_source=reference, tolerance=spec.tolerance,
        limits=Limits(wall_seconds=1800, cpu_seconds=1800, memory_bytes=12 * 1024**3),
    )
    before = peak_mib(resource.RUSAGE_SELF)
    started = time.monotonic()
    with LocalExecutor(max_workers=1) as executor:
        result = executor.submit(request).result()
    wall = time.monotonic() - started
    outcome = "correct" if result.correct else f"{result.error_kind}: {result.error_message[:200]}"
    print(f"problem {spec.slug} {values}: {outcome}, {wall:.1f} s")
    print(f"parent peak RSS: {before:.0f} MiB before evaluate(), {peak_mib(resource.RUSAGE_SELF):.0f} MiB after")
    print(f"largest child peak RSS: {peak_mib(resource.RUSAGE_CHILDREN):.0f} MiB")


if __name__ == "__main__":
    main()
