"""Offline rewrites of the NKIBench baselines, run through the real evaluation pipeline (simulator) on
mini shapes: every rewritten kernel is still correct."""

from __future__ import annotations

import pytest

from engine.agents.base import ProblemContext
from engine.agents.offline import OfflineAgents
from engine.evaluator import evaluate
from engine.platforms.nki.rewrites import BY_NAME
from engine.platforms.nki.suites.loader import load_suite
from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    PipelineEvaluator,
    SearchConfig,
)

SEEDS = (11, 12, 13)
SUITE = load_suite("nkibench")

# One or more sites of every rewrite kind, on the baselines where they apply (kept small: each is ~1 s).
CASES = [
    ("adamw", "fold_scale_into_activation", 0),
    ("adamw", "fuse_scale_and_add", 0),
    ("adamw", "fuse_scale_and_add", 2),
    ("rmsnorm_matmul", "hoist_invariant_loads", 0),
    ("rmsnorm_matmul", "fold_scale_into_activation", 0),
    ("rmsnorm_matmul", "reduce_inside_activation", 0),
    ("bmm_softmax", "reduce_inside_activation", 0),
    ("lora", "hoist_invariant_loads", 1),
    ("silu", "smaller_free_tiles", 2),
    ("silu", "interchange_loops", 0),
]


@pytest.mark.parametrize("slug, rewrite, site", CASES)
def test_a_rewritten_baseline_is_still_correct_on_the_mini_case(slug, rewrite, site):
    problem = SUITE.problem(slug)
    source = BY_NAME[rewrite].apply(problem.baseline_for("mini"), site)
    result = evaluate(source, problem.reference_source("mini"), seeds=SEEDS,
                      peak_counts=problem.peak_counts("mini").as_dict())
    assert result.correct, f"{slug} {rewrite}#{site}: {result.error_kind}: {result.error_message}\n{source}"
    assert result.latency_ms and result.latency_ms > 0


async def test_an_offline_run_on_a_mini_problem_keeps_only_correct_kernels_and_labels_memory_by_speedup():
    problem = SUITE.problem("silu")
    reference = problem.reference_source("mini")
    context = ProblemContext(slug="silu", reference_source=reference, family=problem.family)
    evaluator = PipelineEvaluator(reference, seeds=SEEDS, peak_counts=problem.peak_counts("mini").as_dict())
    memory = ListOptimizationMemory()
    config = SearchConfig(iterations=1, beam_width=2, plans_per_candidate=4, samples_per_plan=1, fix_attempts=0,
                          rewrites_per_iteration=4, seed=1)
    search = await BeamSearch.open(problem=context, start_source=problem.baseline_for("mini"), config=config,
                                   agents=OfflineAgents(), evaluator=evaluator, memory=memory,
                                   events=ListEventSink(), store=InMemoryCheckpoint())
    state = await search.run()
    evaluator.executor.shutdown()
    assert state.status == "succeeded", state.error
    assert len(state.candidates) == 4
    assert all(state.evaluations[c.sha].correct for c in state.candidates)
    assert all(state.evaluations[m.sha].correct for m in state.beam)
    assert state.best.latency_ms <= state.start_latency_ms
    for item in memory.items:
        candidate = next(c for c in state.candidates if c.key == item.provenance["candidate"])
        assert (item.polarity == "positive") == (candidate.speedup > 1.0)
