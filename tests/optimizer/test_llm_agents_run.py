"""A whole run driven by the real `openai` client against the scripted server."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

import pytest

from engine.agents.llm import LLMClient, ModelPrice, RoleSettings
from engine.agents.llm_agents import LLMAgents
from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    SearchConfig,
)
from tests.optimizer.scripted_openai import Reply, ScriptedOpenAI

START = "import neuronxcc.nki as nki\n\nLATENCY_MS = 10.0\n\n@nki.jit\ndef kernel(x):\n    return x\n"
PRICE = ModelPrice(2.0, 8.0)


def kernel_with(latency: float) -> str:
    return START.replace("LATENCY_MS = 10.0", f"LATENCY_MS = {latency}")


@dataclass
class LatencyEvaluator:
    """Reads LATENCY_MS from the source; every kernel is correct."""

    seen: list[str] = field(default_factory=list)

    async def evaluate_many(self, sources):
        from tests.optimizer.fakes import FakeResult

        self.seen.extend(sources)
        results = []
        for source in sources:
            latency = float(re.search(r"LATENCY_MS = ([\d.]+)", source).group(1))
            results.append(FakeResult(True, latency, peak_fraction=0.5 / latency,
                                      profile={"hbm_read_bytes": latency * 1e6, "vector_engine_active_time_percent": 0.25}))
        return results


class ModelBehaviour:
    """Answers by role (from the system prompt) and plan; injects one of each failure once."""

    PLANS = ("Halve the work: process two tiles per instruction.", "Double the work: split every tile in two.",
             "Rambling plan", "Cut-off plan")

    def __init__(self) -> None:
        self.failed_once: set[str] = set()
        self.plans_given: dict[str, int] = {}  # per kernel: the Planner is asked once per plan
        self.lock = threading.Lock()

    def once(self, key: str) -> bool:
        if key in self.failed_once:
            return False
        self.failed_once.add(key)
        return True

    def __call__(self, body) -> Reply:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if system.startswith("You are the Planner"):
            if "Kernel to improve" in user and self.once("planner-500"):
                return Reply(status=500)  # retried by the client
            kernel = re.search(r"LATENCY_MS = ([\d.]+)", user).group(1)
            with self.lock:  # the calls for one kernel arrive together: each gets the next plan
                given = self.plans_given.get(kernel, 0)
                self.plans_given[kernel] = given + 1
            return Reply(f"Here is my plan.\n1. {self.PLANS[given % len(self.PLANS)]}\n",
                         prompt_tokens=900, completion_tokens=120)
        if system.startswith("You are the Executor"):
            parent = float(re.search(r"LATENCY_MS = ([\d.]+)", user).group(1))
            if "Halve the work" in user:
                return Reply(f"Applied.\n```python\n{kernel_with(parent / 2)}```\n", 1500, 400)
            if "Double the work" in user:
                if self.once("executor-timeout"):
                    return Reply("too late", delay_s=3.5)  # the client times out and retries
                return Reply(f"```python\n{kernel_with(parent * 2)}```", 1500, 420)
            if "Rambling" in user:
                return Reply("I think the kernel is already optimal, no code today.", 1400, 30)
            return Reply("```python\nimport neuronxcc.nki as nki\n@nki.jit\ndef kernel(x):\n    retu",
                         1400, 4096, finish_reason="length")
        if system.startswith("You are the Summarizer"):
            if "made the kernel slower" in user:
                return Reply("**Do not split tiles**\nSplitting every tile doubles the instruction count and "
                             "the fixed cost per instruction.", 700, 60)
            return Reply("**Process two tiles per instruction**\nLarger free sizes amortize the fixed cost of "
                         "each instruction.\nBefore: two calls. After: one call.", 700, 80)
        return Reply(status=400)


async def test_an_llm_driven_run_learns_from_fast_and_slow_kernels_and_survives_bad_replies(problem):
    behaviour = ModelBehaviour()
    with ScriptedOpenAI(behaviour) as server:
        role = RoleSettings(model="scripted-coder", base_url=server.base_url, api_key="sk-x", timeout_s=2.0)
        client = LLMClient({r: role for r in ("planner", "executor", "fixer", "summarizer")},
                           prices={"scripted-coder": PRICE}, max_retries=2, backoff_s=0.0)
        events, memory = ListEventSink(), ListOptimizationMemory()
        config = SearchConfig(iterations=2, beam_width=2, plans_per_candidate=4, samples_per_plan=1,
                              rewrites_per_iteration=4, fix_attempts=1, seed=5)
        search = await BeamSearch.open(problem=problem, start_source=START, config=config,
                                       agents=LLMAgents(client), evaluator=LatencyEvaluator(), memory=memory,
                                       events=events, store=InMemoryCheckpoint())
        state = await search.run()
        await client.close()

    assert state.status == "succeeded"
    # The faster kernel (5 ms) became the beam, then 2.5 ms in iteration 2.
    assert "LATENCY_MS = 2.5" in state.kernels[state.best.sha]
    assert state.history[0]["best_latency_ms"] == 5.0
    titles = {(m.polarity, m.title) for m in memory.items}
    assert ("positive", "Process two tiles per instruction") in titles
    assert ("negative", "Do not split tiles") in titles
    # Garbage and truncated replies are counted, each iteration still finished.
    unusable = [p for k, p in events.events if k == "agent.unusable"]
    # 2 bad plans per beam kernel: 1 kernel in iteration 1, 2 in iteration 2.
    assert len(unusable) == 6 and state.totals.unusable_replies == 6
    assert any("never closed" in p["reason"] and "max-tokens" in p["reason"] for p in unusable)
    assert any("no fenced Python" in p["reason"] for p in unusable)
    # The planner in iteration 2 saw the kernel, its profile with meanings, and the new memory.
    second = [r.text for r in server.requests
              if r.body["messages"][0]["content"].startswith("You are the Planner") and "LATENCY_MS = 5.0" in r.text]
    assert second
    assert "hbm_read_bytes | 5e+06 | bytes read from device memory" in second[0]
    assert "Process two tiles per instruction" in second[0] and "Do not split tiles" in second[0]
    assert "def forward(x)" in second[0]  # the problem reference
    # Token and cost totals match what the server served.
    assert state.totals.prompt_tokens == server.usage_served["prompt_tokens"]
    assert state.totals.completion_tokens == server.usage_served["completion_tokens"]
    assert state.totals.cost_usd == pytest.approx(
        PRICE.cost(server.usage_served["prompt_tokens"], server.usage_served["completion_tokens"]))
    # Retried failures are visible: the 500 and the timeout succeeded on a second attempt.
    calls = [p["call"] for k, p in events.events if k == "agent.call"]
    assert sorted(c["attempts"] for c in calls if c["attempts"] > 1) == [2, 2]
    assert all("sk-x" not in str(c) for c in calls)
