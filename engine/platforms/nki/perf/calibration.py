"""Calibration of the performance model against real trn1 measurements of the NKIBench baselines.

`calibrate(nkibench_dir, ...)` reads a directory laid out like the public AccelOpt repository's NKIBench/
(`summary.json`, `kernels/`, `reference/`), simulates each baseline kernel once (slow: the simulator runs the
full-size problem) and caches its trace, replays it, and compares with the measured CSV row of the same
problem and shape. `refit_from_measurements(nkibench_dir, csv)` refits the model's [FIT] constants to a
calibration CSV (the shipped one, or one `manage.py hardware_check` wrote on a Trainium host) on the same
cached traces. The management command `calibrate` only parses options and prints this module's results.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import math
import pickle
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.platforms.nki.hardware import NeuronCoreSpec, get_core_spec
from engine.platforms.nki.perf import PERF_MODEL_VERSION, PreparedTrace, estimate, prepare
from engine.platforms.nki.simulator.trace import Trace

DEFAULT_CSV = Path(__file__).resolve().parents[4] / "measurements" / "data" / "trn1_nkibench_baselines.csv"
DEFAULT_CACHE = Path(__file__).resolve().parents[4] / "var" / "perf_calibration"
COMPARED_COUNTERS = (
    "hbm_read_bytes", "hbm_write_bytes", "psum_read_bytes", "psum_write_bytes", "sbuf_read_bytes",
    "sbuf_write_bytes", "spill_reload_bytes", "spill_save_bytes", "hardware_flops", "transpose_flops",
    "mm_arithmetic_intensity", "hfu_estimated_percent", "scalar_engine_active_time_percent",
    "vector_engine_active_time_percent", "gpsimd_engine_active_time_percent",
)
ENGINE_SHARE_COUNTERS = COMPARED_COUNTERS[-3:]


@dataclass(frozen=True)
class Case:
    problem: str
    values: dict[str, int]
    kernel_path: Path
    reference_path: Path

    @property
    def key(self) -> str:
        return self.problem + "_" + "_".join(f"{k}{v}" for k, v in sorted(self.values.items()))


@dataclass
class CaseResult:
    problem: str
    key: str
    measured_ms: float | None
    predicted_ms: float | None
    log_error: float | None
    counter_ratios: dict[str, float | None] = field(default_factory=dict)
    # issue 19's counter goals: both HBM byte counts within 10%, each engine's active share within 10 points
    hbm_within_10pct: bool | None = None
    engine_share_points: dict[str, float] = field(default_factory=dict)  # predicted - measured, in points
    simulate_s: float | None = None  # wall time of the simulation (None when the trace came from the cache)
    replay_s: float | None = None
    instructions: int = 0
    error: str = ""


@dataclass
class CalibrationReport:
    platform: str
    version: str
    cases: list[CaseResult]
    median_abs_log_error: float | None
    spearman: float | None

    def to_dict(self) -> dict:
        return asdict(self)


# --- inputs -------------------------------------------------------------------------------------------------

def discover_cases(nkibench_dir: Path) -> list[Case]:
    """Every (problem, case, impl) of summary.json, with paths resolved against the directory."""
    summary_path = nkibench_dir / "summary.json"
    if not summary_path.exists():
        raise FileNotFoundError(f"calibrate: {summary_path} not found; expected an NKIBench-style directory")
    summary = json.loads(summary_path.read_text())
    cases = []
    for problem, entry in summary.items():
        for case in entry.get("cases", {}).values():
            for impl in case.get("impls", []):
                cases.append(Case(problem, {k: int(v) for k, v in case["values"].items()},
                                  (nkibench_dir / impl["kernel"]).resolve(),
                                  (nkibench_dir / impl["task"]).resolve()))
    return cases


def load_measurements(csv_path: Path) -> dict[str, dict[str, float | None]]:
    """Rows of the calibration CSV keyed like Case.key (problem + sorted shape values)."""
    rows: dict[str, dict[str, float | None]] = {}
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            values = json.loads(row["shape"])
            key = row["problem"] + "_" + "_".join(f"{k}{v}" for k, v in sorted(values.items()))
            rows[key] = {k: (float(v) if v not in ("", None) else None)
                         for k, v in row.items() if k not in ("problem", "shape")}
    return rows


# --- statistics ---------------------------------------------------------------------------------------------

def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values))
    for v in np.unique(values):  # ties share their mean rank
        tie = values == v
        ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(a: Iterable[float], b: Iterable[float]) -> float | None:
    x, y = np.asarray(list(a), dtype=float), np.asarray(list(b), dtype=float)
    if len(x) < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def summarize(cases: list[CaseResult]) -> tuple[float | None, float | None]:
    ok = [c for c in cases if c.log_error is not None]
    if not ok:
        return None, None
    mae = float(np.median([abs(c.log_error) for c in ok]))
    return mae, spearman([c.predicted_ms for c in ok], [c.measured_ms for c in ok])


# --- traces -------------------------------------------------------------------------------------------------

def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"calibrate: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def simulate_case(case: Case, platform: str) -> Trace:
    """Run the baseline kernel on the CPU simulator with the reference's inputs; return its trace."""
    # lazy: the simulator, late so the model runs without it
    from engine.platforms.nki import (
        simulator as sim,  # the simulator; imported late so the model runs without it
    )

    sim.install()  # the NKIBench kernels import neuronxcc.nki
    reference = _load_module(case.reference_path, f"nkibench_ref_{case.problem}")
    np.random.seed(0)
    inputs = reference.transform_to_nki_inputs(reference.get_inputs())
    module = _load_module(case.kernel_path, f"nkibench_kernel_{case.problem}")
    kernel = getattr(module, "kernel", None) or getattr(module, "optimized_kernel", None)
    if kernel is None:
        raise AttributeError(f"{case.kernel_path} defines neither `kernel` nor `optimized_kernel`")
    return sim.simulate(kernel, list(inputs), platform=platform).trace


