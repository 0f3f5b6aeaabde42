"""The AccelOpt-style memory on a real run: `--memory-mode accelopt` shows the Planner the rewrites this run
learned (the latest iteration's, then a sample of older ones), not the global memory; the Executor sees the
memory only with `--executor-memory`."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

import optimizer.worker
from engine.agents.base import PlanRequest, WriteRequest
from memory import services as memory_services
from optimizer.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake_agents(monkeypatch, fake_agents_factory):
    monkeypatch.setattr(optimizer.worker, "default_agents", fake_agents_factory)
    return fake_agents_factory


def optimize(*options: str) -> Run:
    call_command("optimize", "--problem", "double:mini", "--iterations", "3", "--beam", "1", "--plans", "2",
                 "--samples", "1", "--memory-size", "2", *options, stdout=StringIO())
    return Run.objects.latest("id")


def test_accelopt_memory_shows_the_planner_only_this_runs_lessons(fake_pipeline, problem, fake_agents):
    memory_services.add_entry(title="A global lesson", summary="from elsewhere, curated", slow_kernel="a",
                              fast_kernel="b", speedup=2.0)
    run = optimize("--memory-mode", "accelopt")
    assert run.config["search"]["memory_mode"] == "accelopt"
    plans = [r for r in fake_agents.agents.requests if isinstance(r, PlanRequest)]
    assert plans[0].memory == ()  # nothing learned yet, and the global entry is not shown
    shown = {item.title for request in plans for item in request.memory}
    assert shown and "A global lesson" not in shown
    assert all(len(request.memory) <= 2 for request in plans)
    assert all(r.memory == () for r in fake_agents.agents.requests if isinstance(r, WriteRequest))


def test_the_curated_memory_shows_the_global_lesson_and_the_executor_can_be_given_memory(
    fake_pipeline, problem, fake_agents
):
    memory_services.add_entry(title="A global lesson", summary="from elsewhere, curated", slow_kernel="a",
                              fast_kernel="b", speedup=2.0)
    optimize("--executor-memory")
    plans = [r for r in fake_agents.agents.requests if isinstance(r, PlanRequest)]
    assert any(item.title == "A global lesson" for item in plans[0].memory)
    assert any(r.memory for r in fake_agents.agents.requests if isinstance(r, WriteRequest))
