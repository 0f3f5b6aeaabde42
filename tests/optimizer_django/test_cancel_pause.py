"""Cancel and pause take effect between two search steps; a paused run resumes where it stopped."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from optimizer import services
from optimizer.models import Run, RunStatus
from optimizer.worker import RunWorker, claim_run, drive_run

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)


def drive_with_request_after(run: Run, steps: int, request, agents_factory) -> tuple[str, int]:
    """Drive `run` and call `request(run)` (cancel_run, pause_run) after `steps` steps."""
    counter = {"steps": 0, "iteration_at_request": 0}

    async def on_step(search):
        counter["steps"] += 1
        if counter["steps"] == steps:
            counter["iteration_at_request"] = search.state.iteration
            await sync_to_async(request)(run)

    assert claim_run("w1", run.pk) == run.pk
    status = async_to_sync(drive_run)(run.pk, "w1", agents_factory=agents_factory, on_step=on_step)
    return status, counter["steps"]


def test_cancelling_a_running_run_stops_it_before_the_next_step(fake_pipeline, problem, owner, fake_agents_factory):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    status, steps = drive_with_request_after(run, 3, services.cancel_run, fake_agents_factory)
    run.refresh_from_db()
    assert status == run.status == RunStatus.CANCELLED
    assert steps == 3  # no step ran after the request
    assert run.finished is not None and run.claimed_by == ""
    assert run.events.order_by("-seq").first().kind == "run.cancelled"


def test_a_cancelled_run_is_never_picked_up_again(fake_pipeline, problem, owner, fake_agents_factory):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    services.cancel_run(run, owner)
    assert run.status == RunStatus.CANCELLED
    assert async_to_sync(RunWorker(agents_factory=fake_agents_factory).step)() is False


def test_a_paused_run_resumes_from_its_checkpoint_and_finishes(fake_pipeline, problem, owner, fake_agents_factory):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    status, _ = drive_with_request_after(run, 4, services.pause_run, fake_agents_factory)
    run.refresh_from_db()
    assert status == run.status == RunStatus.PAUSED
    assert run.checkpoint is not None
    evaluations_before = sum(fake_pipeline.calls.values())
    assert async_to_sync(RunWorker(agents_factory=fake_agents_factory).step)() is False  # paused: not claimable

    services.resume_run(run, owner)
    assert run.status == RunStatus.QUEUED
    assert async_to_sync(RunWorker(agents_factory=fake_agents_factory).step)()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert fake_pipeline.evaluated_twice == []
    assert sum(fake_pipeline.calls.values()) > evaluations_before
    kinds = list(run.events.values_list("kind", flat=True))
    assert kinds.index("run.paused") < kinds.index("run.resumed") < kinds.index("run.finished")
    assert kinds.count("run.started") == 1


def test_pausing_a_queued_run_holds_it_until_resumed(fake_pipeline, problem, owner):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    services.pause_run(run, owner)
    assert run.status == RunStatus.PAUSED
    assert claim_run("w1") is None
    services.resume_run(run, owner)
    assert claim_run("w1") == run.pk


def test_cancelling_a_finished_run_changes_nothing(fake_pipeline, problem, owner, fake_agents_factory):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    async_to_sync(RunWorker(agents_factory=fake_agents_factory).step)()
    services.cancel_run(run, owner)
    assert run.status == RunStatus.SUCCEEDED
