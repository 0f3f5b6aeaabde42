"""The beam search over fake agents and a fake evaluator: what enters the beam and the memory."""

from __future__ import annotations

import pytest

from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    SearchConfig,
)
from tests.optimizer.fakes import FakeAgents, FakeEvaluator, fake_kernel, read_kernel


async def run_search(problem, config, agents=None, start=None, memory=None, evaluator=None):
    events, memory = ListEventSink(), memory or ListOptimizationMemory()
    evaluator = evaluator or FakeEvaluator()
    search = await BeamSearch.open(problem=problem, start_source=start or fake_kernel(10.0), config=config,
                                   agents=agents or FakeAgents(), evaluator=evaluator, memory=memory,
                                   events=events, store=InMemoryCheckpoint())
    state = await search.run()
    return state, events, memory, evaluator


SMALL = SearchConfig(iterations=2, beam_width=2, plans_per_candidate=3, samples_per_plan=2, memory_size=4,
                     rewrites_per_iteration=4, fix_attempts=1, seed=7)


async def test_a_faster_correct_kernel_becomes_the_beam_and_a_positive_memory_entry(problem):
    state, events, memory, _ = await run_search(problem, SMALL)
    assert state.status == "succeeded"
    # Two iterations of "faster" (x0.8 each) from 10 ms: the best is 6.4 ms.
    assert state.best.latency_ms == pytest.approx(6.4)
    assert state.best_speedup == pytest.approx(10.0 / 6.4)
    positives = [m for m in memory.items if m.polarity == "positive"]
    assert positives and positives[0].title == "positive faster"
    assert float(read_kernel(positives[0].fast_kernel)["latency"]) < float(read_kernel(positives[0].slow_kernel)["latency"])


async def test_a_slower_kernel_becomes_a_negative_memory_entry_and_not_the_beam(problem):
    state, _, memory, _ = await run_search(problem, SMALL)
    negatives = [m for m in memory.items if m.polarity == "negative"]
    assert negatives and negatives[0].speedup == pytest.approx(1.5 * 1.01)  # the worst sample of the plan
    # The slow side of a negative entry is the rewritten kernel.
    assert float(read_kernel(negatives[0].slow_kernel)["latency"]) > float(read_kernel(negatives[0].fast_kernel)["latency"])
    assert all(float(read_kernel(state.kernels[m.sha])["latency"]) < 10.0 for m in state.beam)


async def test_a_broken_kernel_goes_to_the_fixer_and_the_fixed_one_is_evaluated(problem):
    agents = FakeAgents(plans=("broken",))
    config = SearchConfig(iterations=1, beam_width=2, plans_per_candidate=1, samples_per_plan=1, fix_attempts=1)
    state, events, _, evaluator = await run_search(problem, config, agents=agents)
    fixed = state.candidates[0]
    assert fixed.fixes == 1 and len(fixed.attempts) == 2
    assert fixed.speedup == pytest.approx(10.0 / 9.0)  # the Fixer's kernel is 0.9x the broken one
    assert state.best.origin == fixed.key
    assert len(evaluator.evaluated) == 3  # start, broken, fixed


async def test_a_suspicious_kernel_never_enters_the_beam_even_when_fastest(problem):
    agents = FakeAgents(plans=("suspicious", "slower"))
    config = SearchConfig(iterations=1, beam_width=4, plans_per_candidate=2, samples_per_plan=1, fix_attempts=1)
    state, events, memory, _ = await run_search(problem, config, agents=agents)
    suspicious = [c for c in state.candidates if "suspicious" in state.kernels[c.sha]]
    assert suspicious and all(not c.chosen and c.speedup is None for c in suspicious)
    assert all("suspicious" not in state.kernels[m.sha] for m in state.beam)
    assert all(c.fixes == 0 for c in suspicious)  # the Fixer is not asked to launder a flagged kernel
    assert all("suspicious" not in m.fast_kernel for m in memory.items)


async def test_the_beam_keeps_at_most_beam_width_distinct_kernels_fastest_first(problem):
    config = SearchConfig(iterations=1, beam_width=2, plans_per_candidate=3, samples_per_plan=2, fix_attempts=0)
    state, _, _, _ = await run_search(problem, config, agents=FakeAgents(plans=("faster", "same", "slower")))
    latencies = [m.latency_ms for m in state.beam]
    assert latencies == sorted(latencies) and len(latencies) == 2
    assert latencies[0] == pytest.approx(8.0) and latencies[1] == pytest.approx(8.08)


async def test_rewrite_selection_respects_thresholds_and_the_half_positive_budget(problem):
    agents = FakeAgents(plans=("faster", "faster", "faster", "same", "slower"))
    config = SearchConfig(iterations=1, beam_width=1, plans_per_candidate=5, samples_per_plan=1,
                          rewrites_per_iteration=2, fix_attempts=0)
    state, _, memory, _ = await run_search(problem, config, agents=agents)
    polarities = [r.polarity for r in state.rewrites]
    assert polarities == ["positive", "negative"]  # at most half positive; "same" (1.0x) is neither
    assert len(memory.items) == 2


