"""Same seed and same agent answers give the same run, whatever the batch sizes."""

from __future__ import annotations

import dataclasses

from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    SearchConfig,
)
from tests.optimizer.fakes import FakeAgents, FakeEvaluator, fake_kernel

CONFIG = SearchConfig(iterations=2, beam_width=3, plans_per_candidate=3, samples_per_plan=2, seed=11)


async def run(problem, config):
    events, agents = ListEventSink(), FakeAgents()
    search = await BeamSearch.open(problem=problem, start_source=fake_kernel(10.0), config=config, agents=agents,
                                   evaluator=FakeEvaluator(), memory=ListOptimizationMemory(), events=events,
                                   store=InMemoryCheckpoint())
    state = await search.run()
    return state, events, agents


def timeless(state):
    """The state without the wall time its steps took (the one thing a seed cannot fix)."""
    data = state.to_dict()
    data["totals"].pop("wall_time_s")
    return data


def comparable(state):
    data = timeless(state)
    data.pop("config")
    return data


async def test_the_same_seed_gives_the_same_state_events_and_agent_seeds(problem):
    a_state, a_events, a_agents = await run(problem, CONFIG)
    b_state, b_events, b_agents = await run(problem, CONFIG)
    assert timeless(a_state) == timeless(b_state)
    assert a_events.events == b_events.events
    assert [r.seed for r in a_agents.requests] == [r.seed for r in b_agents.requests]


async def test_batch_sizes_change_how_work_is_chunked_but_not_the_run(problem):
    a_state, _, _ = await run(problem, CONFIG)
    b_state, _, _ = await run(problem, dataclasses.replace(CONFIG, agent_batch=1, evaluation_batch=5))
    assert comparable(a_state) == comparable(b_state)


async def test_a_different_seed_gives_agents_different_seeds(problem):
    _, _, a_agents = await run(problem, CONFIG)
    _, _, b_agents = await run(problem, dataclasses.replace(CONFIG, seed=12))
    assert [r.seed for r in a_agents.requests] != [r.seed for r in b_agents.requests]
