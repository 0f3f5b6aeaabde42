"""Budgets in the pure search: a run that reaches a cap stops cleanly as "stopped", keeping what it found."""

from __future__ import annotations

import pytest

from engine.agents.base import AgentResult
from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    SearchConfig,
)
from engine.search.budget import Budget, Usage, budget_reached, progress
from engine.search.state import RunState, reopen_stopped
from tests.optimizer.fakes import FakeAgents, FakeEvaluator, fake_kernel

CONFIG = SearchConfig(iterations=3, beam_width=2, plans_per_candidate=3, samples_per_plan=2, memory_size=4,
                      rewrites_per_iteration=4, fix_attempts=1, seed=7, agent_batch=2, evaluation_batch=4)


async def run_with(problem, budget, agents=None, config=CONFIG):
    events, memory, evaluator, store = ListEventSink(), ListOptimizationMemory(), FakeEvaluator(), InMemoryCheckpoint()
    search = await BeamSearch.open(problem=problem, start_source=fake_kernel(10.0), config=config,
                                   agents=agents or FakeAgents(), evaluator=evaluator, memory=memory,
                                   events=events, store=store, budget=budget)
    state = await search.run()
    return search, state, events, memory, evaluator, store


async def test_an_evaluation_cap_stops_the_run_exactly_there_keeping_what_it_found(problem):
    # Iteration 1 takes 9 evaluations (start, 6 kernels, 2 fixes); the cap falls inside iteration 2.
    _, state, events, memory, evaluator, store = await run_with(problem, Budget(max_evaluations=12))
    assert state.status == "stopped"
    assert state.stop["budget"] == "max_evaluations" and state.stop["used"] == 12
    assert len(evaluator.evaluated) == 12 == state.totals.evaluations  # never one more than the cap
    # Iteration 1's memory entries are kept; the stopped iteration asks the Summarizer for nothing.
    assert memory.items and all(item.provenance["iteration"] == 1 for item in memory.items)
    # Iteration 2's first evaluations were its "faster" kernels (x0.8 of 8.0): they entered the beam.
    assert state.best.latency_ms == pytest.approx(6.4)
    assert [h["iteration"] for h in state.history] == [1, 2] and state.history[-1]["stopped"] == "max_evaluations"
    kinds = [kind for kind, _ in events.events]
    assert kinds[-1] == "run.stopped" and "run.finished" not in kinds
    stopped = events.events[-1][1]
    assert stopped["reason"] == "budget" and stopped["budget"]["label"] == "evaluations"
    assert "evaluations budget reached: 12 of 12" in stopped["message"]
    # The checkpoint holds the stop, and a reopened search does nothing more.
    again = await BeamSearch.open(problem=problem, start_source=fake_kernel(10.0), config=CONFIG,
                                  agents=FakeAgents(), evaluator=evaluator, memory=memory, events=events,
                                  store=store, budget=Budget(max_evaluations=12))
    assert again.state.stop == state.stop and not await again.step()


async def test_a_dollar_cap_stops_within_one_step_of_calls(problem):
    # The fake agents charge $0.001 per call; a step makes at most agent_batch=2 calls.
    _, state, events, *_ = await run_with(problem, Budget(max_cost_usd=0.005))
    assert state.status == "stopped" and state.stop["budget"] == "max_cost_usd"
    assert 0.005 <= state.totals.cost_usd <= 0.005 + 2 * 0.001 + 1e-9
    assert "dollars budget reached" in events.events[-1][1]["message"]


async def test_a_token_cap_and_a_wall_time_cap_stop_the_run(problem):
    _, state, *_ = await run_with(problem, Budget(max_tokens=600))  # 150 tokens per call
    assert state.stop["budget"] == "max_tokens" and 600 <= state.totals.prompt_tokens + state.totals.completion_tokens
    _, state, *_ = await run_with(problem, Budget(max_wall_time_s=1e-9))
    assert state.status == "stopped" and state.stop["budget"] == "max_wall_time_s"
    assert state.totals.evaluations == 1  # the first step (the start kernel's evaluation) ran, then it stopped


class UnpricedAgents(FakeAgents):
    """Agents whose server reports no usage: every call's cost is unknown (None)."""

    def _call(self, role, prompt):
        calls = super()._call(role, prompt)
        for call in calls:
            call.cost_usd = None
        return calls


