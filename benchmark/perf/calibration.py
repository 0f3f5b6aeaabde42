"""Calibration of the performance model against real trn1 measurements of the NKIBench baselines.

`calibrate(nkibench_dir, ...)` reads a directory laid out like the public AccelOpt repository's NKIBench/
(`summary.json`, `kernels/`, `reference/`), simulates each baseline kernel once (slow: the simulator runs the
full-size problem) and caches its trace, replays it, and compares with the measured CSV row of the same
problem and shape. The management command `calibrate` only parses options and prints this module's result.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import pickle
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from benchmark.hardware import NeuronCoreSpec, get_core_spec
from benchmark.nki.trace import Trace
from benchmark.perf import PERF_MODEL_VERSION, PreparedTrace, estimate, prepare

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "measurements" / "data" / "trn1_nkibench_baselines.csv"
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / "var" / "perf_calibration"
COMPARED_COUNTERS = (
    "hbm_read_bytes", "hbm_write_bytes", "psum_read_bytes", "psum_write_bytes", "sbuf_read_bytes",
    "sbuf_write_bytes", "spill_reload_bytes", "spill_save_bytes", "hardware_flops", "transpose_flops",
    "mm_arithmetic_intensity", "hfu_estimated_percent", "scalar_engine_active_time_percent",
    "vector_engine_active_time_percent", "gpsimd_engine_active_time_percent",
)


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
    import csv

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
    from benchmark import nki as sim  # the simulator; imported late so the model runs without it

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
    return result


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
    return "\n".join(lines)
