"""A worker that takes over a crashed worker's run restarts, at once, the evaluations the dead worker
left running (their result would have been saved by a callback in the dead process), instead of waiting
ACCELOPT_EVALUATION_STALE_AFTER_S for them; an evaluation started after the takeover is left alone."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from benchmark import services as benchmark_services
from benchmark.models import Evaluation, EvaluationStatus, Kernel, KernelOrigin
from benchmark.services import source_sha256
from optimizer import services
from optimizer.adapters import DjangoEvaluator
from optimizer.models import Run, RunStatus
from optimizer.worker import RunWorker, claim_run
from tests.optimizer.fakes import fake_kernel

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)


def left_running(kernel: Kernel, run: Run) -> Evaluation:
    """An evaluation marked running a moment ago by a worker process that is now gone."""
    return Evaluation.objects.create(
        kernel=kernel, platform=run.platform, backend=run.backend,
        backend_version=benchmark_services.backend_version(run.backend),
        status=EvaluationStatus.RUNNING, started=timezone.now(), attempts=1,
    )


def test_a_taken_over_run_restarts_the_dead_workers_evaluation_at_once(
    fake_pipeline, problem, owner, fake_agents_factory, settings
):
    settings.ACCELOPT_EVALUATION_STALE_AFTER_S = 900  # far longer than this test may take
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    assert claim_run("worker-that-died") == run.pk
    abandoned = left_running(run.start_kernel, run)

    settings.ACCELOPT_WORKER_STALE_S = 0  # the dead worker's heartbeat is old at once
    # A short wait limit: without the restart the evaluation never finishes and the run fails on it.
    worker = RunWorker("second-worker", agents_factory=fake_agents_factory,
                       evaluator_factory=lambda run: DjangoEvaluator(run, timeout_s=20))
    assert async_to_sync(worker.step)()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    abandoned.refresh_from_db()
    assert (abandoned.status, abandoned.attempts, abandoned.latency_ms) == (EvaluationStatus.DONE, 2, 10.0)
    assert run.start_latency_ms == 10.0
    assert fake_pipeline.evaluated_twice == []


def test_an_evaluation_started_after_the_takeover_is_not_started_again(fake_pipeline, problem, owner, settings):
    settings.ACCELOPT_EVALUATION_STALE_AFTER_S = 900
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    assert claim_run("worker-that-died") == run.pk
    settings.ACCELOPT_WORKER_STALE_S = 0
    assert claim_run("second-worker") == run.pk
    source = fake_kernel(8.0)
    kernel = Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                                   origin=KernelOrigin.UPLOADED)
    live = left_running(kernel, run)  # say, a teammate's request running in the web process right now

    evaluator = DjangoEvaluator(run)
    assert evaluator.abandoned_before() is not None
    assert evaluator.request(kernel).status == EvaluationStatus.RUNNING
    live.refresh_from_db()
    assert (live.status, live.attempts) == (EvaluationStatus.RUNNING, 1)
    assert sum(fake_pipeline.calls.values()) == 0
