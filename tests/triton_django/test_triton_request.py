"""Which workloads a Triton backend judges a kernel on, and how their results make one (no sandbox, no GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.evaluator.result import STATUS_FAILED, STATUS_OK, ErrorKind, EvaluationResult
from engine.platforms.triton.request import chosen_workloads, combine

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DEFINITION = json.loads((FIXTURES / "studio_axpy_h16.json").read_text())
WORKLOADS = [json.loads(line) for line in (FIXTURES / "studio_axpy_h16.jsonl").read_text().splitlines()]


def _uuids(workloads):
    return [w["workload"]["uuid"] for w in workloads]


def _workload(uuid: str, batch: int) -> dict:
    return {"definition": "studio_axpy_h16", "workload": {"uuid": uuid, "axes": {"batch": batch}, "inputs": {}}}


def test_the_interpreter_checks_small_workloads_smallest_first_and_cuda_every_one():
    larger_first = list(reversed(WORKLOADS))
    assert _uuids(chosen_workloads(DEFINITION, larger_first, "triton-interpreter")) == ["studio-axpy-b3",
                                                                                         "studio-axpy-b8"]
    assert _uuids(chosen_workloads(DEFINITION, larger_first, "cuda")) == ["studio-axpy-b8", "studio-axpy-b3"]


def test_the_interpreter_stops_at_its_byte_budget_and_count_but_always_checks_the_smallest():
    # batch b: 3 tensors of b x 16 float32 = 192 b bytes.
    workloads = [_workload("huge", 100_000), _workload("b8", 8), _workload("b3", 3), _workload("b40", 40),
                 _workload("b9", 9)]
    assert _uuids(chosen_workloads(DEFINITION, workloads, "triton-interpreter")) == ["b3", "b8", "b9", "b40"]
    assert _uuids(chosen_workloads(DEFINITION, workloads, "triton-interpreter", budget=192 * 20)) == ["b3", "b8", "b9"]
    assert _uuids(chosen_workloads(DEFINITION, workloads, "triton-interpreter", count=2)) == ["b3", "b8"]
    assert _uuids(chosen_workloads(DEFINITION, [workloads[0]], "triton-interpreter")) == ["huge"]  # over, but alone


def _ok(latency, floor):
    return EvaluationResult(status=STATUS_OK, compiled=True, runnable=True, correct=True, latency_ms=latency,
                            theoretical_peak_ms=floor, peak_fraction=floor / latency, relative_l2_errors=((0.0,),),
                            profile={"spread": 0.01}, wall_time_s=1.0)


def test_measured_workloads_combine_into_mean_latency_and_floor():
    result = combine([("a", _ok(2.0, 1.0)), ("b", _ok(4.0, 1.0))])
    assert result.ok and result.latency_ms == pytest.approx(3.0)
    assert result.peak_fraction == pytest.approx(1.0 / 3.0)
    assert [w["uuid"] for w in result.profile["workloads"]] == ["a", "b"]
    assert len(result.relative_l2_errors) == 2 and result.wall_time_s == pytest.approx(2.0)


def test_the_first_failing_workload_is_the_result_and_is_named():
    failed = EvaluationResult(status=STATUS_FAILED, compiled=True, runnable=True, error_kind=ErrorKind.INCORRECT,
                              error_message="seed 1: out differs")
    result = combine([("a", _ok(2.0, 1.0)), ("b", failed)])
    assert not result.ok and result.error_kind is ErrorKind.INCORRECT
    assert result.error_message == "workload b: seed 1: out differs"


def test_a_correctness_only_result_keeps_no_latency():
    interpreted = EvaluationResult(status=STATUS_OK, compiled=True, runnable=True, correct=True,
                                   profile={"note": "correctness only: no GPU"})
    result = combine([("a", interpreted)])
    assert result.ok and result.latency_ms is None and result.peak_fraction is None
    assert result.profile["note"] == "correctness only: no GPU"
