"""The search counts what the evaluator's cascade saved (engine.search.cascade) in its checkpointed totals, so
the run page shows the same counts after a crash and a resume."""

from __future__ import annotations

import pytest

from engine.agents.base import AgentResult, WriteRequest
from engine.search import BeamSearch, InMemoryCheckpoint, ListEventSink, ListOptimizationMemory, SearchConfig
from tests.optimizer.fakes import FakeAgents, FakeEvaluator, SimulatedCrash, fake_kernel, read_kernel

CONFIG = SearchConfig(iterations=2, beam_width=2, plans_per_candidate=4, samples_per_plan=2, memory_size=4,
                      rewrites_per_iteration=4, fix_attempts=0, seed=5, evaluation_batch=2, agent_batch=3)
PLANS = ("faster", "broken", "same", "slower")


class CascadeEvaluator(FakeEvaluator):
    """Says a broken kernel stopped on the mini shapes and a correct one passed them (the start: neither)."""

    async def evaluate_many(self, sources):
        results = await super().evaluate_many(sources)
        for source, result in zip(sources, results, strict=True):
            if read_kernel(source).get("lineage") != "start":
                result.cascade_stage = "mini_stopped" if read_kernel(source).get("broken") else "mini_passed"
        return results


class RepeatingAgents(FakeAgents):
    """FakeAgents whose "same" plan writes its parent back unchanged (a repeated source)."""

    async def write(self, request: WriteRequest) -> AgentResult[str]:
        if request.plan == "same":
            self.requests.append(request)
            return AgentResult(request.kernel.source, self._call("executor", request.plan))
        return await super().write(request)


async def run(problem, store, evaluator):
    search = await BeamSearch.open(problem=problem, start_source=fake_kernel(10.0), config=CONFIG,
                                   agents=RepeatingAgents(plans=PLANS), evaluator=evaluator,
                                   memory=ListOptimizationMemory(), events=ListEventSink(), store=store)
    return await search.run()


def counts(state):
    totals = state.totals
    return (totals.repeated, totals.mini_stopped, totals.mini_passed, totals.evaluations)


async def test_the_counts_of_a_run_are_the_same_after_a_crash_and_a_resume(problem):
    reference = await run(problem, InMemoryCheckpoint(), CascadeEvaluator())
    repeated, stopped, passed, evaluations = counts(reference)
    # "same" writes its parent again: no evaluation; "broken" stops at mini; the rest pass it.
    assert repeated > 0 and stopped > 0 and passed > 0 and stopped + passed + 1 == evaluations

    store = InMemoryCheckpoint()
    with pytest.raises(SimulatedCrash):
        await run(problem, store, CascadeEvaluator(crash_after=5))
    resumed = await run(problem, store, CascadeEvaluator())
    assert counts(resumed) == counts(reference)
