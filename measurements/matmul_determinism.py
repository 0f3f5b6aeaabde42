"""What the CPU-independent matmul (engine/platforms/nki/simulator/semantics/exact_matmul.py) costs, against numpy's float32 BLAS matmul.

    .venv/bin/python measurements/matmul_determinism.py [--repeats 7] [--full rmsnorm_matmul,add_rmsnorm_matmul]

1. One Tensor Engine tile (stationary 128x128, moving 128x512, random float32): float32 BLAS (the old
   simulator), `matmul_tn`, and a float32 accumulation over the contraction axis in a fixed order (the
   alternative: one numpy call per partition row). Median of `--repeats` x 20 calls each.
2. The simulator on NKIBench problems (every mini case, and the `--full` cases): `simulate()` with the old
   float32 BLAS product patched in, and as it is, alternating in one process so load moves both alike.
   Prints each problem's medians and the ratio, then the median ratio over the problems.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platforms.nki.simulator.semantics import exact_matmul, semantics  # noqa: E402
from engine.platforms.nki.simulator.speed.blas import single_threaded_blas  # noqa: E402


def blas32(stationary: np.ndarray, moving: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The old product: numpy's float32 matmul (bits depend on the BLAS kernel)."""
    return np.matmul(stationary.T, moving, out=out)


def psum_order32(stationary: np.ndarray, moving: np.ndarray) -> np.ndarray:
    """The rejected alternative: float32, added one contraction row at a time."""
    acc = np.zeros((stationary.shape[1], moving.shape[1]), dtype=np.float32)
    for k in range(stationary.shape[0]):
        acc += np.multiply.outer(stationary[k], moving[k])
    return acc


def _median_ms(fn: Callable[[], Any], repeats: int, inner: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - start) / inner * 1e3)
    return statistics.median(times)


def tile(repeats: int) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128), dtype=np.float32)
    b = rng.standard_normal((128, 512), dtype=np.float32)
    with single_threaded_blas():
        base = _median_ms(lambda: blas32(a, b), repeats, 20)
        print(f"tile 128x128x512: float32 BLAS {base:.3f} ms")
        for name, fn in (("matmul_tn", exact_matmul.matmul_tn), ("fixed-order float32", psum_order32)):
            ms = _median_ms(lambda fn=fn: fn(a, b), repeats, 20)
            print(f"tile 128x128x512: {name} {ms:.3f} ms (x{ms / base:.2f})")


def _problem(spec: Any, case: str) -> Callable[[], Any]:
    from engine.platforms.nki.simulator import simulate
    from tests.versions.digests import _module

    reference = _module(spec.reference_source(case), f"timing_reference_{spec.slug}")
    np.random.seed(0)
    random.seed(0)
    inputs = list(reference.get_inputs())
    to_nki = getattr(reference, "transform_to_nki_inputs", None)
    nki_inputs = list(to_nki(inputs)) if to_nki else inputs
    kernel = _module(spec.baseline_for(case), f"timing_baseline_{spec.slug}").kernel
    return lambda: simulate(kernel, [x.copy() if isinstance(x, np.ndarray) else x for x in nki_inputs],
                            platform="trn1")


def problems(repeats: int, full: list[str]) -> None:
    from engine.platforms.nki.simulator.semantics import namespaces
    from engine.platforms.nki.suites import load_suite

    namespaces.install()
    suite = load_suite("nkibench")
    runs = [(spec, "mini") for spec in suite.problems] + [(spec, "full") for spec in suite.problems if spec.slug in full]
    new_impl = semantics.matmul_tn
    ratios = []
    print(f"| problem | case | float32 BLAS ms | matmul_tn ms | ratio |  (median of {repeats})")
    for spec, case in runs:
        run = _problem(spec, case)
        times: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(repeats):
            for label, impl in (("old", blas32), ("new", new_impl)):
                semantics.matmul_tn = impl
                start = time.perf_counter()
                run()
                times[label].append((time.perf_counter() - start) * 1e3)
        semantics.matmul_tn = new_impl
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        ratios.append(new / old)
        print(f"| {spec.slug} | {case} | {old:.1f} | {new:.1f} | {new / old:.3f} |", flush=True)
    print(f"median ratio over {len(ratios)} runs: {statistics.median(ratios):.3f} (max {max(ratios):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--full", default="", help="comma-separated problems to time on their full case too")
    args = parser.parse_args()
    tile(args.repeats)
    problems(args.repeats, [p for p in args.full.split(",") if p])


if __name__ == "__main__":
    main()
