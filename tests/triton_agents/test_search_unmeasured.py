"""The search when evaluations measure no latency (the Triton interpreter): candidates are ranked by
correctness and held as "correct, unmeasured", nothing claims a speedup, a failing start kernel can be
repaired, and only failed rewrites become (negative) lessons."""

from __future__ import annotations

from engine.agents.base import ProblemContext
from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    SearchConfig,
)
from tests.optimizer.fakes import FakeAgents, FakeResult, fake_kernel, read_kernel

PROBLEM = ProblemContext(slug="add_mini", reference_source="", platform="h100")
CONFIG = SearchConfig(iterations=2, beam_width=2, plans_per_candidate=3, samples_per_plan=1, memory_size=4,
                      rewrites_per_iteration=4, fix_attempts=0, seed=3, correctness_only=True)


class CorrectnessOnlyEvaluator:
    """Like the interpreter: correct or not (`broken=1`), never a latency."""

    def __init__(self) -> None:
        self.evaluated: list[str] = []

    async def evaluate_many(self, sources):
        self.evaluated.extend(sources)
        return [FakeResult(False, None, error_kind="incorrect", error_message="wrong output on shapes [(1000,)]")
                if read_kernel(s).get("broken") else FakeResult(True, None) for s in sources]


async def run(config=CONFIG, start=None, plans=("faster", "broken", "slower")):
    events, memory = ListEventSink(), ListOptimizationMemory()
    search = await BeamSearch.open(problem=PROBLEM, start_source=start or fake_kernel(10.0), config=config,
                                   agents=FakeAgents(plans=plans), evaluator=CorrectnessOnlyEvaluator(),
                                   memory=memory, events=events, store=InMemoryCheckpoint())
    return await search.run(), events, memory


async def test_correct_unmeasured_kernels_fill_the_beam_and_nothing_claims_a_speedup():
    state, events, memory = await run()
    assert state.status == "succeeded"
    assert state.beam and all(m.latency_ms is None and m.correct for m in state.beam)
    assert state.best is not None and state.best.latency_ms is None and state.best_speedup is None
    assert all(c.speedup is None for c in state.candidates)
    assert [h["correct"] for h in state.history] == [2, 4]  # 'faster' and 'slower' of each beam kernel
    finished = dict(events.events)["run.finished"]
    assert finished["best_latency_ms"] is None and finished["best_speedup"] is None
    assert not [m for m in memory.items if m.polarity == "positive"]


async def test_a_failed_rewrite_of_a_correct_kernel_becomes_a_negative_lesson_with_its_failure():
    state, events, memory = await run()
    negatives = [m for m in memory.items if m.polarity == "negative"]
    assert negatives and all(m.speedup == 1.0 for m in negatives)
    assert all(m.provenance["failure"] == "incorrect: wrong output on shapes [(1000,)]" for m in negatives)
    assert all(read_kernel(m.slow_kernel).get("broken") == "1" for m in negatives)  # the slow side is the rewrite
    assert all(not read_kernel(m.fast_kernel).get("broken") for m in negatives)
    # One lesson per failed plan per beam kernel: iteration 1 plans from the start, iteration 2 from two kernels.
    added = [p for k, p in events.events if k == "memory.added"]
    assert len(added) == 3 and {p["polarity"] for p in added} == {"negative"}


async def test_a_failing_start_kernel_is_repaired_and_left_behind():
    state, events, memory = await run(start=fake_kernel(10.0, broken=1), plans=("faster", "broken"))
    assert state.status == "succeeded"
    first = next(p for k, p in events.events if k == "beam.selected")
    # The only correct kernel of iteration 1 ranks before the failing start, which stays in the beam meanwhile.
    assert [m["correct"] for m in first["beam"]] == [True, False]
    assert state.best is not None and state.best.correct and state.best.origin != "start"
    assert all(m.correct for m in state.beam)  # three correct kernels after iteration 2: the start is gone
    # 'broken' on the failing start broke nothing that worked: no lesson from it in either iteration; 'broken'
    # on iteration 1's correct kernel is the one lesson.
    added = [p for k, p in events.events if k == "memory.added"]
    assert [p["iteration"] for p in added] == [2]


async def test_a_measured_run_still_refuses_a_start_kernel_without_latency_or_correctness():
    measured = SearchConfig(iterations=1, beam_width=1, plans_per_candidate=1, fix_attempts=0)
    for start in (fake_kernel(10.0), fake_kernel(10.0, broken=1)):
        state, _, _ = await run(config=measured, start=start)
        assert state.status == "failed" and "not a correct, timed kernel" in state.error


async def test_an_unmeasured_run_resumes_from_its_checkpoint_with_unmeasured_members():
    from engine.search.state import RunState

    state, _, _ = await run()
    again = RunState.from_dict(state.to_dict())
    assert [(m.latency_ms, m.correct) for m in again.beam] == [(m.latency_ms, m.correct) for m in state.beam]


async def test_the_planner_is_told_the_start_kernel_fails_and_correct_kernels_carry_no_failure():
    agents = FakeAgents(plans=("faster", "broken"))
    search = await BeamSearch.open(problem=PROBLEM, start_source=fake_kernel(10.0, broken=1), config=CONFIG,
                                   agents=agents, evaluator=CorrectnessOnlyEvaluator(),
                                   memory=ListOptimizationMemory(), events=ListEventSink(), store=InMemoryCheckpoint())
    await search.run()
    plans = [r for r in agents.requests if type(r).__name__ == "PlanRequest"]
    assert plans[0].kernel.failure == "incorrect: wrong output on shapes [(1000,)]"
    assert all(not r.kernel.failure for r in plans if not read_kernel(r.kernel.source).get("broken"))
