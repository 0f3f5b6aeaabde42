"""manage.py hardware_check: no device here; with the test doubles, the side-by-side table and the CSV.

The tests take no `db` fixture: pytest-django refuses any database access in them, so passing proves the
command never touches the database.
"""

from __future__ import annotations

import csv
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from engine.platforms.nki.neuron.summary import parse_summary
from engine.platforms.nki.perf.calibration import (
    CALIBRATION_COLUMNS,
    DEFAULT_CSV,
    calibration_row,
    load_measurements,
    write_calibration_csv,
)
from tests.neuron import recorded


def test_without_a_neuron_device_it_says_so_and_exits_non_zero(monkeypatch, tmp_path) -> None:
    for name in ("ACCELOPT_NEURON_DEV_DIR", "ACCELOPT_NEURON_SDK_PATH", "ACCELOPT_NEURON_TOOLS_DIR",
                 "ACCELOPT_NEURON_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACCELOPT_NEURON_DEV_DIR", str(tmp_path))  # an empty /dev: no neuron* node
    output = tmp_path / "never.csv"
    err = StringIO()
    with pytest.raises(CommandError, match="No Neuron device is present on this host, so nothing was measured"):
        call_command("hardware_check", "--output", str(output), stderr=err, stdout=StringIO())
    assert "no Neuron device: no " in err.getvalue()
    assert not output.exists()


def test_manage_py_exits_with_status_1_here() -> None:
    import subprocess
    import sys

    from engine.platforms.nki.neuron import NeuronHost

    if NeuronHost.from_environment().devices():
        pytest.skip("this host has a Neuron device")
    done = subprocess.run([sys.executable, "manage.py", "hardware_check"], capture_output=True, text=True,
                          cwd=recorded.ROOT, timeout=120, check=False)
    assert done.returncode == 1
    assert "No Neuron device is present on this host" in done.stderr


def test_with_the_doubles_it_prints_both_sides_and_writes_the_calibration_csv(neuron_host, tmp_path) -> None:
    output = tmp_path / "trn1.csv"
    out = StringIO()
    call_command("hardware_check", "--problems", "silu,rmsnorm_matmul", "--case", "mini", "--output", str(output),
                 stdout=out, stderr=StringIO())
    text = out.getvalue()
    assert "measured ms" in text and "simulated ms" in text and "sim/meas" in text
    assert "hbm_read_bytes" in text and f"wrote 2 measured row(s) to {output}" in text
    with output.open(newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    with DEFAULT_CSV.open(newline="") as handle:
        assert reader.fieldnames == next(csv.reader(handle)) == list(CALIBRATION_COLUMNS)
    # The doubles answer with the recorded trn1 measurements of each problem (at the mini shape here).
    cases = {c["problem"]: c for c in recorded.load()["cases"].values()}
    assert [r["problem"] for r in rows] == ["silu", "rmsnorm_matmul"]
    assert json.loads(rows[0]["shape"]) == {"M": 256, "N": 512}
    for row in rows:
        case = cases[row["problem"]]
        assert float(row["latency_ms"]) == pytest.approx(case["latency_ms"], rel=1e-12)
        for name in CALIBRATION_COLUMNS[3:]:
            assert row[name] == ("" if name not in case["summary"] else row[name])
            if name in case["summary"]:
                assert float(row[name]) == float(case["summary"][name])
    # Every SDK call of the run was pinned to a NeuronCore of the pool.
    assert {c["NEURON_RT_VISIBLE_CORES"] for c in neuron_host.calls() if c["call"] == "baremetal"} <= {"0", "1"}


def test_the_csv_made_from_the_doubles_answers_is_the_measured_csv(tmp_path) -> None:
    """The rows hardware_check writes from the doubles' answers for the 14 full NKIBench cases (the summary-json
    entries and latencies recorded from the real CSV) reproduce that CSV, value for value."""
    rows = []
    for case in recorded.load()["cases"].values():
        latency_ms = case["summary"]["total_time"] * 1e6 / 1000.0  # as the benchmark double reports it, in us
        rows.append(calibration_row(case["problem"], case["shape"], latency_ms,
                                    parse_summary({"kernel": case["summary"]})))
    written = write_calibration_csv(rows, tmp_path / "doubles.csv")
    ours, real = load_measurements(written), load_measurements(DEFAULT_CSV)
    assert ours.keys() == real.keys()
    for key, values in real.items():
        assert ours[key]["latency_ms"] == pytest.approx(values["latency_ms"], rel=1e-12)
        assert {k: v for k, v in ours[key].items() if k != "latency_ms"} == \
            {k: v for k, v in values.items() if k != "latency_ms"}
