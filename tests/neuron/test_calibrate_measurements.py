"""manage.py calibrate --measurements FILE: the performance model's fitted constants refit to a calibration CSV,
and the fit recorded as a model version."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import PERF_MODEL_VERSION, estimate, prepare
from engine.platforms.nki.perf.calibration import (
    FIT_GRID,
    OBJECTIVE_TOLERANCE,
    cached_trace,
    calibration_row,
    discover_cases,
    fitting_tolerance,
    next_version,
    write_calibration_csv,
)
from engine.platforms.nki.simulator.semantics import namespaces
from engine.platforms.nki.suites.loader import load_suite

MINI_PROBLEMS = ("silu", "adamw", "rmsnorm_matmul", "matmul", "mamba", "bmm", "swiglu", "rope_single_freq_apply")
CURRENT = {name: float(getattr(TRN1, name)) for name in FIT_GRID}


@pytest.fixture
def mini_nkibench(tmp_path: Path) -> Path:
    """An AccelOpt-layout NKIBench directory of the built-in suite's mini cases (they simulate in seconds)."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "reference").mkdir()
    suite, summary = load_suite("nkibench"), {}
    for slug in MINI_PROBLEMS:
        spec = suite.problem(slug)
        (tmp_path / "kernels" / f"{slug}.py").write_text(spec.baseline_for("mini"))
        (tmp_path / "reference" / f"{slug}.py").write_text(spec.reference_source("mini"))
        summary[slug] = {"cases": {"0": {"values": spec.case("mini"), "impls": [
            {"task": f"./reference/{slug}.py", "kernel": f"./kernels/{slug}.py"}]}}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    yield tmp_path
    namespaces.uninstall()  # simulating in this process installed the NKI namespaces


def measurements_from_the_model(directory: Path, cache: Path, scale: float, output: Path) -> Path:
    """A calibration CSV whose latencies are the current model's predictions times `scale`."""
    rows = []
    for case in discover_cases(directory):
        report = estimate(prepare(cached_trace(case, "trn1", cache)[0]), TRN1)
        rows.append(calibration_row(case.problem, case.values, report.latency_ms * scale, report.profile))
    return write_calibration_csv(rows, output)


def refit(directory: Path, csv: Path, records: Path, cache: Path) -> tuple[str, dict]:
    out = StringIO()
    call_command("calibrate", "--nkibench", str(directory), "--measurements", str(csv), "--cache", str(cache),
                 "--record-dir", str(records), stdout=out)
    record = json.loads(next(records.glob("*.json")).read_text())
    return out.getvalue(), record


def test_measurements_the_current_model_predicts_refit_to_the_current_constants(mini_nkibench, tmp_path) -> None:
    cache = tmp_path / "cache"
    csv = measurements_from_the_model(mini_nkibench, cache, 1.0, tmp_path / "model.csv")
    text, record = refit(mini_nkibench, csv, tmp_path / "records", cache)
    assert f"the refit reproduces {PERF_MODEL_VERSION}'s constants" in text
    assert record["reproduces"] and record["version"] == PERF_MODEL_VERSION and record["changed"] == {}
    assert record["constants"] == CURRENT and record["objective"] == pytest.approx(0.0, abs=1e-9)
    assert next((tmp_path / "records").glob("*.json")).name.startswith(f"{PERF_MODEL_VERSION}-trn1-")


def test_slower_measurements_refit_to_new_constants_recorded_as_the_next_version(mini_nkibench, tmp_path) -> None:
    cache = tmp_path / "cache"
    csv = measurements_from_the_model(mini_nkibench, cache, 1.3, tmp_path / "slower.csv")
    text, record = refit(mini_nkibench, csv, tmp_path / "records", cache)
    assert not record["reproduces"] and record["version"] == next_version(PERF_MODEL_VERSION) != PERF_MODEL_VERSION
    assert record["changed"] and record["start_objective"] - record["objective"] > OBJECTIVE_TOLERANCE
    assert f"new model version {record['version']}" in text
    assert record["measurements_sha256"] and len(record["cases"]) == len(MINI_PROBLEMS)


def test_fitting_tolerances_and_versions() -> None:
    assert fitting_tolerance(0.85, FIT_GRID["dma_efficiency"]) == pytest.approx(0.075)
    assert fitting_tolerance(0.9, FIT_GRID["sbuf_usable_fraction"]) == pytest.approx(0.05)
    assert next_version("perf-2") == "perf-3" and next_version("perf") == "perf-refit"
