"""Checkpointing: a run killed at any step resumes without redoing finished evaluations."""

from __future__ import annotations

import pytest

from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    JsonFileCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    SearchConfig,
    source_sha,
)
from tests.optimizer.fakes import FakeAgents, FakeEvaluator, SimulatedCrash, fake_kernel

CONFIG = SearchConfig(iterations=3, beam_width=2, plans_per_candidate=3, samples_per_plan=2, memory_size=4,
                      rewrites_per_iteration=4, fix_attempts=1, seed=3, evaluation_batch=2, agent_batch=3)


async def open_search(problem, store, memory, evaluator, events=None):
    return await BeamSearch.open(problem=problem, start_source=fake_kernel(10.0), config=CONFIG,
                                 agents=FakeAgents(), evaluator=evaluator, memory=memory,
                                 events=events or ListEventSink(), store=store)


async def uninterrupted(problem):
    evaluator, memory = FakeEvaluator(), ListOptimizationMemory()
    state = await (await open_search(problem, InMemoryCheckpoint(), memory, evaluator)).run()
    return state, memory, evaluator


@pytest.mark.parametrize("crash_after", [1, 4, 9, 15])
async def test_a_run_killed_during_an_evaluation_resumes_without_re_running_saved_evaluations(problem, crash_after):
    reference, reference_memory, reference_evaluator = await uninterrupted(problem)
    store, memory = InMemoryCheckpoint(), ListOptimizationMemory()
    crashing = FakeEvaluator(crash_after=crash_after)
    with pytest.raises(SimulatedCrash):
        await (await open_search(problem, store, memory, crashing)).run()
    saved_evaluations = set(store.state["evaluations"])

    resumed_evaluator = FakeEvaluator()
    state = await (await open_search(problem, store, memory, resumed_evaluator)).run()

    assert state.status == "succeeded"
    rerun = saved_evaluations & {source_sha(s) for s in resumed_evaluator.evaluated}
    assert rerun == set()  # nothing evaluated and checkpointed is evaluated again
    # The same run as without the crash: same best kernel, same memory, same number of distinct evaluations.
    assert state.best.sha == reference.best.sha
    assert [m.key for m in memory.items] == [m.key for m in reference_memory.items]
    total = len(saved_evaluations) + len(resumed_evaluator.evaluated)
    assert total == len(reference_evaluator.evaluated)


async def test_a_run_stopped_between_any_two_steps_resumes_to_the_same_result(problem):
    reference, reference_memory, _ = await uninterrupted(problem)
    store, memory = InMemoryCheckpoint(), ListOptimizationMemory()
    steps = 0
    while True:
        # A fresh search object each step: nothing survives between steps except the checkpoint.
        search = await open_search(problem, store, memory, FakeEvaluator())
        if not await search.step():
            break
        steps += 1
    assert steps > 10
    assert search.state.best.sha == reference.best.sha
    assert search.state.to_dict()["history"] == reference.to_dict()["history"]
    assert len(memory.items) == len(reference_memory.items)  # no entry lost or duplicated


async def test_memory_adds_repeated_after_a_crash_do_not_duplicate_entries(problem):
    class CrashOnSecondSave(InMemoryCheckpoint):
        async def save(self, state):
            summarized = any(key.startswith("summarize:") for key in state["done"])
            if summarized and not getattr(self, "crashed", False):
                self.crashed = True
                raise SimulatedCrash("killed right after a memory add, before its checkpoint")
            await super().save(state)

    store, memory = CrashOnSecondSave(), ListOptimizationMemory()
    with pytest.raises(SimulatedCrash):
        await (await open_search(problem, store, memory, FakeEvaluator())).run()
    added_before = len(memory.items)
    assert added_before > 0
    state = await (await open_search(problem, store, memory, FakeEvaluator())).run()
    _, reference_memory, _ = await uninterrupted(problem)
    assert state.status == "succeeded"
    assert [m.key for m in memory.items] == [m.key for m in reference_memory.items]


async def test_the_state_round_trips_through_a_json_file(problem, tmp_path):
    store = JsonFileCheckpoint(tmp_path / "run.json")
    search = await open_search(problem, store, ListOptimizationMemory(), FakeEvaluator())
    for _ in range(6):
        await search.step()
    resumed = await open_search(problem, store, ListOptimizationMemory(), FakeEvaluator())
    assert resumed.state.to_dict() == search.state.to_dict()


async def test_a_finished_run_does_no_more_work(problem):
    store = InMemoryCheckpoint()
    await (await open_search(problem, store, ListOptimizationMemory(), FakeEvaluator())).run()
    evaluator = FakeEvaluator()
    search = await open_search(problem, store, ListOptimizationMemory(), evaluator)
    assert await search.step() is False
    assert evaluator.evaluated == []
