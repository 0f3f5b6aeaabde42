"""/api/runs: create, read, cancel, pause, resume runs and page through their events."""

from __future__ import annotations

import pytest

from optimizer import services
from optimizer.events import record_events
from optimizer.models import Run, RunStatus

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


def test_an_engineer_queues_a_run_by_problem_address(owner_client, problem):
    response = owner_client.post("/api/runs", {"problem": "double:mini", "search": SMALL_SEARCH},
                                 content_type="application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued" and body["start_kernel_id"] == problem.baseline_kernel_id
    assert body["config"]["search"]["iterations"] == 2
    assert body["websocket_path"] == f"/ws/runs/{body['id']}/"


def test_unknown_search_parameters_are_refused_with_their_names(owner_client, problem):
    response = owner_client.post("/api/runs", {"problem": "double:mini", "search": {"beam": 3}},
                                 content_type="application/json")
    assert response.status_code == 400
    assert "beam" in response.json()["detail"]


def test_the_llm_agent_without_an_endpoint_is_refused(owner_client, problem, settings):
    settings.ACCELOPT_LLM_ROLES = {}
    response = owner_client.post("/api/runs", {"problem": "double:mini", "agent": "llm"},
                                 content_type="application/json")
    assert response.status_code == 400
    assert "needs a model for every role" in response.json()["detail"]


def test_anonymous_visitors_cannot_queue_runs(client, problem):
    response = client.post("/api/runs", {"problem": "double:mini"}, content_type="application/json")
    assert response.status_code == 401


def test_a_private_run_is_hidden_from_other_users(client, teammate, owner, problem):
    run = services.create_run(owner, problem)
    client.force_login(teammate)
    assert client.get(f"/api/runs/{run.pk}").status_code == 404
    assert client.post(f"/api/runs/{run.pk}/cancel").status_code == 404
    assert [r["id"] for r in client.get("/api/runs").json()] == []


def test_a_public_run_is_readable_but_not_cancellable_by_others(client, teammate, owner, problem):
    run = services.create_run(owner, problem, is_public=True)
    assert client.get(f"/api/runs/{run.pk}").status_code == 200
    client.force_login(teammate)
    assert client.post(f"/api/runs/{run.pk}/cancel").status_code == 403
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_the_owner_pauses_resumes_and_cancels(owner_client, owner, problem):
    run = services.create_run(owner, problem)
    assert owner_client.post(f"/api/runs/{run.pk}/pause").json()["status"] == "paused"
    assert owner_client.post(f"/api/runs/{run.pk}/resume").json()["status"] == "queued"
    assert owner_client.post(f"/api/runs/{run.pk}/cancel").json()["status"] == "cancelled"


def test_events_are_paged_by_seq_without_gap_or_repeat(owner_client, owner, problem):
    run = services.create_run(owner, problem)  # seq 1: run.queued
    record_events(run.pk, [("test.tick", {"n": n}) for n in range(6)])  # seqs 2..7
    seen, after = [], 0
    while after is not None:
        page = owner_client.get(f"/api/runs/{run.pk}/events", {"after": after, "limit": 3}).json()
        seen += [event["seq"] for event in page["events"]]
        after = page["next_after"]
    assert seen == [1, 2, 3, 4, 5, 6, 7]


def test_offline_runs_skip_the_fixer_unless_asked(owner, problem):
    assert services.create_run(owner, problem).config["search"]["fix_attempts"] == 0
    asked = services.create_run(owner, problem, search={"fix_attempts": 2})
    assert asked.config["search"]["fix_attempts"] == 2