def cached_trace(case: Case, platform: str, cache_dir: Path | None,
                 simulate: Callable[[Case, str], Trace] = simulate_case) -> tuple[Trace, float | None]:
    """The case's trace from the cache, or simulated (and cached); also the simulation wall time."""
    digest = hashlib.sha256(case.kernel_path.read_bytes() + case.reference_path.read_bytes()
                            + platform.encode()).hexdigest()[:16]
    path = cache_dir / f"{case.key}_{digest}.pkl" if cache_dir else None
    if path is not None and path.exists():
        with path.open("rb") as f:
            return pickle.load(f), None
    t0 = time.perf_counter()
    trace = simulate(case, platform).freeze()
    elapsed = time.perf_counter() - t0
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as f:
            pickle.dump(trace, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
        (path.with_suffix(".json")).write_text(json.dumps({"simulate_s": elapsed}))
    return trace, elapsed


def recorded_simulate_seconds(case: Case, cache_dir: Path | None) -> float | None:
    """Simulation wall time recorded when the cached trace was made (for the replay/simulate ratio)."""
    if cache_dir is None:
        return None
    for meta in cache_dir.glob(f"{case.key}_*.json"):
        return float(json.loads(meta.read_text())["simulate_s"])
    return None


# --- the comparison -----------------------------------------------------------------------------------------

def compare_case(case: Case, prepared: PreparedTrace, platform: NeuronCoreSpec,
                 measured: dict[str, float | None] | None) -> CaseResult:
    t0 = time.perf_counter()
    report = estimate(prepared, platform)
    replay_s = time.perf_counter() - t0
    result = CaseResult(case.problem, case.key, None, report.latency_ms, None, replay_s=replay_s,
                        instructions=len(prepared.trace))
    if measured is None:
        result.error = "no measurement for this case in the calibration CSV"
        return result
    result.measured_ms = measured["latency_ms"]
    if result.measured_ms and report.latency_ms > 0:
        result.log_error = math.log(report.latency_ms / result.measured_ms)
    for name in COMPARED_COUNTERS:
        m = measured.get(name)
        pred = report.profile.get(name)
        result.counter_ratios[name] = (pred / m) if (m and pred is not None) else None
    hbm = [result.counter_ratios.get(name) for name in ("hbm_read_bytes", "hbm_write_bytes")]
    if all(r is not None for r in hbm):
        result.hbm_within_10pct = all(abs(r - 1.0) <= 0.10 for r in hbm)
    for name in ENGINE_SHARE_COUNTERS:  # fractions of the latency in both the CSV and the profile
        m, pred = measured.get(name), report.profile.get(name)
        if m is not None and pred is not None:
            result.engine_share_points[name.split("_")[0]] = 100.0 * (pred - m)
    return result


def counter_goals(cases: Sequence[CaseResult]) -> tuple[int, int, int]:
    """(problems with both HBM byte counts within 10%, with every engine's active share within 10 points,
    problems compared): the counter-fidelity goals of issue 19."""
    compared = [c for c in cases if c.hbm_within_10pct is not None]
    hbm = sum(bool(c.hbm_within_10pct) for c in compared)
    shares = sum(bool(c.engine_share_points) and all(abs(v) <= 10.0 for v in c.engine_share_points.values())
                 for c in compared)
    return hbm, shares, len(compared)


def calibrate(
    nkibench_dir: Path,
    *,
    platform: str | NeuronCoreSpec = "trn1",
    csv_path: Path = DEFAULT_CSV,
    only: Iterable[str] = (),
    cache_dir: Path | None = DEFAULT_CACHE,
    simulate: Callable[[Case, str], Trace] = simulate_case,
) -> CalibrationReport:
    p = platform if isinstance(platform, NeuronCoreSpec) else get_core_spec(platform)
    measurements = load_measurements(csv_path)
    wanted = set(only)
    cases = [c for c in discover_cases(nkibench_dir) if not wanted or c.problem in wanted]
    if wanted and not cases:
        raise ValueError(f"calibrate: no problem named {sorted(wanted)} in {nkibench_dir}/summary.json")
    results = []
    for case in cases:
        try:
            trace, sim_s = cached_trace(case, p.name, cache_dir, simulate)
        except Exception as exc:  # a failing kernel is a row of the report, not the end of it
            results.append(CaseResult(case.problem, case.key, None, None, None,
                                      error=f"simulation failed: {type(exc).__name__}: {exc}"))
            continue
        t0 = time.perf_counter()
        prepared = prepare(trace)
        prep_s = time.perf_counter() - t0
        result = compare_case(case, prepared, p, measurements.get(case.key))
        result.replay_s = (result.replay_s or 0.0) + prep_s
        result.simulate_s = sim_s if sim_s is not None else recorded_simulate_seconds(case, cache_dir)
        results.append(result)
    mae, rho = summarize(results)
    return CalibrationReport(p.name, PERF_MODEL_VERSION, results, mae, rho)


def format_report(report: CalibrationReport) -> str:
    """The human-readable table the management command prints."""
    lines = [f"platform {report.platform}, model {report.version}",
             f"{'problem':24} {'measured ms':>12} {'predicted ms':>13} {'log err':>8} {'replay/sim':>10}  counters pred/measured"]
    for c in report.cases:
        if c.error and c.predicted_ms is None:
            lines.append(f"{c.problem:24} {c.error}")
            continue
        ratio = f"{c.replay_s / c.simulate_s:.1%}" if c.simulate_s and c.replay_s is not None else "-"
        counters = " ".join(f"{k.replace('_bytes', '').replace('_engine_active_time_percent', '_act')}="
                            f"{v:.2f}" for k, v in c.counter_ratios.items() if v is not None)
        measured = f"{c.measured_ms:.3f}" if c.measured_ms else "-"
        err = f"{c.log_error:+.3f}" if c.log_error is not None else "-"
        lines.append(f"{c.problem:24} {measured:>12} {c.predicted_ms:>13.3f} {err:>8} {ratio:>10}  {counters}")
    mae = f"{report.median_abs_log_error:.3f}" if report.median_abs_log_error is not None else "-"
    rho = f"{report.spearman:.3f}" if report.spearman is not None else "-"
    lines.append(f"median |log(pred/measured)| = {mae}   Spearman = {rho}   over "
                 f"{sum(c.log_error is not None for c in report.cases)} problems")
    hbm, shares, compared = counter_goals(report.cases)
    lines.append(f"HBM read and write bytes within 10% of neuron-profile: {hbm} of {compared}; "
                 f"every engine's active share within 10 points: {shares} of {compared}")
    return "\n".join(lines)


# --- refitting the [FIT] constants from a measurements file -------------------------------------------------
# `manage.py calibrate --measurements FILE`: the fit measurements/fit_perf_model.py did by hand, as a library
# step, so a team with Trainium hardware can refit the model from its own `manage.py hardware_check` CSV.
# A coordinate descent over a small grid per constant (the grid the perf-2 fit searched), from the current
# constants, minimising the median |log(predicted / measured)| with a penalty when the Spearman rank
# correlation falls under 0.9. Fourteen points: a calibration, not a measurement of the hardware.

CALIBRATION_COLUMNS = ("problem", "shape", "latency_ms", *COMPARED_COUNTERS)  # the CSV's header, in order

FIT_GRID: dict[str, tuple[float, ...]] = {
    "reciprocal_cycles_per_elem": (3.0, 3.5, 4.0),
    "tensor_efficiency": (0.65, 0.7, 0.75, 0.8, 1.0),
    "engine_dispatch_cycles": (0.0, 32.0, 64.0),
    # perf-3: a fraction of the DMA engines' documented rate, between the two pages' figures (hardware.py).
    "dma_efficiency": (1.0, 1.15, 1.3, 1.5, 1.7),
    "sbuf_usable_fraction": (0.8, 0.9, 1.0),
}
# Tried for perf-3 and left out (docs/history/performance-model.md): a reorder window (0, 2, 4) fits the 14
# baselines better (LOO 0.103) but predicts no gain for the tiling rewrites of streaming kernels that trn1 measured.
SPEARMAN_FLOOR = 0.9
# How much better a refit must score to be a different fit. The timing rule lets a measurement spread 1%
# (docs/evaluation.md, section 4), so each log error is known to about 0.01: constants whose objectives are
# closer than that cannot be told apart by the measurements, and the current ones are kept.
OBJECTIVE_TOLERANCE = 0.01


def fitting_tolerance(value: float, grid: Iterable[float]) -> float:
    """How far a refit value may lie from `value` and still be the same fit: half the gap to the nearest
    other grid point (the grid cannot tell values closer than that apart)."""
    others = [abs(g - value) for g in grid if not math.isclose(g, value, rel_tol=1e-9, abs_tol=1e-15)]
    return min(others) / 2 if others else abs(value) * 0.5


def fit_objective(median_abs_log_error: float, rho: float | None) -> float:
    return median_abs_log_error + (0.5 * (SPEARMAN_FLOOR - rho) if rho is not None and rho < SPEARMAN_FLOOR else 0.0)


@dataclass
class FitResult:
    platform: str
    start_version: str
    version: str  # the model version these constants are: the start's when they reproduce it, else the next
    constants: dict[str, float]
    start: dict[str, float]
    tolerance: dict[str, float]
    median_abs_log_error: float
    spearman: float | None
    start_median_abs_log_error: float
    start_spearman: float | None
    cases: list[dict[str, float | str]]
    measurements: str  # the file, and its sha256
    measurements_sha256: str

    @property
    def objective(self) -> float:
        return fit_objective(self.median_abs_log_error, self.spearman)

    @property
    def start_objective(self) -> float:
        return fit_objective(self.start_median_abs_log_error, self.start_spearman)

    @property
    def changed(self) -> dict[str, tuple[float, float]]:
        """Constants the refit moved to another grid point (whether that matters: `reproduces`)."""
        return {name: (self.start[name], value) for name, value in self.constants.items()
                if abs(value - self.start[name]) > self.tolerance[name]}

    @property
    def reproduces(self) -> bool:
        """The measurements cannot tell the current constants from the refit's: they score within
        OBJECTIVE_TOLERANCE of them (or the refit moved nothing)."""
        return not self.changed or self.start_objective - self.objective <= OBJECTIVE_TOLERANCE

    def to_dict(self) -> dict:
        data = asdict(self)
        data["reproduces"] = self.reproduces
        data["changed"] = {k: list(v) for k, v in self.changed.items()}
        data["objective"], data["start_objective"] = self.objective, self.start_objective
        data["objective_tolerance"] = OBJECTIVE_TOLERANCE
        return data


def _scores(platform: NeuronCoreSpec, prepared: list[PreparedTrace],
            measured: list[float]) -> tuple[float, float | None, list[float]]:
    predicted = [estimate(p, platform, breakdown=False).latency_ms for p in prepared]
    errors = [math.log(p / m) for p, m in zip(predicted, measured, strict=True)]
    return float(np.median(np.abs(errors))), spearman(predicted, measured), predicted


def next_version(version: str) -> str:
    """perf-2 -> perf-3 (a version without a trailing number gets "-refit")."""
    match = re.fullmatch(r"(.*?)(\d+)", version)
    return f"{match.group(1)}{int(match.group(2)) + 1}" if match else f"{version}-refit"


def refit(prepared: list[PreparedTrace], measured: list[float], start: NeuronCoreSpec, *,
          grid: dict[str, tuple[float, ...]] = FIT_GRID, rounds: int = 3) -> tuple[NeuronCoreSpec, int]:
    """The constants of `grid` fitted to `measured` latencies (ms) by coordinate descent from `start`; also
    the number of rounds run. A value is taken only when it lowers the objective."""
    best = start
    mae, rho, _ = _scores(best, prepared, measured)
    best_objective = fit_objective(mae, rho)
    done = 0
    for _ in range(rounds):
        done += 1
        improved = False
        for name, values in grid.items():
            for value in values:
                if math.isclose(value, getattr(best, name), rel_tol=1e-12, abs_tol=0.0):
                    continue  # the current value: its objective is known
                trial = replace(best, **{name: value})
                mae, rho, _ = _scores(trial, prepared, measured)
                objective = fit_objective(mae, rho)
                if objective < best_objective - 1e-6:
                    best, best_objective, improved = trial, objective, True
        if not improved:
            break
    return best, done


def refit_from_measurements(
    nkibench_dir: Path,
    measurements_csv: Path,
    *,
    platform: str | NeuronCoreSpec = "trn1",
    cache_dir: Path | None = DEFAULT_CACHE,
    rounds: int = 3,
    simulate: Callable[[Case, str], Trace] = simulate_case,
) -> FitResult:
    """Refit the [FIT] constants to the latencies of a calibration CSV (hardware_check's, or the shipped one),
    on the traces of the same kernels (simulated once, then cached like `calibrate`'s)."""
    start = platform if isinstance(platform, NeuronCoreSpec) else get_core_spec(platform)
    measurements = load_measurements(measurements_csv)
    cases, prepared, measured = [], [], []
    for case in discover_cases(nkibench_dir):
        row = measurements.get(case.key)
        if row is None or not row.get("latency_ms"):
            continue
        trace, _ = cached_trace(case, start.name, cache_dir, simulate)
        cases.append(case)
        prepared.append(prepare(trace))
        measured.append(float(row["latency_ms"]))
    if len(cases) < 3:
        raise ValueError(f"calibrate: {measurements_csv} measures {len(cases)} of the kernels in {nkibench_dir}; "
                         "a refit needs at least 3 (hardware_check and calibrate must use the same --nkibench)")
    start_mae, start_rho, _ = _scores(start, prepared, measured)
    fitted, _ = refit(prepared, measured, start, rounds=rounds)
    mae, rho, predicted = _scores(fitted, prepared, measured)
    constants = {name: float(getattr(fitted, name)) for name in FIT_GRID}
    initial = {name: float(getattr(start, name)) for name in FIT_GRID}
    tolerance = {name: fitting_tolerance(initial[name], FIT_GRID[name]) for name in FIT_GRID}
    result = FitResult(
        platform=start.name, start_version=PERF_MODEL_VERSION, version=PERF_MODEL_VERSION, constants=constants,
        start=initial, tolerance=tolerance, median_abs_log_error=mae, spearman=rho,
        start_median_abs_log_error=start_mae, start_spearman=start_rho,
        cases=[{"problem": c.problem, "key": c.key, "measured_ms": m, "predicted_ms": p, "log_error": math.log(p / m)}
               for c, m, p in zip(cases, measured, predicted, strict=True)],
        measurements=str(measurements_csv),
        measurements_sha256=hashlib.sha256(Path(measurements_csv).read_bytes()).hexdigest(),
    )
    if not result.reproduces:
        result.version = next_version(PERF_MODEL_VERSION)
    return result


def record_fit(result: FitResult, directory: Path) -> Path:
    """Write the fit as `<directory>/<version>-<platform>-<measurements sha8>.json`: the model version it is,
    the constants, what changed and the scores. Applying it is a reviewed commit: the constants into
    engine/platforms/nki/hardware.py, the version into PERF_MODEL_VERSION (docs/operations.md)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{result.version}-{result.platform}-{result.measurements_sha256[:8]}.json"
    path.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return path


def format_fit(result: FitResult) -> str:
    lines = [f"platform {result.platform}, refit of {result.start_version} from {result.measurements}",
             f"{'constant':30} {'current':>12} {'refit':>12} {'tolerance':>10}"]
    for name, value in result.constants.items():
        mark = "" if name not in result.changed else "  changed"
        lines.append(f"{name:30} {result.start[name]:>12.4g} {value:>12.4g} {result.tolerance[name]:>10.3g}{mark}")
    rho = f"{result.spearman:.3f}" if result.spearman is not None else "-"
    start_rho = f"{result.start_spearman:.3f}" if result.start_spearman is not None else "-"
    lines.append(f"median |log(pred/measured)| {result.start_median_abs_log_error:.3f} -> "
                 f"{result.median_abs_log_error:.3f}, Spearman {start_rho} -> {rho}, over {len(result.cases)} problems; "
                 f"objective {result.start_objective:.4f} -> {result.objective:.4f} (tolerance {OBJECTIVE_TOLERANCE})")
    if result.reproduces:
        lines.append(f"the refit reproduces {result.start_version}'s constants within their fitting tolerance (the "
                     "measurements cannot tell them apart): no new model version")
    else:
        lines.append(f"new model version {result.version}: copy the changed constants into engine/platforms/nki/hardware.py "
                     f"and set PERF_MODEL_VERSION = {result.version!r} (engine/platforms/nki/perf/__init__.py)")
    return "\n".join(lines)


def calibration_row(problem: str, shape: dict[str, int], latency_ms: float, profile: dict[str, object]) -> dict[str, str]:
    """One row of a calibration CSV (the columns of measurements/data/trn1_nkibench_baselines.csv); a counter
    the profile lacks is left blank, as the shipped CSV leaves it."""
    row = {"problem": problem, "shape": json.dumps(dict(sorted(shape.items()))), "latency_ms": _csv_number(latency_ms)}
    for name in COMPARED_COUNTERS:
        value = profile.get(name)
        row[name] = _csv_number(value) if isinstance(value, int | float) and not isinstance(value, bool) else ""
    return row


def _csv_number(value: float) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


def write_calibration_csv(rows: Iterable[dict[str, str]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(CALIBRATION_COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return path
