"""What the OS isolation of evaluation children costs per evaluation (issue 18).

    .venv/bin/python measurements/isolation_overhead.py                    # silu mini case, 20 pairs
    .venv/bin/python measurements/isolation_overhead.py --only matmul --pairs 10 --backend simulator

Runs the same mini-case evaluation (NKIBench baseline, its reference, three seeds, profile) in pairs, one
isolated (namespaces, a leased uid: the default) and one under the opt-out `ACCELOPT_SANDBOX_ALLOW_ROOT=1`
(children started directly), alternating which goes first so load drift on a shared host falls on both.
One evaluation at a time. Prints each pair and the medians of `wall_time_s`; with `--null` the same kernel
runs on the null backend too (plain numpy: start-up dominates, so the overhead shows most); with `--startup`
it also times one child alone: start, import numpy and our code, load a kernel, answer (what isolation
adds to each of an evaluation's three children, which start in parallel).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.evaluator import Limits, evaluate  # noqa: E402
from engine.evaluator.sandbox.user import ALLOW_ROOT_VARIABLE  # noqa: E402
from engine.platforms.nki.suites import load_suite  # noqa: E402

LIMITS = Limits(wall_seconds=120, cpu_seconds=120, memory_bytes=4 * 1024**3)
NULL_KERNEL = "import numpy as np\n\ndef kernel(*args):\n    return args[0] * 1.0\n"
NULL_REFERENCE = '''
import numpy as np

def get_inputs():
    return [np.random.normal(size=(128, 512)).astype(np.float32)]

def forward(a):
    return a * 1.0
'''


def one(kernel: str, reference: str, backend: str, isolated: bool) -> float:
    if isolated:
        os.environ.pop(ALLOW_ROOT_VARIABLE, None)
    else:
        os.environ[ALLOW_ROOT_VARIABLE] = "1"
    try:
        result = evaluate(kernel, reference, backend=backend, limits=LIMITS)
    finally:
        os.environ.pop(ALLOW_ROOT_VARIABLE, None)
    if not result.correct:
        raise SystemExit(f"{'isolated' if isolated else 'opt-out'} evaluation failed: {result.error_kind}: "
                         f"{result.error_message}")
    return result.wall_time_s


def child_startup(isolated: bool) -> float:
    from engine.evaluator.sandbox.process import ChildProcess

    if not isolated:
        os.environ[ALLOW_ROOT_VARIABLE] = "1"
    try:
        started = time.monotonic()
        with ChildProcess("kernel", {"backend": "null", "platform": "trn1", "guards": {}}, LIMITS) as child:
            reply, _ = child.request({"op": "load", "source": NULL_KERNEL, "kernel_name": "kernel"})
        assert reply["ok"], reply
        return time.monotonic() - started
    finally:
        os.environ.pop(ALLOW_ROOT_VARIABLE, None)


def measure_startup(pairs: int) -> None:
    child_startup(True)
    isolated, plain = [], []
    for index in range(pairs):
        order = (True, False) if index % 2 == 0 else (False, True)
        times = {flag: child_startup(flag) for flag in order}
        isolated.append(times[True])
        plain.append(times[False])
    differences = [a - b for a, b in zip(isolated, plain, strict=True)]
    print(f"one child to its first answer: median isolated {statistics.median(isolated) * 1000:.0f} ms, opt-out "
          f"{statistics.median(plain) * 1000:.0f} ms, median of the pairwise differences "
          f"{statistics.median(differences) * 1000:+.0f} ms ({pairs} pairs, load average {os.getloadavg()[0]:.1f})",
          flush=True)


def measure(label: str, kernel: str, reference: str, backend: str, pairs: int) -> None:
    one(kernel, reference, backend, True)  # warm: the first isolated child runs the once-per-process probe
    one(kernel, reference, backend, False)
    isolated, plain = [], []
    for index in range(pairs):
        order = (True, False) if index % 2 == 0 else (False, True)
        times = {flag: one(kernel, reference, backend, flag) for flag in order}
        isolated.append(times[True])
        plain.append(times[False])
        print(f"  {label} pair {index + 1:2d}: isolated {times[True]:6.3f} s   opt-out {times[False]:6.3f} s",
              flush=True)
    differences = [a - b for a, b in zip(isolated, plain, strict=True)]
    print(f"{label}: median isolated {statistics.median(isolated):.3f} s, opt-out {statistics.median(plain):.3f} s, "
          f"median of the pairwise differences {statistics.median(differences) * 1000:+.0f} ms "
          f"({pairs} pairs, load average {os.getloadavg()[0]:.1f})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="silu", help="NKIBench problem (mini case)")
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--backend", default="simulator")
    parser.add_argument("--null", action="store_true", help="also measure a plain-numpy kernel on the null backend")
    parser.add_argument("--startup", action="store_true", help="also time one child's start-up alone")
    args = parser.parse_args()
    (spec,) = [s for s in load_suite("nkibench").problems if s.slug == args.only]
    started = time.monotonic()
    measure(f"{spec.slug} mini ({args.backend})", spec.baseline_for("mini"), spec.reference_source("mini"),
            args.backend, args.pairs)
    if args.null:
        measure("numpy kernel (null)", NULL_KERNEL, NULL_REFERENCE, "null", args.pairs)
    if args.startup:
        measure_startup(args.pairs)
    print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
