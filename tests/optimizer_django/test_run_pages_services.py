"""What the run pages read: the best kernel's lineage and the cost estimate on the run form."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from optimizer import services
from optimizer.models import AgentCall
from optimizer.worker import RunWorker

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_lineage_leads_from_the_best_kernel_back_to_the_start(fake_pipeline, problem, owner, fake_agents_factory):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    async_to_sync(RunWorker(agents_factory=fake_agents_factory).step)()
    run.refresh_from_db()
    chain = services.run_lineage(run)
    assert chain[0] == run.best_kernel and chain[-1] == run.start_kernel
    latencies = [k.evaluations.get().latency_ms for k in chain]
    assert latencies == sorted(latencies)  # each step of the lineage made it faster: 6.4, 8, 10
    assert len(chain) == 3


def test_the_call_bound_counts_one_planner_call_per_beam_kernel_and_iteration():
    calls = services.max_agent_calls({"iterations": 3, "beam_width": 2, "plans_per_candidate": 4,
                                      "samples_per_plan": 2, "fix_attempts": 1, "rewrites_per_iteration": 4})
    assert calls == {"planner": 1 + 2 + 2, "executor": 5 * 4 * 2, "fixer": 40, "summarizer": 12}


def test_the_estimate_uses_measured_tokens_once_there_are_calls(settings, owner, problem):
    settings.ACCELOPT_LLM_ROLES = {"default": {"model": "priced-model"}}
    settings.ACCELOPT_LLM_PRICES = {"priced-model": [1.0, 2.0]}
    search = {"iterations": 1, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1}
    assumed = services.estimate_llm_cost(search)
    assert assumed["roles"]["planner"]["measured"] is False
    run = services.create_run(owner, problem)
    AgentCall.objects.create(run=run, role="planner", model="priced-model", prompt_tokens=1000, completion_tokens=100)
    estimate = services.estimate_llm_cost(search)["roles"]["planner"]
    assert estimate["measured"] is True and estimate["max_calls"] == 1
    assert estimate["cost_usd"] == pytest.approx((1000 * 1.0 + 100 * 2.0) / 1e6)
