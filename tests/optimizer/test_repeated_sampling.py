"""The repeated-sampling strategy (the paper's baseline): independent samples from the start kernel, no beam,
for the same budget as beam search."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from engine.agents.base import PlanRequest, WriteRequest
from engine.agents.offline import OfflineAgents
from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    SearchConfig,
)
from engine.search.budget import Budget
from tests.optimizer.fakes import FakeAgents, FakeEvaluator, FakeResult, fake_kernel


def config(strategy: str, **overrides) -> SearchConfig:
    values = dict(iterations=3, beam_width=2, plans_per_candidate=2, samples_per_plan=2, memory_size=4,
                  rewrites_per_iteration=2, fix_attempts=0, seed=3, strategy=strategy)
    values.update(overrides)
    return SearchConfig(**values)


async def search(problem, cfg, budget=None, agents=None, start=None, evaluator=None):
    agents = agents or FakeAgents(plans=("faster", "slower"))
    evaluator = evaluator or FakeEvaluator()
    memory = ListOptimizationMemory()
    s = await BeamSearch.open(problem=problem, start_source=start or fake_kernel(10.0), config=cfg, agents=agents,
                              evaluator=evaluator, memory=memory, events=ListEventSink(),
                              store=InMemoryCheckpoint(), budget=budget)
    state = await s.run()
    return state, agents, evaluator, memory


async def test_every_plan_and_kernel_starts_from_the_start_kernel(problem):
    state, agents, _, memory = await search(problem, config("repeated_sampling"))
    start = fake_kernel(10.0)
    requests = [r for r in agents.requests if isinstance(r, PlanRequest | WriteRequest)]
    assert requests and all(r.kernel.source == start for r in requests)
    assert all(c.parent_sha == state.start_sha for c in state.candidates)
    # The best kernel found is kept (one "faster" step from the start), though nothing is planned from it.
    assert state.status == "succeeded" and state.best.latency_ms == pytest.approx(8.0)
    assert memory.items  # rewrites are still remembered


async def test_it_spends_the_same_agent_calls_and_evaluations_as_beam_search(problem):
    beam, beam_agents, beam_eval, _ = await search(problem, config("beam"))
    sampled, sampled_agents, sampled_eval, _ = await search(problem, config("repeated_sampling"))
    roles = lambda agents: Counter(type(r).__name__ for r in agents.requests)  # noqa: E731
    assert roles(sampled_agents) == roles(beam_agents)
    assert len(sampled_eval.evaluated) == len(beam_eval.evaluated)
    assert sampled.totals.calls == beam.totals.calls and sampled.totals.cost_usd == pytest.approx(beam.totals.cost_usd)
    # The beam compounds its gains (0.8 x 0.8 x 0.8); independent samples cannot.
    assert beam.best.latency_ms == pytest.approx(5.12) and sampled.best.latency_ms == pytest.approx(8.0)


async def test_under_an_evaluation_budget_both_strategies_spend_exactly_the_budget(problem):
    for strategy in ("beam", "repeated_sampling"):
        state, _, evaluator, _ = await search(problem, config(strategy, iterations=10), budget=Budget(max_evaluations=9))
        assert state.status == "stopped" and len(evaluator.evaluated) == 9, strategy


async def test_repeated_sampling_runs_offline_on_a_real_kernel(problem):
    """The offline agent's rewrites of a real NKIBench baseline, through the fake evaluator's bookkeeping only."""
    source = (Path(__file__).parents[2] / "engine/platforms/nki/suites/nkibench/baselines/rope_single_freq_apply.py").read_text()

    class TimedByName(FakeEvaluator):
        async def evaluate_many(self, sources):
            self.evaluated.extend(sources)
            # Correct, and as fast as the start: only the search's bookkeeping is under test here.
            return [FakeResult(True, 10.0, peak_fraction=0.1) for _ in sources]

    cfg = config("repeated_sampling", iterations=2, plans_per_candidate=3, samples_per_plan=1)
    state, _, evaluator, _ = await search(problem, cfg, agents=OfflineAgents(), start=source, evaluator=TimedByName())
    assert state.status == "succeeded" and state.candidates and len(evaluator.evaluated) > 1
    assert all(c.parent_sha == state.start_sha for c in state.candidates)


def test_an_unknown_strategy_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="strategy must be one of beam, repeated_sampling"):
        SearchConfig(strategy="greedy")
