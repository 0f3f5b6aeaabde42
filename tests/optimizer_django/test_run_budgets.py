"""Run budgets end to end: a run that reaches its dollar cap (the scripted OpenAI-compatible server reports token
counts) or its evaluation cap stops as "stopped: budget", and everything found before the stop remains."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from benchmark.services import create_kernel
from memory.models import MemoryEvidence
from optimizer import services
from optimizer.models import AgentCall, Candidate, CandidateStatus, Run, RunStatus
from optimizer.worker import RunWorker
from tests.optimizer.scripted_openai import ScriptedOpenAI
from tests.optimizer_django.conftest import SMALL_SEARCH
from tests.optimizer_django.test_llm_run import API_KEY, MODEL, PRICE, Model, python_kernel

pytestmark = pytest.mark.django_db(transaction=True)

LLM_SEARCH = {"iterations": 4, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1, "fix_attempts": 0,
              "memory_size": 4, "rewrites_per_iteration": 2}


@pytest.fixture
def scripted_server(settings):
    with ScriptedOpenAI(Model()) as server:
        settings.ACCELOPT_LLM_ROLES = {"default": {"model": MODEL, "base_url": server.base_url, "api_key": API_KEY}}
        settings.ACCELOPT_LLM_PRICES = {MODEL: list(PRICE)}
        settings.ACCELOPT_LLM_BACKOFF_MS = 0
        yield server


def drive(agents_factory=None) -> None:
    assert async_to_sync(RunWorker(agents_factory=agents_factory).step)()


def assert_nothing_lost(run: Run) -> None:
    """Every kernel written before the stop is a candidate row; every one evaluated keeps its evaluation."""
    candidates = Candidate.objects.filter(iteration__run=run)
    assert candidates.exists()
    for candidate in candidates.filter(status=CandidateStatus.EVALUATED):
        assert candidate.evaluation_id is not None and candidate.kernel_id is not None
    assert run.best_kernel_id is not None and run.best_latency_ms < run.start_latency_ms


def test_a_run_stops_on_its_dollar_cap_keeping_its_kernels_memory_and_calls(fake_pipeline, problem, owner,
                                                                           scripted_server, client):
    start, _ = create_kernel(problem, python_kernel(10.0))
    # What the first iteration costs, measured on an unbudgeted run with the same script and seed.
    probe = services.create_run(owner, problem, start_kernel=start, agent="llm", search={**LLM_SEARCH, "iterations": 1})
    drive()
    first_iteration = sum(AgentCall.objects.filter(run=probe).values_list("cost_usd", flat=True))
    assert first_iteration > 0

    cap = first_iteration * 1.01  # reached early in iteration 2
    run = services.create_run(owner, problem, start_kernel=start, agent="llm", search=LLM_SEARCH,
                              budget={"max_cost_usd": cap})
    drive()
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED and run.stopped_by_budget == "max_cost_usd", run.error_message
    assert cap <= run.cost_usd < 2 * first_iteration  # stopped within a step of the cap, not at the end
    assert run.current_iteration == 2 and run.finished is not None
    assert_nothing_lost(run)
    # Iteration 1's lessons stay (as evidence of the probe's entries: the same lessons, learned again).
    assert MemoryEvidence.objects.filter(source_run_id=run.pk).exists()
    assert sum(AgentCall.objects.filter(run=run).values_list("cost_usd", flat=True)) == pytest.approx(run.cost_usd)
    stopped = run.events.get(kind="run.stopped")
    assert stopped.payload["budget"]["budget"] == "max_cost_usd" and stopped.payload["best_sha"]

    client.force_login(owner)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "stopped: budget" in page and "dollars budget was reached" in page
    assert 'data-budget="max_cost_usd"' in page
    api = client.get(f"/api/runs/{run.pk}").json()
    assert api["status"] == "stopped" and api["stopped_by_budget"] == "max_cost_usd"
    assert api["budget"]["max_cost_usd"] == pytest.approx(cap) and api["budget_usage"][0]["reached"] is True


def test_a_run_stops_on_its_evaluation_cap_with_exactly_that_many_evaluations(fake_pipeline, problem, owner,
                                                                            fake_agents_factory, client):
    # Iteration 1 evaluates 5 kernels (start, three plans, one fix): a cap of 7 falls inside iteration 2.
    run = services.create_run(owner, problem, search=SMALL_SEARCH, budget={"max_evaluations": 7})
    drive(fake_agents_factory)
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED and run.stopped_by_budget == "max_evaluations", run.error_message
    assert sum(fake_pipeline.calls.values()) == 7 == run.usage.evaluations
    assert_nothing_lost(run)
    assert MemoryEvidence.objects.filter(source_run_id=run.pk).exists()
    # Iteration 2's two evaluated kernels are in the result: 8 ms x 0.8.
    assert run.best_latency_ms == pytest.approx(6.4)
    assert run.iterations.get(index=2).next_beam_kernel_ids

    client.force_login(owner)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "stopped: budget" in page and "evaluations budget was reached" in page
    assert "Stopped: budget" in client.get(f"/runs/{run.pk}/badge/").content.decode()


def test_the_launch_checks_the_budget_against_the_cost_estimate(problem, owner, settings):
    settings.ACCELOPT_LLM_ROLES = {"default": {"model": MODEL}, "summarizer": {"model": "no-price-model"}}
    settings.ACCELOPT_LLM_PRICES = {MODEL: list(PRICE)}
    run = services.create_run(owner, problem, agent="llm", search=LLM_SEARCH,
                              budget={"max_cost_usd": 0.0001, "max_evaluations": 3})
    notes = " ".join(run.config["budget_notes"])
    assert "above the dollar budget ($0.0001)" in notes
    assert "No price is known for no-price-model" in notes and "cannot be enforced" in notes
    assert "Stops after 3 evaluations, of up to 9" in notes
    assert (run.max_cost_usd, run.max_evaluations, run.max_tokens) == (0.0001, 3, None)


def test_the_offline_agent_is_told_token_and_dollar_caps_never_apply(problem, owner):
    run = services.create_run(owner, problem, budget={"max_tokens": 1000})
    assert run.config["budget_notes"] == ["The offline agent makes no LLM calls: the token and dollar budgets never apply."]


def test_a_bad_budget_is_refused_by_the_api_naming_the_field(client, owner, problem):
    client.force_login(owner)
    response = client.post("/api/runs", {"problem": "double:mini", "budget": {"max_evaluations": 0}},
                           content_type="application/json")
    assert response.status_code == 400 and "max_evaluations must be above 0" in response.json()["detail"]
    response = client.post("/api/runs", {"problem": "double:mini", "budget": {"max_evaluations": 5},
                                         "search": {"strategy": "repeated_sampling"}}, content_type="application/json")
    assert response.status_code == 201
    body = response.json()
    assert body["budget"]["max_evaluations"] == 5 and body["config"]["search"]["strategy"] == "repeated_sampling"


def test_the_run_form_takes_a_strategy_and_budgets(client, owner, problem):
    client.force_login(owner)
    form = client.get("/runs/new/").content.decode()
    assert 'name="strategy"' in form and 'name="max_cost_usd"' in form and 'name="max_evaluations"' in form
    response = client.post("/runs/new/", {
        "problem": problem.pk, "start": "baseline", "platform": "trn1", "backend": "simulator", "agent": "offline",
        "iterations": 2, "beam_width": 2, "plans_per_candidate": 2, "samples_per_plan": 1, "memory_size": 4,
        "seed": 0, "strategy": "repeated_sampling", "max_evaluations": 4, "max_wall_time_s": 600,
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    assert run.config["search"]["strategy"] == "repeated_sampling"
    assert (run.max_evaluations, run.max_wall_time_s, run.max_cost_usd) == (4, 600.0, None)
    estimate = client.get("/runs/new/estimate/", {"agent": "offline", "iterations": 2, "beam_width": 2,
                                                  "plans_per_candidate": 2, "samples_per_plan": 1, "memory_size": 4,
                                                  "seed": 0, "max_evaluations": 2, "problem": problem.pk,
                                                  "start": "baseline"}).content.decode()
    assert "Stops after 2 evaluations" in estimate