async def test_unknown_cost_never_counts_as_zero_and_the_dollar_cap_is_marked_unenforceable(problem):
    config = SearchConfig(iterations=1, beam_width=1, plans_per_candidate=2, samples_per_plan=1, fix_attempts=0)
    _, state, *_ = await run_with(problem, Budget(max_cost_usd=0.000001), agents=UnpricedAgents(), config=config)
    assert state.status == "succeeded"  # no known cost reached the cap...
    usage = Usage.from_totals(state.totals)
    assert usage.cost_unknown and usage.unpriced_calls == state.totals.calls
    row = progress(Budget(max_cost_usd=0.000001, max_evaluations=10), usage)
    assert [r["name"] for r in row] == ["max_cost_usd", "max_evaluations"]
    assert row[0]["enforceable"] is False and row[1]["enforceable"] is True  # ...and the UI must say so


def test_budget_values_are_checked_with_clear_errors():
    assert Budget.from_dict({"max_tokens": "", "max_cost_usd": None}).empty
    assert Budget.from_dict({"max_cost_usd": "0.5"}).max_cost_usd == 0.5
    with pytest.raises(ValueError, match="max_evaluations must be above 0"):
        Budget(max_evaluations=0)
    with pytest.raises(ValueError, match="unknown budget fields"):
        Budget.from_dict({"max_dollars": 1})
    with pytest.raises(ValueError, match="max_tokens must be a number"):
        Budget.from_dict({"max_tokens": "lots"})
    assert budget_reached(Budget(max_tokens=10), Usage(tokens=9)) is None
    assert budget_reached(Budget(max_tokens=10), Usage(tokens=10)).budget == "max_tokens"


def test_a_checkpoint_from_before_budgets_still_loads(problem):
    state = RunState(config=CONFIG, start_sha="x", kernels={"x": "src"}).to_dict()
    del state["stop"], state["totals"]["wall_time_s"]
    assert RunState.from_dict(state).stop == {}


async def test_an_agent_reply_with_no_value_still_counts_against_the_budget(problem):
    class Silent(FakeAgents):
        async def plan(self, request):
            return AgentResult(None, self._call("planner", ""), unusable="no plans")

    _, state, *_ = await run_with(problem, Budget(max_cost_usd=0.0015), agents=Silent())
    assert state.status == "stopped" and state.totals.calls >= 2


@pytest.mark.parametrize("budget", [Budget(max_evaluations=1), Budget(max_evaluations=5), Budget(max_evaluations=12),
                                    Budget(max_evaluations=20), Budget(max_cost_usd=0.003), Budget(max_cost_usd=0.011)])
async def test_a_stopped_run_continued_without_a_cap_ends_as_if_it_had_never_stopped(problem, budget):
    # The reference: the same search with no budget at all.
    _, whole, _, whole_memory, whole_evaluator, _ = await run_with(problem, None)
    search, stopped, events, memory, evaluator, store = await run_with(problem, budget)
    assert stopped.status == "stopped"
    if budget.max_evaluations:
        assert len(evaluator.evaluated) == budget.max_evaluations
    store.state = reopen_stopped(store.state)
    again = await BeamSearch.open(problem=problem, start_source=fake_kernel(10.0), config=CONFIG,
                                  agents=FakeAgents(), evaluator=evaluator, memory=memory, events=events,
                                  store=store, budget=None)
    state = await again.run()
    assert state.status == "succeeded"
    # Nothing evaluated before the stop is evaluated again, and nothing the whole run evaluated is missing.
    assert len(evaluator.evaluated) == len(set(evaluator.evaluated)) == len(whole_evaluator.evaluated)
    assert sorted(evaluator.evaluated) == sorted(whole_evaluator.evaluated)
    assert state.best.latency_ms == whole.best.latency_ms and state.history == whole.history
    assert state.totals.evaluations == whole.totals.evaluations
    assert state.totals.calls == whole.totals.calls and state.totals.cost_usd == pytest.approx(whole.totals.cost_usd)
    assert sorted(item.key for item in memory.items) == sorted(item.key for item in whole_memory.items)


def test_only_a_stopped_checkpoint_can_be_reopened():
    with pytest.raises(ValueError, match="not stopped by a budget"):
        reopen_stopped({"status": "succeeded"})


async def test_a_checkpoint_stopped_before_the_stop_said_where_goes_on_with_the_next_iteration(problem):
    _, stopped, events, memory, evaluator, store = await run_with(problem, Budget(max_evaluations=12))
    assert stopped.iteration == 2
    del store.state["stop"]["resume"]  # as a run stopped by an older version left it
    store.state = reopen_stopped(store.state)
    assert store.state["phase"] == "next" and [h["iteration"] for h in store.state["history"]] == [1]
    again = await BeamSearch.open(problem=problem, start_source=fake_kernel(10.0), config=CONFIG,
                                  agents=FakeAgents(), evaluator=evaluator, memory=memory, events=events,
                                  store=store, budget=None)
    state = await again.run()
    assert state.status == "succeeded" and [h["iteration"] for h in state.history] == [1, 2, 3]
    assert len(evaluator.evaluated) == len(set(evaluator.evaluated)) > 12
