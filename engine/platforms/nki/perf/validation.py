"""Honest error of the performance model: training error, leave-one-out over problems, differential pairs.

The model's [FIT] constants are fitted to the 14 trn1 NKIBench baselines, so its error on those 14 is a
training error. Leave-one-out (LOO) says how it does on a problem it was not fitted to: for each problem,
refit the constants on the other 13 (the calibration's own procedure: coordinate descent over
calibration.FIT_GRID from the shipped constants, the same objective) and predict the one left out. The
differential pairs (pairs.py) are never fitted to; their predicted-over-measured speedups are reported as is.

A fit replays every problem at each trial constant set. Predictions are memoised by constant set, so the 14
folds, which start from the same constants and mostly take the same steps, share most replays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.platforms.nki.hardware import NeuronCoreSpec
from engine.platforms.nki.perf import PreparedTrace, estimate, prepare
from engine.platforms.nki.perf.calibration import (
    DEFAULT_CACHE,
    DEFAULT_CSV,
    FIT_GRID,
    cached_trace,
    discover_cases,
    fit_objective,
    load_measurements,
    spearman,
)


class Predictor:
    """Latencies (ms) of a fixed list of traces under a constant set, memoised by the grid's values."""

    def __init__(self, prepared: list[PreparedTrace], grid: dict[str, tuple[float, ...]]) -> None:
        self.prepared = prepared
        self.grid = grid
        self.memo: dict[tuple[float, ...], np.ndarray] = {}

    def __call__(self, spec: NeuronCoreSpec) -> np.ndarray:
        key = tuple(float(getattr(spec, name)) for name in self.grid)
        if key not in self.memo:
            self.memo[key] = np.array([estimate(p, spec, breakdown=False).latency_ms for p in self.prepared])
        return self.memo[key]


def score(predicted: np.ndarray, measured: np.ndarray) -> tuple[float, float | None]:
    """Median |log(predicted / measured)| and Spearman rank correlation."""
    errors = np.log(predicted / measured)
    return float(np.median(np.abs(errors))), spearman(predicted, measured)


def fit(predict: Predictor, measured: np.ndarray, start: NeuronCoreSpec, subset: np.ndarray, *,
        rounds: int = 2) -> NeuronCoreSpec:
    """The grid's constants fitted on the problems of `subset` (a boolean mask) by coordinate descent."""
    def objective(spec: NeuronCoreSpec) -> float:
        mae, rho = score(predict(spec)[subset], measured[subset])
        return fit_objective(mae, rho)

    best, best_objective = start, objective(start)
    for _ in range(rounds):
        improved = False
        for name, values in predict.grid.items():
            for value in values:
                if math.isclose(value, getattr(best, name), rel_tol=1e-12):
                    continue
                trial = replace(best, **{name: value})
                trial_objective = objective(trial)
                if trial_objective < best_objective - 1e-6:
                    best, best_objective, improved = trial, trial_objective, True
        if not improved:
            break
    return best


@dataclass
class Validation:
    problems: list[str]
    measured: list[float]
    trained: list[float]  # the shipped constants' predictions
    loo: list[float]  # each problem's prediction by constants fitted without it
    loo_constants: list[dict[str, float]] = field(default_factory=list)  # only the constants that moved

    @property
    def training(self) -> tuple[float, float | None]:
        return score(np.array(self.trained), np.array(self.measured))

    @property
    def leave_one_out(self) -> tuple[float, float | None]:
        return score(np.array(self.loo), np.array(self.measured))

    def to_dict(self) -> dict:
        (tm, tr), (lm, lr) = self.training, self.leave_one_out
        return {"problems": self.problems, "measured_ms": self.measured, "trained_ms": self.trained,
                "loo_ms": self.loo, "loo_constants": self.loo_constants, "training_median_abs_log_error": tm,
                "training_spearman": tr, "loo_median_abs_log_error": lm, "loo_spearman": lr}


def leave_one_out(problems: list[str], prepared: list[PreparedTrace], measured: Iterable[float],
                  platform: NeuronCoreSpec, *, grid: dict[str, tuple[float, ...]] = FIT_GRID, rounds: int = 2,
                  log: Callable[[str], None] | None = None) -> Validation:
    measured_arr = np.asarray(list(measured), dtype=float)
    predict = Predictor(prepared, grid)
    trained = predict(platform)
    loo, moved = [], []
    for i, problem in enumerate(problems):
        subset = np.ones(len(problems), dtype=bool)
        subset[i] = False
        fitted = fit(predict, measured_arr, platform, subset, rounds=rounds)
        loo.append(float(predict(fitted)[i]))
        moved.append({k: float(getattr(fitted, k)) for k in grid
                      if not math.isclose(getattr(fitted, k), getattr(platform, k), rel_tol=1e-12)})
        if log is not None:
            log(f"leave-one-out {problem}: {loo[-1]:.3f} ms (measured {measured_arr[i]:.3f}), "
                f"moved {moved[-1] or 'nothing'}, {len(predict.memo)} constant sets replayed so far")
    return Validation(problems, measured_arr.tolist(), trained.tolist(), loo, moved)


def baseline_traces(nkibench_dir: Path, platform: NeuronCoreSpec, *, csv_path: Path = DEFAULT_CSV,
                    cache_dir: Path | None = DEFAULT_CACHE) -> tuple[list[str], list[PreparedTrace], list[float]]:
    """The measured baselines' problems, prepared traces (simulated once, then cached) and latencies."""
    measurements = load_measurements(csv_path)
    problems, prepared, measured = [], [], []
    for case in discover_cases(nkibench_dir):
        row = measurements.get(case.key)
        if not row or not row.get("latency_ms"):
            continue
        try:
            trace, _ = cached_trace(case, platform.name, cache_dir)
        except Exception:  # noqa: BLE001 - calibrate's table already reports a kernel that does not simulate
            continue
        problems.append(case.problem)
        prepared.append(prepare(trace))
        measured.append(float(row["latency_ms"]))
    return problems, prepared, measured


def format_validation(v: Validation) -> str:
    lines = [f"{'problem':24} {'measured ms':>12} {'trained ms':>11} {'log err':>8} {'LOO ms':>9} {'LOO err':>8}"
             "  constants refitted without it"]
    for p, m, t, o, moved in zip(v.problems, v.measured, v.trained, v.loo, v.loo_constants, strict=True):
        lines.append(f"{p:24} {m:>12.3f} {t:>11.3f} {math.log(t / m):>+8.3f} {o:>9.3f} {math.log(o / m):>+8.3f}  "
                     + (", ".join(f"{k}={x:g}" for k, x in moved.items()) or "-"))
    (tm, tr), (lm, lr) = v.training, v.leave_one_out
    lines.append(f"training:      median |log(pred/measured)| = {tm:.3f}   Spearman = {_rho(tr)}")
    lines.append(f"leave-one-out: median |log(pred/measured)| = {lm:.3f}   Spearman = {_rho(lr)}   "
                 f"(each problem predicted by constants fitted on the other {len(v.problems) - 1})")
    return "\n".join(lines)


def _rho(rho: float | None) -> str:
    return f"{rho:.3f}" if rho is not None else "-"