async def test_a_starting_kernel_that_is_not_correct_fails_the_run_with_the_reason(problem):
    state, events, _, _ = await run_search(problem, SMALL, start=fake_kernel(10.0, broken=1))
    assert state.status == "failed"
    assert "starting kernel" in state.error and "relative L2 error" in state.error
    assert events.kinds()[-1] == "run.failed"


async def test_the_events_tell_the_story_of_each_iteration_in_order(problem):
    _, events, _, _ = await run_search(problem, SMALL)
    kinds = [k for k in events.kinds() if k not in ("agent.call",)]
    assert kinds[0] == "run.started" and kinds[-1] == "run.finished"
    first = kinds[kinds.index("iteration.started"): kinds.index("iteration.finished") + 1]
    order = ["iteration.started", "plan.proposed", "candidate.written", "candidate.evaluated", "beam.selected",
             "memory.added", "iteration.finished"]
    positions = [first.index(kind) for kind in order]
    assert positions == sorted(positions)
    assert kinds.count("iteration.finished") == 2


async def test_token_and_cost_totals_add_up_every_agent_call(problem):
    state, events, _, _ = await run_search(problem, SMALL)
    calls = [p["call"] for k, p in events.events if k == "agent.call"]
    assert state.totals.calls == len(calls) > 0
    assert state.totals.prompt_tokens == sum(c["prompt_tokens"] for c in calls) == 100 * len(calls)
    assert state.totals.cost_usd == pytest.approx(0.001 * len(calls))


async def test_the_planner_sees_memory_written_in_earlier_iterations(problem):
    agents = FakeAgents()
    await run_search(problem, SMALL, agents=agents)
    plan_requests = [r for r in agents.requests if type(r).__name__ == "PlanRequest"]
    assert plan_requests[0].memory == ()
    later = [r for r in plan_requests if r.key.startswith("2.")]
    assert later and later[0].memory and later[0].kernel.profile["hbm_read_bytes"] > 0


def test_search_parameters_are_validated_with_the_value_received():
    with pytest.raises(ValueError, match="beam_width must be >= 1, got 0"):
        SearchConfig(beam_width=0)
    with pytest.raises(ValueError, match="unknown search parameters \\['beam'\\]"):
        SearchConfig.from_dict({"beam": 3})


async def test_an_infrastructure_failure_is_not_sent_to_the_fixer(problem):
    config = SearchConfig(iterations=1, beam_width=2, plans_per_candidate=1, samples_per_plan=1, fix_attempts=2)
    state, _, _, _ = await run_search(problem, config, agents=FakeAgents(plans=("infra",)))
    assert state.candidates[0].fixes == 0 and state.candidates[0].speedup is None


async def test_sources_of_kernels_that_left_the_beam_are_dropped_from_the_checkpoint(problem):
    config = SearchConfig(iterations=3, beam_width=1, plans_per_candidate=2, samples_per_plan=1, fix_attempts=0)
    state, _, _, evaluator = await run_search(problem, config, agents=FakeAgents(plans=("faster", "slower")))
    assert len(state.evaluations) == len(evaluator.evaluated) == 7  # every evaluation is remembered by sha
    beam_and_start = {state.start_sha} | {m.sha for m in state.beam}
    current = {c.sha for c in state.candidates} | {c.parent_sha for c in state.candidates}
    assert set(state.kernels) == beam_and_start | current  # but only live sources are kept
    assert len(state.kernels) < len(state.evaluations)


async def test_an_infrastructure_failure_is_evaluated_again_a_bounded_number_of_times(problem):
    recovers = FakeEvaluator(infrastructure_failures=2)
    state, events, _, _ = await run_search(problem, SMALL, evaluator=recovers)
    assert state.status == "succeeded"  # the starting kernel failed twice on our side, then evaluated
    assert [p.get("retrying") for k, p in events.events if k == "candidate.evaluated"][:3] == [True, True, None]
    never = FakeEvaluator(infrastructure_failures=100)
    state, _, _, _ = await run_search(problem, SMALL, evaluator=never)
    assert state.status == "failed" and "infrastructure_error" in state.error
    assert len(never.evaluated) == 3  # one try and two retries, then the run stops


async def test_a_speedup_over_the_parent_above_the_bound_is_held_for_review(problem):
    config = SearchConfig(iterations=1, beam_width=2, plans_per_candidate=1, samples_per_plan=1,
                          fix_attempts=1, suspicious_speedup=1.1)
    state, events, memory, _ = await run_search(problem, config, agents=FakeAgents(plans=("faster",)))
    held = state.candidates[0]
    assert held.speedup is None and not held.chosen and held.fixes == 0
    assert [m.origin for m in state.beam] != [held.key] and not memory.items
    evaluated = [p for k, p in events.events if k == "candidate.evaluated" and p["sha"] == held.sha]
    assert evaluated[0]["held_for_review"] and "suspicious_speedup=1.1" in evaluated[0]["error_message"]
