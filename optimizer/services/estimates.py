"""Upper bounds for a run before it starts: agent calls per role and an LLM run's tokens and cost."""

from __future__ import annotations

from typing import Any

from django.db.models import Avg, Count

from optimizer import conf
from optimizer.models import (
    AgentCall,
)
from optimizer.services.defaults import search_config

# Tokens per call assumed for an estimate when no earlier LLM run has measured them (prompt, completion).
# Rough figures for our prompt templates with a mini kernel and a full memory; replaced by measurements
# as soon as the installation has made calls of that role.
ASSUMED_TOKENS_PER_CALL = {
    "planner": (6000, 1500),
    "executor": (7000, 3000),
    "fixer": (7500, 3000),
    "summarizer": (4000, 500),
}



def max_agent_calls(search: dict[str, Any] | None) -> dict[str, int]:
    """An upper bound on the model calls per role a run with these parameters makes (retries excluded)."""
    config = search_config(search)
    beam_sizes = [1] + [config.beam_width] * (config.iterations - 1)  # iteration 1 starts from one kernel
    planner = sum(beam_sizes)
    executor = planner * config.plans_per_candidate * config.samples_per_plan
    return {
        "planner": planner,
        "executor": executor,
        "fixer": executor * config.fix_attempts,
        "summarizer": config.iterations * config.rewrites_per_iteration,
    }


def estimate_llm_cost(search: dict[str, Any] | None, models: dict[str, str] | None = None) -> dict[str, Any]:
    """Upper bound of an LLM run's tokens and cost, per role, for the run form.

    Tokens per call are the averages this installation measured for the role (AgentCall rows), or
    ASSUMED_TOKENS_PER_CALL where none exist; `measured` says which. Unknown models cost 0.
    """
    calls = max_agent_calls(search)
    roles = conf.llm_roles(models)
    prices = conf.price_table()
    measured = {
        row["role"]: row
        for row in AgentCall.objects.filter(error="").values("role").annotate(
            n=Count("id"), prompt=Avg("prompt_tokens"), completion=Avg("completion_tokens")
        )
    }
    per_role: dict[str, dict[str, Any]] = {}
    for role, count in calls.items():
        row = measured.get(role)
        prompt, completion = (row["prompt"], row["completion"]) if row else ASSUMED_TOKENS_PER_CALL[role]
        model = roles[role].model if role in roles else ""
        input_price, output_price = prices.get(model, (0.0, 0.0))
        per_role[role] = {
            "model": model,
            "max_calls": count,
            "prompt_tokens": round(count * prompt),
            "completion_tokens": round(count * completion),
            "cost_usd": count * (prompt * input_price + completion * output_price) / 1_000_000,
            "measured": row is not None,
        }
    return {
        "roles": per_role,
        "total_tokens": sum(r["prompt_tokens"] + r["completion_tokens"] for r in per_role.values()),
        "total_cost_usd": sum(r["cost_usd"] for r in per_role.values()),
    }
