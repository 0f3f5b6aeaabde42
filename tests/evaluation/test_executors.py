"""The local executor runs requests concurrently and returns results in request order."""

from __future__ import annotations

from engine.evaluator import ErrorKind, EvaluationRequest, LocalExecutor
from tests.evaluation.conftest import ADD_REFERENCE, FAST_LIMITS, NUMPY_ADD_KERNEL


def test_map_returns_results_in_request_order() -> None:
    wrong = NUMPY_ADD_KERNEL.replace("a + b", "a - b")
    requests = [EvaluationRequest(source, ADD_REFERENCE, backend="null", limits=FAST_LIMITS)
                for source in (NUMPY_ADD_KERNEL, wrong, NUMPY_ADD_KERNEL)]
    with LocalExecutor(max_workers=2) as pool:
        results = list(pool.map(requests))
    assert [r.correct for r in results] == [True, False, True]
    assert results[1].error_kind is ErrorKind.INCORRECT


def test_submit_returns_a_future_of_an_evaluation_result() -> None:
    with LocalExecutor(max_workers=1) as pool:
        future = pool.submit(EvaluationRequest("def kernel(:\n", ADD_REFERENCE, backend="null"))
        assert future.result(timeout=30).error_kind is ErrorKind.REJECTED
