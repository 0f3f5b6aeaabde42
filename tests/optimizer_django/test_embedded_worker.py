"""The embedded worker runs inside the ASGI process: started with the server, off by a setting."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

import optimizer.worker
from optimizer import services
from optimizer.models import Run, RunStatus
from optimizer.worker import EmbeddedWorkerMiddleware

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)


async def never_called(scope, receive, send):
    raise AssertionError("the lifespan scope must not reach the wrapped application")


async def lifespan(app, *messages: str) -> list[str]:
    inbox: asyncio.Queue = asyncio.Queue()
    sent: list[str] = []
    for message in messages:
        inbox.put_nowait({"type": f"lifespan.{message}"})

    async def send(message):
        sent.append(message["type"])

    task = asyncio.create_task(app({"type": "lifespan"}, inbox.get, send))
    await asyncio.sleep(0.05)
    return task, inbox, sent


async def wait_for_status(run_id: int, status: str, timeout: float = 20.0) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        current = await database_sync_to_async(lambda: Run.objects.get(pk=run_id).status)()
        if current == status or asyncio.get_running_loop().time() > deadline:
            return current
        await asyncio.sleep(0.05)


@pytest.fixture
def fast_worker(settings, monkeypatch, fake_agents_factory):
    settings.ACCELOPT_WORKER_POLL_MS = 20
    settings.ACCELOPT_EMBEDDED_WORKER = True
    # The suite's background baseline pass (a thread the server start also launches) is a second writer on
    # the test database, whose shared in-memory SQLite fails a concurrent write at once ("database table is
    # locked") instead of waiting: under load it overlapped these tests' writes. It has its own tests
    # (tests/benchmark/test_background_baselines.py); here only that the server start launches it.
    settings.ACCELOPT_BACKGROUND_BASELINES = "none"
    monkeypatch.setattr(optimizer.worker, "default_agents", fake_agents_factory)


async def test_the_server_starting_starts_a_worker_that_runs_queued_runs(fake_pipeline, problem, owner, fast_worker):
    app = EmbeddedWorkerMiddleware(never_called)
    task, inbox, sent = await lifespan(app, "startup")
    assert sent == ["lifespan.startup.complete"]
    run = await database_sync_to_async(services.create_run)(owner, problem, search=SMALL_SEARCH)
    assert await wait_for_status(run.pk, RunStatus.SUCCEEDED) == RunStatus.SUCCEEDED
    inbox.put_nowait({"type": "lifespan.shutdown"})
    await asyncio.wait_for(task, 5)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert "task" not in optimizer.worker._embedded


async def test_the_server_starting_also_starts_the_background_baseline_pass(fast_worker, monkeypatch):
    started: list[bool] = []
    monkeypatch.setattr(optimizer.worker, "start_background_baselines", lambda: started.append(True))
    app = EmbeddedWorkerMiddleware(never_called)
    task, inbox, sent = await lifespan(app, "startup")
    inbox.put_nowait({"type": "lifespan.shutdown"})
    await asyncio.wait_for(task, 5)
    assert started == [True]


async def test_the_setting_turns_the_embedded_worker_off(fake_pipeline, problem, owner, fast_worker, settings):
    settings.ACCELOPT_EMBEDDED_WORKER = False
    app = EmbeddedWorkerMiddleware(never_called)
    task, inbox, sent = await lifespan(app, "startup")
    run = await database_sync_to_async(services.create_run)(owner, problem, search=SMALL_SEARCH)
    await asyncio.sleep(0.3)
    assert await database_sync_to_async(lambda: Run.objects.get(pk=run.pk).status)() == RunStatus.QUEUED
    inbox.put_nowait({"type": "lifespan.shutdown"})
    await asyncio.wait_for(task, 5)


async def test_stopping_the_server_hands_a_running_run_back_to_the_queue(fake_pipeline, problem, owner, fast_worker,
                                                                         monkeypatch):
    from optimizer.adapters import DjangoEvaluator

    gate = asyncio.Event()
    original = DjangoEvaluator.evaluate_many

    async def slow_evaluate_many(self, sources):
        await gate.wait()  # never set: the run is mid-step when the server stops
        return await original(self, sources)

    monkeypatch.setattr(DjangoEvaluator, "evaluate_many", slow_evaluate_many)
    app = EmbeddedWorkerMiddleware(never_called)
    task, inbox, sent = await lifespan(app, "startup")
    run = await database_sync_to_async(services.create_run)(owner, problem, search=SMALL_SEARCH)
    assert await wait_for_status(run.pk, RunStatus.RUNNING) == RunStatus.RUNNING
    inbox.put_nowait({"type": "lifespan.shutdown"})
    await asyncio.wait_for(task, 5)
    run = await database_sync_to_async(Run.objects.get)(pk=run.pk)
    assert (run.status, run.claimed_by) == (RunStatus.QUEUED, "")
