"""A run cancelled while a step waits on its evaluations stops then, not when they finish: the evaluator
withdraws them from this process's executor (`cancel_evaluations`; on Ray that kills the tasks:
test_scale_out.py) and the step is dropped. No servers: an executor whose evaluations never finish."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest
from asgiref.sync import async_to_sync

from benchmark import services as benchmark_services
from benchmark.models import Evaluation, Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256
from engine.evaluator.executors import EvaluationRequest, Executor
from optimizer import services
from optimizer.models import RunStatus
from optimizer.worker import claim_run, drive_run
from tests.optimizer.fakes import FakeAgents, fake_kernel

pytestmark = pytest.mark.django_db(transaction=True)


class NeverFinishes(Executor):
    kind = "test"

    def __init__(self) -> None:
        self.futures: list[Future] = []

    def submit(self, request: EvaluationRequest) -> Future:
        future: Future = Future()
        self.futures.append(future)
        return future

    def shutdown(self, wait: bool = True) -> None:
        pass


def test_a_cancel_during_a_step_withdraws_its_evaluations_and_stops_the_run(settings, make_user) -> None:
    settings.ACCELOPT_EVALUATION_INLINE = False
    owner = make_user("olga", role="engineer")
    problem = Problem.objects.create(slug="double", case="mini", family="elementwise", reference_source="# ref")
    source = fake_kernel(10.0)
    problem.baseline_kernel = Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                                                    origin=KernelOrigin.BASELINE)
    problem.save(update_fields=["baseline_kernel"])
    run = services.create_run(owner, problem, search={"iterations": 1, "beam_width": 1, "plans_per_candidate": 1,
                                                      "samples_per_plan": 1})
    executor = NeverFinishes()
    previous = benchmark_services.set_executor(executor)

    def cancel_once_submitted() -> None:
        deadline = time.monotonic() + 30
        while not executor.futures and time.monotonic() < deadline:
            time.sleep(0.05)
        services.cancel_run(run, owner)

    canceller = threading.Thread(target=cancel_once_submitted)
    try:
        assert claim_run("w1", run.pk) == run.pk
        canceller.start()
        started = time.monotonic()
        status = async_to_sync(drive_run)(run.pk, "w1", agents_factory=lambda run: FakeAgents())
        stopped_after = time.monotonic() - started
    finally:
        canceller.join()
        benchmark_services.set_executor(previous)
    run.refresh_from_db()
    assert status == run.status == RunStatus.CANCELLED
    assert stopped_after < 10  # the start kernel's evaluation never finishes: only the cancel ended the step
    (future,) = executor.futures
    assert future.cancelled()
    (evaluation,) = Evaluation.objects.filter(kernel=problem.baseline_kernel)
    assert evaluation.error_kind == "infrastructure_error"  # run again by whoever asks next
    assert [e.kind for e in run.events.order_by("seq")][-1] == "run.cancelled"
    assert run.checkpoint is None  # the dropped step saved nothing
