"""The calibration harness: cases from summary.json, measured rows by problem+shape, statistics, trace cache."""

from __future__ import annotations

import json
import math

import pytest

from engine.platforms.nki.perf.calibration import calibrate, format_report, spearman
from tests.perf.builders import streaming_kernel


def _nkibench(tmp_path, problems):
    summary = {}
    for name, tiles in problems.items():
        (tmp_path / "kernels").mkdir(parents=True, exist_ok=True)
        (tmp_path / "reference").mkdir(exist_ok=True)
        (tmp_path / "kernels" / f"{name}.py").write_text(f"# {name} {tiles}\n")
        (tmp_path / "reference" / f"{name}.py").write_text("# reference\n")
        summary[name] = {"cases": {"0": {"values": {"T": tiles},
                                         "impls": [{"task": f"./reference/{name}.py", "kernel": f"./kernels/{name}.py"}]}}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    return tmp_path


def _csv(tmp_path, rows):
    path = tmp_path / "measured.csv"
    lines = ["problem,shape,latency_ms,hbm_read_bytes"]
    for name, tiles, ms in rows:
        shape = json.dumps({"T": tiles}).replace('"', '""')
        lines.append(f'{name},"{shape}",{ms},{tiles * 128 * 8192}')
    path.write_text("\n".join(lines) + "\n")
    return path


def _fake_simulate(calls):
    def simulate(case, platform):
        calls.append(case.problem)
        return streaming_kernel(case.values["T"], 2048)
    return simulate


def test_it_compares_each_problem_with_its_measured_row_and_ranks_them(tmp_path):
    root = _nkibench(tmp_path / "bench", {"small": 8, "big": 64})
    csv = _csv(tmp_path, [("small", 8, 0.05), ("big", 64, 0.4)])
    report = calibrate(root, csv_path=csv, cache_dir=tmp_path / "cache", simulate=_fake_simulate([]))
    by_name = {c.problem: c for c in report.cases}
    assert by_name["big"].predicted_ms > by_name["small"].predicted_ms
    assert by_name["small"].log_error == pytest.approx(math.log(by_name["small"].predicted_ms / 0.05))
    assert by_name["small"].counter_ratios["hbm_read_bytes"] == pytest.approx(1.0)
    assert report.spearman == pytest.approx(1.0)
    assert "median |log(pred/measured)|" in format_report(report)


def test_a_second_run_reuses_the_cached_traces(tmp_path):
    root = _nkibench(tmp_path / "bench", {"small": 8})
    csv = _csv(tmp_path, [("small", 8, 0.05)])
    calls: list[str] = []
    calibrate(root, csv_path=csv, cache_dir=tmp_path / "cache", simulate=_fake_simulate(calls))
    again = calibrate(root, csv_path=csv, cache_dir=tmp_path / "cache", simulate=_fake_simulate(calls))
    assert calls == ["small"]
    assert again.cases[0].simulate_s is not None  # the recorded simulation time is kept with the cache


def test_only_restricts_to_one_problem_and_names_an_unknown_one(tmp_path):
    root = _nkibench(tmp_path / "bench", {"small": 8, "big": 64})
    csv = _csv(tmp_path, [("small", 8, 0.05), ("big", 64, 0.4)])
    report = calibrate(root, csv_path=csv, only=["big"], cache_dir=None, simulate=_fake_simulate([]))
    assert [c.problem for c in report.cases] == ["big"]
    with pytest.raises(ValueError, match="nosuch"):
        calibrate(root, csv_path=csv, only=["nosuch"], cache_dir=None, simulate=_fake_simulate([]))


def test_a_kernel_that_fails_to_simulate_is_reported_not_fatal(tmp_path):
    root = _nkibench(tmp_path / "bench", {"small": 8})
    csv = _csv(tmp_path, [("small", 8, 0.05)])

    def broken(case, platform):
        raise RuntimeError("partition dim 129 > 128")

    report = calibrate(root, csv_path=csv, cache_dir=None, simulate=broken)
    assert "partition dim 129" in report.cases[0].error
    assert report.median_abs_log_error is None


def test_spearman_is_one_for_the_same_order_and_minus_one_reversed():
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)


def test_the_counter_goals_count_problems_whose_hbm_bytes_and_engine_shares_agree():
    from engine.platforms.nki.perf.calibration import CaseResult, counter_goals

    def case(read: float, write: float, **points: float) -> CaseResult:
        return CaseResult("p", "k", 1.0, 1.0, 0.0, {"hbm_read_bytes": read, "hbm_write_bytes": write},
                          hbm_within_10pct=abs(read - 1) <= 0.1 and abs(write - 1) <= 0.1,
                          engine_share_points=dict(points))

    cases = [case(1.05, 0.95, scalar=3.0, vector=-9.5),   # both goals met
             case(1.05, 1.2, scalar=0.0, vector=0.0),     # HBM write 20% over
             case(1.0, 1.0, scalar=12.0, vector=0.0)]     # Scalar 12 points too busy
    assert counter_goals(cases) == (2, 2, 3)
