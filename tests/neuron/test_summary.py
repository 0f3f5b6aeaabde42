"""neuron-profile's summary-json, parsed; and the recorded fixture the doubles answer with, from the real CSV."""

from __future__ import annotations

import csv
import json

import pytest

from engine.platforms.nki.neuron.summary import (
    MEASURED_KEY,
    MEASURED_VALUE,
    SummaryError,
    parse_summary,
    profiled_time_ms,
    summary_command,
)
from engine.platforms.nki.perf.calibration import COMPARED_COUNTERS
from engine.platforms.nki.perf.profile import COUNTER_NAMES
from engine.platforms.nki.suites.loader import load_suite
from tests.neuron import recorded


def test_the_committed_fixture_is_built_from_the_real_trn1_measurements() -> None:
    committed, built = recorded.load(), recorded.build(full_shapes=False)
    full = {key: case.pop("full_input_shapes") for key, case in committed["cases"].items()}
    assert committed == {**built, "cases": {k: {n: v for n, v in c.items() if n != "full_input_shapes"}
                                            for k, c in built["cases"].items()}}
    # The full cases' shapes take seconds to render: three of them are checked here.
    for key in ("mamba_C256_M7168_S16", "bmm_B16_K64_M4096_N4096", "rmsnorm_matmul_K1024_M4096_N2048"):
        spec = load_suite("nkibench").problem(committed["cases"][key]["problem"])
        assert full[key] == recorded.input_shapes(spec.reference_source("full"))
    with recorded.CSV_PATH.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    cases = recorded.load()["cases"]
    assert len(cases) == len(rows) == 14
    for row in rows:
        summary = cases[recorded.case_key(row["problem"], json.loads(row["shape"]))]["summary"]
        assert summary["total_time"] == float(row["latency_ms"]) / 1e3  # seconds, as neuron-profile reports it
        for name in COMPARED_COUNTERS:
            assert (summary.get(name) is None) == (row[name] == "")
            if row[name]:
                assert float(summary[name]) == float(row[name])


def test_every_counter_of_a_recorded_summary_is_read_under_the_simulators_name() -> None:
    entry = recorded.load()["cases"]["matmul_K5120_M4096_N12288"]["summary"]
    profile = parse_summary({"kernel": entry})
    assert profile.pop(MEASURED_KEY) == MEASURED_VALUE
    assert set(profile) == set(COMPARED_COUNTERS) and set(profile) <= set(COUNTER_NAMES)
    assert profile["hbm_read_bytes"] == 9059762176.0
    assert profile["hfu_estimated_percent"] == pytest.approx(0.3599390440716965)
    assert profiled_time_ms({"kernel": entry}) == pytest.approx(35.199742)


def test_only_the_first_entry_is_read_and_what_is_not_a_number_is_left_out() -> None:
    document = {"first": {"hbm_read_bytes": 10, "hbm_write_bytes": "12", "spill_save_bytes": float("nan"),
                          "hfu_estimated_percent": True, "total_time": 0.5, "something_else": 3},
                "second": {"hbm_read_bytes": 99}}
    assert parse_summary(document) == {"hbm_read_bytes": 10.0, MEASURED_KEY: MEASURED_VALUE}


@pytest.mark.parametrize("document", [{}, [], "text", {"kernel": 3}, {"kernel": {"total_time": 1.0}}])
def test_a_summary_without_counters_is_refused(document) -> None:
    with pytest.raises(SummaryError):
        parse_summary(document)


def test_the_profiler_is_run_as_accelopt_runs_it() -> None:
    assert summary_command("/opt/aws/neuron/bin/neuron-profile", "a.neff", "a.ntff") == [
        "/opt/aws/neuron/bin/neuron-profile", "view", "--output-format", "summary-json", "-n", "a.neff", "-s", "a.ntff"]
