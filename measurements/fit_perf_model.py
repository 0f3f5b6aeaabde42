"""Fit the performance model's free constants to the measured trn1 NKIBench baselines.

Inputs: the cached simulator traces of the 14 baselines (made by `python manage.py calibrate --nkibench DIR`,
kept under var/perf_calibration/) and measurements/data/trn1_nkibench_baselines.csv. Output: the best values of
the [FIT] constants of engine/platforms/nki/hardware.py, and the calibration table they give. Copy the values into
hardware.py by hand (and bump PERF_MODEL_VERSION): the table stays the one place constants live.

    .venv/bin/python measurements/fit_perf_model.py --nkibench /work/ext/AccelOpt/NKIBench [--rounds 3]

The search is a coordinate descent over a small grid per constant, minimising the median |log error| with a
penalty when the Spearman rank correlation falls under 0.9. Fourteen points and six constants: treat the
result as a calibration, not as a measurement of the hardware.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platforms.nki.hardware import TRN1, NeuronCoreSpec  # noqa: E402
from engine.platforms.nki.perf import estimate, prepare  # noqa: E402
from engine.platforms.nki.perf.calibration import (  # noqa: E402
    DEFAULT_CACHE,
    DEFAULT_CSV,
    cached_trace,
    discover_cases,
    load_measurements,
    spearman,
)

GRID: dict[str, list[float]] = {
    "reciprocal_cycles_per_elem": [3.0, 3.5, 4.0],
    "tensor_efficiency": [0.65, 0.7, 0.75, 0.8, 1.0],
    "engine_dispatch_cycles": [0, 32, 64],
    "dma_efficiency": [0.7, 0.85, 1.0],
    "dma_fixed_s": [1e-6, 2e-6, 4e-6],
    "sbuf_usable_fraction": [0.8, 0.9, 1.0],
}
# Also tried (by hand) and left at 0, then removed from the model in perf-12 (docs/history/performance-model.md):
# a fixed cost per matmul, a cross-engine sync latency, an issue window.


def _missing(case, platform):
    raise RuntimeError(f"no cached trace for {case.key}: run manage.py calibrate --only {case.problem} first")


def evaluate(platform: NeuronCoreSpec, prepared, measured) -> tuple[float, float | None, list[float]]:
    errors, preds = [], []
    for p, m in zip(prepared, measured, strict=True):
        ms = estimate(p, platform).latency_ms
        preds.append(ms)
        errors.append(math.log(ms / m))
    return float(np.median(np.abs(errors))), spearman(preds, measured), errors


def objective(mae: float, rho: float | None) -> float:
    return mae + (0.5 * (0.9 - rho) if rho is not None and rho < 0.9 else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nkibench", type=Path, required=True)
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only-params", nargs="*", default=list(GRID), help="constants to fit")
    parser.add_argument("--start", default="{}", help='JSON of constants to start from, e.g. \'{"dma_efficiency": 0.7}\'')
    args = parser.parse_args()

    measurements = load_measurements(args.csv)
    cases, prepared, measured = [], [], []
    for case in discover_cases(args.nkibench):
        if case.key not in measurements:
            continue
        try:
            trace, _ = cached_trace(case, "trn1", args.cache, _missing)
        except RuntimeError as exc:
            print(f"skip {case.problem}: {exc}")
            continue
        cases.append(case)
        prepared.append(prepare(trace))
        measured.append(measurements[case.key]["latency_ms"])
    if not cases:
        raise SystemExit("no cached traces: run manage.py calibrate first")

    best = dataclasses.replace(TRN1, **json.loads(args.start))
    mae, rho, _ = evaluate(best, prepared, measured)
    best_obj = objective(mae, rho)
    print(f"start: median|log err|={mae:.3f} spearman={rho}")
    t0 = time.perf_counter()
    for round_no in range(args.rounds):
        improved = False
        for name in args.only_params:
            for value in GRID[name]:
                trial = dataclasses.replace(best, **{name: value})
                mae, rho, _ = evaluate(trial, prepared, measured)
                obj = objective(mae, rho)
                if obj < best_obj - 1e-6:
                    best, best_obj, improved = trial, obj, True
            print(f"round {round_no} {name}={getattr(best, name)} objective={best_obj:.4f}")
        if not improved:
            break
    mae, rho, errors = evaluate(best, prepared, measured)
    print(f"fitted in {time.perf_counter() - t0:.0f}s: median|log err|={mae:.3f} spearman={rho:.3f}")
    for name in GRID:
        print(f"    {name}={getattr(best, name)!r},")
    for case, err, m in zip(cases, errors, measured, strict=True):
        print(f"  {case.problem:24} measured {m:9.3f} ms  predicted {m * math.exp(err):9.3f} ms  log err {err:+.3f}")


if __name__ == "__main__":
    main()
