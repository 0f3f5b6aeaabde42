"""The run form, the run page and its fragments, the runs list: what each person may see and do."""

from __future__ import annotations

from typing import Any

import pytest

from optimizer import services
from optimizer.events import render_event
from optimizer.models import Run, RunEvent, RunStatus
from tests.pages.conftest import BASELINE

pytestmark = pytest.mark.django_db

SMALL = {"iterations": "2", "beam_width": "1", "plans_per_candidate": "2", "samples_per_plan": "1",
         "memory_size": "4", "seed": "0"}


def _form(problem: Any, **extra: str) -> dict[str, str]:
    return {"problem": str(problem.pk), "start": "baseline", "platform": "trn1", "backend": "simulator",
            "agent": "offline", **SMALL, **extra}


def test_the_run_form_queues_an_offline_run_from_the_baseline(login, engineer, problem) -> None:
    response = login(engineer).post("/runs/new/", _form(problem))
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.owner == engineer and run.start_kernel == problem.baseline_kernel and run.status == RunStatus.QUEUED
    assert run.config["search"]["iterations"] == 2 and run.config["search"]["plans_per_candidate"] == 2


def test_the_run_form_refuses_someone_elses_kernel_as_the_start(login, engineer, teammate, problem) -> None:
    from benchmark.services import create_kernel

    theirs, _ = create_kernel(problem, "def kernel(x):\n    return x * 1\n", author=teammate)
    response = login(engineer).post("/runs/new/", _form(problem, start=str(theirs.pk)))
    assert response.status_code == 200 and not Run.objects.exists()
    assert "Select a valid choice" in response.content.decode()


def test_the_run_form_asks_for_source_when_uploading_new(login, engineer, problem) -> None:
    response = login(engineer).post("/runs/new/", _form(problem, start="upload", source="  "))
    assert response.status_code == 200 and not Run.objects.exists()
    assert "Paste the kernel source" in response.content.decode()


def test_the_run_form_rejects_a_zero_beam(login, engineer, problem) -> None:
    response = login(engineer).post("/runs/new/", _form(problem, beam_width="0"))
    assert response.status_code == 200 and not Run.objects.exists()
    assert "greater than or equal to 1" in response.content.decode()


def test_a_signed_in_person_without_the_engineer_role_gets_403_on_the_run_form(login, viewer) -> None:
    assert login(viewer).get("/runs/new/").status_code == 403


def test_the_estimate_for_an_llm_run_names_calls_and_cost(login, engineer, problem, settings) -> None:
    settings.ACCELOPT_LLM_ROLES = {"default": {"model": "priced-model"}}
    settings.ACCELOPT_LLM_PRICES = {"priced-model": [1.0, 2.0]}
    query = {**_form(problem), "agent": "llm"}
    html = login(engineer).get("/runs/new/estimate/", query).content.decode()
    assert "planner 2 calls (priced-model)" in html and "$" in html


def test_a_private_run_page_is_404_for_another_engineer_and_anonymous(client, login, engineer, teammate, problem) -> None:
    run = services.create_run(engineer, problem)
    assert client.get(f"/runs/{run.pk}/").status_code == 404
    assert login(teammate).get(f"/runs/{run.pk}/").status_code == 404
    for fragment in ("state", "chart", "badge"):
        assert client.get(f"/runs/{run.pk}/{fragment}/").status_code == 404


def test_a_public_run_page_is_readable_by_anonymous_visitors_without_controls(client, engineer, problem) -> None:
    run = services.create_run(engineer, problem, is_public=True)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'ws-connect="/ws/runs/{run.pk}/?format=html&amp;after=0"' in html
    assert "Cancel" not in html


def test_only_the_owner_can_cancel_a_run(login, engineer, teammate, problem) -> None:
    run = services.create_run(engineer, problem, is_public=True)
    assert login(teammate).post(f"/runs/{run.pk}/cancel/").status_code == 403
    assert login(engineer).post(f"/runs/{run.pk}/cancel/").status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


