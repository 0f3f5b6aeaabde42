"""Outside the inline mode an evaluation runs on the executor and a future callback saves its result."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from benchmark import services
from benchmark.models import EvaluationStatus, Problem
from tests.benchmark.conftest import FakePipeline


class ThreadExecutor:
    """The executor interface (submit(request) -> Future) over threads, running a fake pipeline."""

    def __init__(self, pipeline: FakePipeline) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.pipeline = pipeline
        self.requests: list = []

    def submit(self, request):
        self.requests.append(request)
        kwargs = request if isinstance(request, dict) else request.__dict__
        return self.pool.submit(lambda: self.pipeline(**kwargs))


@pytest.fixture
def thread_executor():
    executor = ThreadExecutor(FakePipeline())
    previous = services.set_executor(executor)
    yield executor
    services.set_executor(previous)
    executor.pool.shutdown(wait=True)


@pytest.mark.django_db(transaction=True)
def test_a_requested_evaluation_is_running_at_once_and_saved_when_the_future_completes(thread_executor):
    services.load_suite("nkibench", evaluate_cases=())
    kernel = Problem.objects.get(slug="silu", case="mini").baseline_kernel
    evaluation = services.request_evaluation(kernel, "trn1")
    assert evaluation.status == EvaluationStatus.RUNNING
    services.wait_for_evaluations([evaluation], timeout=30)
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.DONE and evaluation.correct
    assert evaluation.latency_ms is not None and evaluation.finished is not None
    assert len(thread_executor.requests) == 1


@pytest.mark.django_db(transaction=True)
def test_an_executor_failure_becomes_an_infrastructure_error(thread_executor):
    services.load_suite("nkibench", evaluate_cases=())
    kernel = Problem.objects.get(slug="silu", case="mini").baseline_kernel

    def worker_died(**kwargs):
        raise OSError("worker process exited unexpectedly")

    thread_executor.pipeline = worker_died
    evaluation = services.request_evaluation(kernel, "trn1")
    services.wait_for_evaluations([evaluation], timeout=30)
    evaluation.refresh_from_db()
    assert evaluation.error_kind == "infrastructure_error"
    assert "worker process exited unexpectedly" in evaluation.error_message


@pytest.mark.django_db(transaction=True)
def test_the_local_pool_keeps_serving_after_a_kernel_is_killed_at_the_timeout(settings, engineer):
    from engine.evaluator import LocalExecutor
    from tests.benchmark.bad_inputs import BAD_INPUTS

    settings.ACCELOPT_EVALUATION_TIMEOUT_S = 5
    services.load_suite("nkibench", evaluate_cases=())
    problem = Problem.objects.get(slug="silu", case="mini")
    slow_source = next(case.kernel for case in BAD_INPUTS if case.name == "too_slow")
    executor = LocalExecutor(max_workers=1)  # one worker: the baseline can only run after the slow kernel
    previous = services.set_executor(executor)
    try:
        slow_kernel, _, slow = services.upload_kernel(engineer, kernel_source=slow_source, problem=problem)
        baseline = services.request_evaluation(problem.baseline_kernel, "trn1")
        services.wait_for_evaluations([slow, baseline], timeout=120)
    finally:
        services.set_executor(previous)
        executor.shutdown()
    slow.refresh_from_db()
    baseline.refresh_from_db()
    assert slow.error_kind == "timeout"
    assert baseline.correct is True and baseline.latency_ms > 0


@pytest.mark.django_db(transaction=True)
def test_waiting_with_a_timeout_returns_while_the_evaluation_still_runs(thread_executor):
    import threading

    services.load_suite("nkibench", evaluate_cases=())
    kernel = Problem.objects.get(slug="silu", case="mini").baseline_kernel
    release = threading.Event()
    fake = thread_executor.pipeline

    def slow(**kwargs):
        release.wait(30)
        return fake(**kwargs)

    thread_executor.pipeline = slow
    evaluation = services.request_evaluation(kernel, "trn1")
    services.wait_for_evaluations([evaluation], timeout=0.2)
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.RUNNING
    release.set()
    services.wait_for_evaluations([evaluation], timeout=30)
    evaluation.refresh_from_db()
    assert evaluation.status == EvaluationStatus.DONE
