"""The Planner is told what bounds the kernel (engine/platforms/nki/perf/explain.py): the verdict and the critical-path
table follow the counters in its prompt, for NKI kernels; the search keeps the breakdown of each evaluation
(checkpoints included) and hands it to the Planner with the kernel."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from engine.agents import prompting
from engine.agents.base import KernelView, PlanRequest, ProblemContext
from engine.evaluator.result import EvaluationResult
from engine.platforms.nki.perf import estimate
from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    SearchConfig,
)
from engine.search.state import Evaluation, RunState
from tests.optimizer.fakes import FakeAgents, FakeEvaluator, FakeResult, fake_kernel
from tests.perf.builders import streaming_kernel

DMA_BOUND = estimate(streaming_kernel(32, 1024)).breakdown.to_dict()
SCALAR_BOUND = estimate(streaming_kernel(32, 1024, ops_per_tile=16)).breakdown.to_dict()


def planner_user(problem: ProblemContext, breakdown: dict) -> str:
    kernel = KernelView(source="def kernel(x):\n    return x\n", latency_ms=0.13,
                        profile={"hbm_read_bytes": 4096.0}, breakdown=breakdown)
    return prompting.planner_messages(PlanRequest(problem, kernel, (), count=2, seed=1))[1]["content"]


def test_the_planner_prompt_carries_the_verdict_after_the_counters(problem):
    user = planner_user(problem, DMA_BOUND)
    assert "bound by: DMA (" in user and "of the critical path)" in user
    assert user.index("| hbm_read_bytes |") < user.index("bound by: DMA")
    assert "| DMA |" in user and "| Scalar Engine |" in user
    assert "idle waiting on another engine" in user
    assert "bound by: Scalar Engine (" in planner_user(problem, SCALAR_BOUND)


def test_no_breakdown_means_no_breakdown_lines(problem):
    user = planner_user(problem, {})
    assert "bound by:" not in user and "Where the time goes" not in user


def test_a_triton_kernel_gets_no_breakdown():
    problem = ProblemContext(slug="add_mini", reference_source="def forward(x):\n    return x\n", platform="h100")
    assert "bound by:" not in planner_user(problem, DMA_BOUND)


def test_the_search_keeps_the_breakdown_and_checkpoints_it():
    result = EvaluationResult(status="ok", correct=True, latency_ms=0.13, breakdown=DMA_BOUND)
    kept = Evaluation.from_result(result)
    assert kept.breakdown["verdict"] == DMA_BOUND["verdict"]
    assert Evaluation.from_result(replace(result, breakdown=None)).breakdown == {}
    state = RunState(config=SearchConfig(), start_sha="s", kernels={"s": "x"}, evaluations={"s": kept})
    assert RunState.from_dict(state.to_dict()).evaluations["s"].breakdown == kept.breakdown


@dataclass
class _ExplainedResult(FakeResult):
    breakdown: dict = field(default_factory=dict)


class _ExplainedEvaluator(FakeEvaluator):
    """The fake evaluator's results, each with the breakdown a simulated evaluation carries."""

    async def evaluate_many(self, sources):
        return [_ExplainedResult(**asdict(r), breakdown=DMA_BOUND) for r in await super().evaluate_many(sources)]


async def test_the_planner_of_a_search_sees_the_start_kernels_verdict(problem):
    agents = FakeAgents(plans=("faster",))
    config = SearchConfig(iterations=1, beam_width=1, plans_per_candidate=1, samples_per_plan=1, seed=3)
    search = await BeamSearch.open(problem=problem, start_source=fake_kernel(10.0), config=config, agents=agents,
                                   evaluator=_ExplainedEvaluator(), memory=ListOptimizationMemory(),
                                   events=ListEventSink(), store=InMemoryCheckpoint())
    await search.run()
    plans = [r for r in agents.requests if isinstance(r, PlanRequest)]
    assert plans and plans[0].kernel.breakdown["verdict"].startswith("bound by: DMA")
    assert "bound by: DMA (" in prompting.planner_messages(plans[0])[1]["content"]