def test_the_owner_pauses_a_queued_run_and_sees_resume(login, engineer, problem) -> None:
    run = services.create_run(engineer, problem)
    html = login(engineer).post(f"/runs/{run.pk}/pause/", HTTP_HX_REQUEST="true").content.decode()
    assert "Resume" in html and Run.objects.get(pk=run.pk).status == RunStatus.PAUSED


def test_the_runs_list_separates_mine_from_the_teams_and_public(login, engineer, teammate, problem) -> None:
    mine = services.create_run(engineer, problem)
    theirs_public = services.create_run(teammate, problem, is_public=True)
    theirs_private = services.create_run(teammate, problem)
    client = login(engineer)
    mine_html = client.get("/runs/?scope=mine").content.decode()
    team_html = client.get("/runs/?scope=team").content.decode()
    assert f'href="/runs/{mine.pk}/"' in mine_html and f'href="/runs/{theirs_public.pk}/"' not in mine_html
    assert f'href="/runs/{theirs_public.pk}/"' in team_html and f'href="/runs/{theirs_private.pk}/"' not in team_html


def test_the_runs_list_filters_by_status_and_says_so_when_empty(login, engineer, problem) -> None:
    services.create_run(engineer, problem)
    html = login(engineer).get("/runs/?scope=mine&status=succeeded").content.decode()
    assert "No runs match these filters" in html


def test_the_runs_list_costs_a_fixed_number_of_queries(login, engineer, problem, django_assert_max_num_queries) -> None:
    for _ in range(5):
        services.create_run(engineer, problem)
    client = login(engineer)
    with django_assert_max_num_queries(8):
        assert client.get("/runs/?scope=mine").status_code == 200


def test_an_evaluation_event_updates_the_candidate_it_names(engineer, problem) -> None:
    run = services.create_run(engineer, problem)
    event = RunEvent(run=run, seq=9, kind="candidate.evaluated", payload={
        "iteration": 1, "sha": "ab" * 32, "candidate_keys": ["1.0.2.0"], "correct": False,
        "error_kind": "incorrect", "error_message": "relative L2 error 0.5 > 2e-05",
    })
    html = render_event(event)
    assert f'hx-swap-oob="beforeend:#run-{run.pk}-events"' in html and 'data-seq="9"' in html
    assert f'id="run-{run.pk}-cand-1-0-2-0-eval" hx-swap-oob="true"' in html
    assert "relative L2 error 0.5" in html


def test_a_kernel_diff_is_only_served_for_kernels_of_that_run(login, engineer, problem) -> None:
    from benchmark.services import create_kernel

    run = services.create_run(engineer, problem, is_public=True)
    written, _ = create_kernel(problem, "def kernel(x):\n    return x + 0\n", parent=problem.baseline_kernel,
                               run_id=run.pk)
    stranger, _ = create_kernel(problem, "def kernel(x):\n    return x - 0\n", parent=problem.baseline_kernel)
    client = login(engineer)
    html = client.get(f"/runs/{run.pk}/kernels/{written.pk}/diff/").content.decode()
    assert "return x + 0" in html and "return x" in html and 'class="diff-changed"' in html
    assert client.get(f"/runs/{run.pk}/kernels/{stranger.pk}/diff/").status_code == 404
    assert client.get(f"/runs/{run.pk}/candidates/9.9.9.9/").status_code == 404


