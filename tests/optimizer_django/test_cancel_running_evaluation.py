"""Cancelling a run stops the evaluation it is waiting on in the local pool, not only the run: the sandbox
child evaluating a slow kernel is killed within seconds, the pool's thread is free for the next evaluation,
and the evaluation is stored as cancelled (the queue page lists it so), not as a failure of the kernel.

A real evaluation: NKIBench silu:mini with tests/scale/kernels.py's slow variant (a minute or more)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from benchmark import services as benchmark_services
from benchmark.models import Evaluation, EvaluationStatus, Problem
from engine.evaluator.executors import LocalExecutor
from optimizer import services
from optimizer.models import RunStatus
from optimizer.worker import claim_run, drive_run
from tests.optimizer.fakes import FakeAgents
from tests.scale.kernels import request, slow_kernel

pytestmark = pytest.mark.django_db(transaction=True)

SLOW_REPEATS = 40_000  # about twenty times silu's 2,000-repeat variant (ten seconds on a busy 2-core machine)


def sandbox_children() -> list[int]:
    """This process's direct children that are evaluation sandboxes (other processes' are not ours to count)."""
    pids: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    found = []
    for pid in pids:
        try:
            if b"engine.evaluator.child" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout:g} s")
        time.sleep(0.05)


@pytest.fixture
def pool(settings):
    settings.ACCELOPT_EVALUATION_INLINE = False
    executor = LocalExecutor(max_workers=1)  # one slot: the next evaluation starts only once it is free
    previous = benchmark_services.set_executor(executor)
    yield executor
    benchmark_services.set_executor(previous)
    executor.shutdown(wait=False)


def test_cancelling_a_running_local_evaluation_kills_its_sandbox_and_frees_the_pool(pool) -> None:
    future = pool.submit(request(slow_kernel(SLOW_REPEATS)))
    wait_until(lambda: sandbox_children(), 60, "the slow kernel's sandbox to start")
    assert future.cancel() and future.cancelled()
    wait_until(lambda: not sandbox_children(), 10, "the cancelled evaluation's sandbox to be killed")
    # The one pool thread is free again: an ordinary evaluation (seconds) is not queued behind the slow one.
    assert pool.submit(request()).result(timeout=90).correct


def test_a_run_cancelled_while_a_slow_kernel_evaluates_stops_it_and_records_it_cancelled(
        pool, site_admin, client) -> None:
    benchmark_services.load_suite("nkibench", evaluate_cases=())
    problem = Problem.objects.get(suite="nkibench", slug="silu", case="mini")
    # Launched as `manage.py optimize` does (no user): the start kernel is only stored, so the one
    # evaluation in flight is the one the run's first step waits on.
    run = services.create_run(None, problem, start_source=slow_kernel(SLOW_REPEATS), start_name="slow silu",
                              search={"iterations": 1, "beam_width": 1, "plans_per_candidate": 1,
                                      "samples_per_plan": 1})
    cancelled_after: list[float] = []

    def cancel_once_evaluating() -> None:
        wait_until(lambda: sandbox_children(), 60, "the slow kernel's sandbox to start")
        started = time.monotonic()
        services.cancel_run(run)
        wait_until(lambda: not sandbox_children(), 10, "the cancelled run's sandbox to be killed")
        cancelled_after.append(time.monotonic() - started)

    canceller = threading.Thread(target=cancel_once_evaluating)
    assert claim_run("w1", run.pk) == run.pk
    canceller.start()
    try:
        status = async_to_sync(drive_run)(run.pk, "w1", agents_factory=lambda run: FakeAgents())
    finally:
        canceller.join()
    run.refresh_from_db()
    assert status == run.status == RunStatus.CANCELLED
    assert cancelled_after, "the sandbox was not killed after the cancel"
    (evaluation,) = Evaluation.objects.filter(kernel=run.start_kernel)
    assert evaluation.status == EvaluationStatus.DONE and evaluation.correct is None
    assert evaluation.error_kind == "infrastructure_error"  # ours: whoever asks next runs it again
    assert evaluation.error_message == f"{benchmark_services.CANCELLED_PREFIX}run {run.pk} was cancelled"
    client.force_login(site_admin)
    page = client.get(reverse("evaluation_queue")).content.decode()
    assert f"run {run.pk} was cancelled" in page


def test_an_evaluation_running_when_the_server_stops_reads_cancelled_not_failed(pool, site_admin, client) -> None:
    benchmark_services.load_suite("nkibench", evaluate_cases=())
    problem = Problem.objects.get(suite="nkibench", slug="silu", case="mini")
    kernel, _ = benchmark_services.create_kernel(problem, slow_kernel(SLOW_REPEATS), name="slow silu")
    evaluation = benchmark_services.request_evaluation(kernel)
    wait_until(lambda: sandbox_children(), 60, "the slow kernel's sandbox to start")
    pool.shutdown(wait=False)  # what the server does as it stops
    wait_until(lambda: Evaluation.objects.get(pk=evaluation.pk).status == EvaluationStatus.DONE, 30,
               "the withdrawn evaluation to be stored")
    evaluation.refresh_from_db()
    assert evaluation.error_kind == "infrastructure_error" and evaluation.correct is None  # run again next time
    assert evaluation.error_message == f"{benchmark_services.CANCELLED_PREFIX}the server stopped before it finished"
    client.force_login(site_admin)
    assert "the server stopped before it finished" in client.get(reverse("evaluation_queue")).content.decode()
