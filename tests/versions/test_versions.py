"""Versions move when results move: SIMULATOR_VERSION and PERF_MODEL_VERSION against recorded digests.

Cached evaluations are keyed on `nki-sim <SIMULATOR_VERSION> + perf <PERF_MODEL_VERSION>`. The 14 NKIBench
mini cases are simulated (seeded inputs) and profiled here, and their trace and output digests and the
performance model's predictions are compared with tests/versions/digests.json (see digests.py):

* the file names other versions than the code: regenerate it (`python -m tests.versions.digests --regenerate`);
* same versions, a trace or output digest differs: bump SIMULATOR_VERSION, then regenerate;
* same versions, same trace, a latency or profile counter differs: bump PERF_MODEL_VERSION, then regenerate;
* a mini case's reference, baseline or inputs changed: a suite edit; regenerate.

The whole comparison takes about a second (the mini cases' traces have 6 to 160 instructions).
"""

from __future__ import annotations

import copy

import pytest

from tests.versions import digests


@pytest.fixture(scope="module")
def current() -> dict:
    return digests.compute()


def test_recorded_digests_match_the_code_and_its_versions(current):
    differences = digests.compare(digests.load_recorded(), current)
    assert not differences, "\n".join(differences)


def test_the_digests_are_deterministic(current):
    assert digests.compute() == current


# -- what the comparison says, on edited copies of a record ----------------------------------------------


@pytest.fixture
def recorded(current) -> dict:
    return copy.deepcopy(current)


def test_a_new_version_asks_for_the_file_to_be_regenerated(current, recorded):
    recorded["simulator_version"] = "0.9"
    (message,) = digests.compare(recorded, current)
    assert "nki-sim 0.9" in message and "regenerate" in message and "--regenerate" in message
    recorded["simulator_version"] = current["simulator_version"]
    recorded["perf_model_version"] = "perf-0"
    (message,) = digests.compare(recorded, current)
    assert "perf perf-0" in message and "regenerate" in message


def test_a_changed_trace_or_output_asks_for_a_simulator_bump_and_names_the_problems(current, recorded):
    recorded["problems"]["silu"]["trace"] = "0" * 16
    recorded["problems"]["lora"]["outputs"] = "0" * 16
    recorded["problems"]["lora"]["latency_ms"] *= 2  # follows from the simulator's change: not reported apart
    (message,) = digests.compare(recorded, current)
    assert "bump SIMULATOR_VERSION" in message and "--regenerate" in message
    assert "silu (trace)" in message and "lora (outputs)" in message and "adamw" not in message


def test_a_changed_prediction_on_the_same_trace_asks_for_a_perf_model_bump(current, recorded):
    recorded["problems"]["bmm"]["latency_ms"] *= 1.01
    recorded["problems"]["matmul"]["profile"]["hbm_read_bytes"] += 1
    (message,) = digests.compare(recorded, current)
    assert "bump PERF_MODEL_VERSION" in message
    assert "bmm (latency_ms)" in message and "matmul (hbm_read_bytes)" in message


def test_a_last_bit_float_difference_is_not_a_change(current, recorded):
    recorded["problems"]["bmm"]["latency_ms"] *= 1 + 1e-13
    assert digests.compare(recorded, current) == []


def test_a_changed_mini_case_is_a_suite_edit_not_a_bump(current, recorded):
    recorded["problems"]["swiglu"]["case"] = "0" * 16
    recorded["problems"]["swiglu"]["trace"] = "0" * 16
    (message,) = digests.compare(recorded, current)
    assert "swiglu" in message and "suite edit" in message and "bump" not in message