def test_a_finished_run_page_shows_its_best_kernel_lineage_and_memory_entries(login, engineer, problem) -> None:
    from benchmark.services import create_kernel
    from memory.services import add_entry

    run = services.create_run(engineer, problem)
    child, _ = create_kernel(problem, "def kernel(x):\n    return x + 0\n", parent=problem.baseline_kernel,
                             run_id=run.pk, name="child")
    best, _ = create_kernel(problem, "def kernel(x):\n    return x + 0 + 0\n", parent=child, run_id=run.pk,
                            name="grandchild")
    Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, best_kernel=best, start_latency_ms=2.0,
                                         best_latency_ms=1.0, best_peak_fraction=0.25)
    add_entry(title="Add zero twice", summary="s", slow_kernel="a", fast_kernel="b", speedup=2.0,
              source_run_id=run.pk)
    html = login(engineer).get(f"/runs/{run.pk}/").content.decode()
    assert "<h2>Best kernel</h2>" in html and "2.00×" in html and "25.0%" in html
    lineage = html[html.index('<ol class="lineage">'):]
    start, middle, end = (lineage.index(name) for name in ("double baseline", "child", "grandchild"))
    assert start < middle < end
    assert f'href="/runs/{run.pk}/kernels/{best.pk}/diff/"' in lineage
    assert "Add zero twice" in html and "1 entry holds this run's lessons" in html
    # Its stream only replays what happened: the label says so, and run_stream.js never turns it to "live".
    assert 'data-finished="1">finished: its events, replayed</span>' in html


def test_a_kernel_held_for_review_is_never_shown_as_correct(login, engineer, problem) -> None:
    from optimizer.models import Candidate, Iteration

    run = services.create_run(engineer, problem, is_public=True)
    held = {"iteration": 1, "sha": "cd" * 32, "candidate_keys": ["1.0.0.0"], "correct": True, "latency_ms": 0.01,
            "error_kind": "suspicious", "held_for_review": True,
            "error_message": "held for review: speedup 40.00x over its parent exceeds suspicious_speedup=10.0"}
    html = render_event(RunEvent(run=run, seq=5, kind="candidate.evaluated", payload=held))
    assert "held for review" in html and 'badge good">correct' not in html
    iteration = Iteration.objects.create(run=run, index=1, status="finished")
    Candidate.objects.create(iteration=iteration, key="1.0.0.0", parent_kernel=problem.baseline_kernel,
                             status="evaluated", correct=True, latency_ms=0.01, error=held["error_message"])
    html = login(engineer).get(f"/runs/{run.pk}/iterations/1/").content.decode()
    assert "held for review" in html and 'badge good">correct' not in html


def test_the_runs_list_pager_keeps_the_scope_and_filters(login, engineer, problem, monkeypatch) -> None:
    from optimizer import views

    monkeypatch.setattr(views, "RUNS_PER_PAGE", 1)
    for _ in range(2):
        services.create_run(engineer, problem)
    html = login(engineer).get("/runs/", {"scope": "mine", "status": "queued", "problem": "dou"}).content.decode()
    assert 'href="?scope=mine&amp;status=queued&amp;problem=dou&amp;page=2"' in html


def test_the_run_form_shown_again_with_errors_keeps_the_llm_estimate(login, engineer, problem, settings) -> None:
    settings.ACCELOPT_LLM_ROLES = {"default": {"model": "priced-model"}}
    settings.ACCELOPT_LLM_PRICES = {"priced-model": [1.0, 2.0]}
    response = login(engineer).post("/runs/new/", _form(problem, agent="llm", start="upload", source=""))
    html = response.content.decode()
    assert response.status_code == 200 and "Paste the kernel source" in html
    assert "planner 2 calls (priced-model)" in html and "no LLM calls" not in html


def test_the_owner_withdraws_a_pending_pause(login, engineer, problem) -> None:
    run = services.create_run(engineer, problem)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, pause_requested=True)
    client = login(engineer)
    assert "Keep running" in client.get(f"/runs/{run.pk}/state/").content.decode()
    html = client.post(f"/runs/{run.pk}/resume/", HTTP_HX_REQUEST="true").content.decode()
    run.refresh_from_db()
    assert not run.pause_requested and run.status == RunStatus.RUNNING and ">Pause</button>" in html


def test_the_run_form_starts_from_a_pasted_kernel_uploaded_for_its_author(login, engineer, problem) -> None:
    source = BASELINE + "# pasted into the run form\n"
    response = login(engineer).post("/runs/new/", _form(problem, start="upload", source=source))
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.start_kernel.source == source.strip() and run.start_kernel.author == engineer
    assert run.start_kernel.name == "uploaded from the run form" and run.start_kernel.origin == "uploaded"
