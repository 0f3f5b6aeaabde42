"""The breakdown of where the time goes travels with the evaluation result: the simulator's performance model
explains its number; a measured backend has nothing that explains it, so the field stays empty."""

from __future__ import annotations

import json

from engine.evaluator.result import EvaluationResult
from tests.evaluation.conftest import needs_simulator
from tests.evaluation.test_simulator_backend import SILU_KERNEL, SILU_PEAK_COUNTS, run


@needs_simulator
def test_a_simulated_result_carries_the_breakdown_through_the_sandboxed_pipeline() -> None:
    result = run(SILU_KERNEL, peak_counts=SILU_PEAK_COUNTS)
    assert result.correct, result.error_message
    b = result.breakdown
    assert b["verdict"].startswith("bound by: ")
    assert abs(sum(b["path_share"].values()) - 1) < 1e-9
    assert abs(b["latency_s"] * 1e3 - result.latency_ms) < 1e-9 * result.latency_ms
    # Plain JSON, and the record round-trips with it.
    data = json.loads(json.dumps(result.to_dict()))
    assert EvaluationResult.from_dict(data) == result


def test_a_result_without_a_breakdown_round_trips_as_none() -> None:
    result = EvaluationResult(status="ok", correct=True, latency_ms=1.0)
    assert result.breakdown is None
    assert EvaluationResult.from_dict(result.to_dict()).breakdown is None
