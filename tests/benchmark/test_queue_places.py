"""Nothing looks frozen: an evaluation waiting for the local pool is "queued" with its place in line until a
thread takes it, then "running" with the time since it started; the queue page says both."""

from __future__ import annotations

import threading
import time

import pytest
from django.urls import reverse

from benchmark import services
from benchmark.models import Evaluation, EvaluationStatus, Problem
from engine.evaluator import LocalExecutor
from engine.evaluator.executors import EvaluationRequest


def _wait_until(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture
def one_slow_worker(monkeypatch):
    """A one-thread local pool whose evaluations each wait for one release (then fail: no result is needed)."""
    release = threading.Semaphore(0)

    def run(self):
        release.acquire(timeout=30)
        raise RuntimeError("released")

    monkeypatch.setattr(EvaluationRequest, "run", run)
    executor = LocalExecutor(max_workers=1)
    previous = services.set_executor(executor)
    yield release
    release.release(10)
    services.set_executor(previous)
    executor.shutdown()


@pytest.mark.django_db(transaction=True)
def test_evaluations_behind_a_busy_worker_are_queued_with_their_place_then_run(one_slow_worker, client, engineer):
    services.load_suite("nkibench", evaluate_cases=())
    problem = Problem.objects.get(slug="silu", case="mini")
    kernels = [services.create_kernel(problem, problem.baseline_kernel.source + f"\n# copy {n}\n")[0]
               for n in range(3)]
    first, second, third = (services.request_evaluation(kernel, "trn1") for kernel in kernels)
    _wait_until(lambda: Evaluation.objects.get(pk=first.pk).status == EvaluationStatus.RUNNING)

    rows = Evaluation.objects.filter(pk__in=[first.pk, second.pk, third.pk])
    places = services.queue_places(rows)
    assert (places[first.pk].state, places[second.pk].state, places[third.pk].state) == ("running", "queued", "queued")
    assert (places[second.pk].ahead, places[third.pk].ahead) == (0, 1)
    time.sleep(1.1)
    assert services.queue_places(rows)[third.pk].elapsed_s >= 1.0  # the wait grows while it waits

    client.force_login(engineer)
    page = client.get(reverse("evaluation_queue")).content.decode()
    assert "1 queued ahead" in page and "next" in page and "running for" in page

    one_slow_worker.release()  # the first ends: the second starts, the third is next
    _wait_until(lambda: Evaluation.objects.get(pk=second.pk).status == EvaluationStatus.RUNNING)
    assert services.queue_places(Evaluation.objects.filter(pk=third.pk))[third.pk].ahead == 0
