"""EvaluationResult is a stable, JSON-serialisable record."""

from __future__ import annotations

import json

from engine.evaluator import ErrorKind, EvaluationResult


def test_it_round_trips_through_json() -> None:
    result = EvaluationResult(
        status="ok", compiled=True, runnable=True, correct=True, relative_l2_errors=((1e-7, 2e-7), (3e-7, 0.0)),
        output_errors=(3e-7, 2e-7), seeds=(1, 2, 3), distributions=("reference", "zeros", "scaled"),
        latency_ms=0.5, peak_fraction=0.25, profile={"hbm_read_bytes": 1024.0}, timeline={"dma": [[0.0, 1.0]]},
        backend="simulator", backend_version="v", perf_model_version="perf-1", platform="trn1",
    )
    assert EvaluationResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_non_finite_numbers_become_null_so_the_json_stays_strict() -> None:
    result = EvaluationResult.failure(ErrorKind.INCORRECT, "NaN output", relative_l2_errors=((float("inf"),),),
                                      output_errors=(float("nan"),))
    text = json.dumps(result.to_dict(), allow_nan=False)
    data = json.loads(text)
    assert data["relative_l2_errors"] == [[None]] and data["error_kind"] == "incorrect"
    assert EvaluationResult.from_dict(data).max_relative_error is None


def test_infrastructure_errors_are_not_kernel_results() -> None:
    assert not EvaluationResult.failure(ErrorKind.INFRASTRUCTURE_ERROR, "worker died").is_kernel_result
    assert EvaluationResult.failure(ErrorKind.TIMEOUT, "slow").is_kernel_result
    assert {kind.value for kind in ErrorKind} == {"rejected", "compile_error", "runtime_error", "incorrect", "modified_input",
                                                  "timeout", "resource_limit", "suspicious", "infrastructure_error"}
