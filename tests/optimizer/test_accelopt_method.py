"""Faithful to AccelOpt's method: N independent Planner calls with shuffled profiles, Executor replies
without imports, memory kept out of the Executor's prompt by default, and the AccelOpt-style memory mode."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

from engine.agents.base import KernelView, MemoryItem, PlanRequest, WriteRequest
from engine.agents.llm import LLMClient, RoleSettings
from engine.agents.llm_agents import LLMAgents
from engine.memory.selection import select_accelopt
from engine.search import (
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    SearchConfig,
)
from tests.optimizer.fakes import FakeAgents, FakeEvaluator, fake_kernel
from tests.optimizer.scripted_openai import Reply, ScriptedOpenAI

PROFILE = {"hbm_read_bytes": 4096.0, "hbm_write_bytes": 2048.0, "sbuf_read_bytes": 10.0, "sbuf_write_bytes": 11.0,
           "hardware_flops": 0.0, "vector_engine_active_time_percent": 0.2,
           "scalar_engine_active_time_percent": 0.7, "gpsimd_engine_active_time_percent": 0.0}
KERNEL = KernelView(source="@nki.jit\ndef kernel(x):\n    return x\n", latency_ms=1.25, peak_fraction=0.4,
                    profile=PROFILE)
SILU = (Path(__file__).resolve().parents[2] / "engine/platforms/nki/suites/nkibench/baselines/silu.py").read_text()


def agents_for(server) -> LLMAgents:
    role = RoleSettings(model="m", base_url=server.base_url, api_key="k", timeout_s=5.0)
    return LLMAgents(LLMClient({r: role for r in ("planner", "executor", "fixer", "summarizer")},
                               prices={"m": (1.0, 1.0)}, max_retries=0))


def profile_order(request_text: str) -> list[str]:
    return [name for name in re.findall(r"^\| (\w+) \| [^|]+ \|", request_text, re.MULTILINE) if name != "counter"]


def plan_with_server(problem, seed: int) -> tuple[list[str], list[list[str]], list[dict]]:
    answers = iter(range(100))

    def respond(body):
        return Reply(f"1. Plan number {next(answers)}: do one thing.", 10, 5)

    with ScriptedOpenAI(respond) as server:
        request = PlanRequest(problem=problem, kernel=KERNEL, memory=(), count=4, seed=seed, key="1.0")
        result = asyncio.run(agents_for(server).plan(request))
    orders = [profile_order(r.body["messages"][1]["content"]) for r in server.requests]
    return result.value or [], orders, [r.body for r in server.requests]


def test_the_planner_is_asked_n_times_for_one_plan_each_with_the_profile_shuffled_per_call(problem):
    plans, orders, bodies = plan_with_server(problem, seed=7)
    assert len(bodies) == 4 and len(plans) == 4  # four independent calls, one plan from each
    assert sorted(plans) == sorted(f"Plan number {n}: do one thing." for n in range(4))
    assert all("at most 1 plan(s)" in body["messages"][0]["content"] for body in bodies)
    expected = {"latency_ms", "peak_fraction", *PROFILE}
    assert all(set(order) == expected for order in orders)  # every field, in a different order per call
    assert len({tuple(order) for order in orders}) == 4
    assert len({body["seed"] for body in bodies}) == 4
    # Seeded: the same request shows the same four orders again; another seed shows others.
    _, again, _ = plan_with_server(problem, seed=7)
    assert sorted(map(tuple, again)) == sorted(map(tuple, orders))
    _, other, _ = plan_with_server(problem, seed=8)
    assert sorted(map(tuple, other)) != sorted(map(tuple, orders))


def test_an_executor_reply_without_imports_gets_the_platforms_standard_imports(problem):
    body = "\n".join(line for line in SILU.splitlines() if not line.startswith("import "))
    reply = f"Here is the optimized kernel.\n```python\n{body}\n```\n"
    with ScriptedOpenAI(lambda _: Reply(reply, 10, 5)) as server:
        request = WriteRequest(problem=problem, kernel=KernelView(source=SILU), plan="p", memory=(), seed=1)
        result = asyncio.run(agents_for(server).write(request))
    assert result.ok, result.unusable
    tree = ast.parse(result.value)
    imported = {alias.asname or alias.name for node in tree.body if isinstance(node, ast.Import)
                for alias in node.names}
    assert imported == {"nki", "nl"}  # what the kernel uses, nothing more
    assert ast.get_docstring(tree) and "def kernel(x):" in result.value  # the docstring stays first


def test_an_executor_reply_without_imports_passes_evaluation():
    from engine.agents.imports import complete_imports
    from engine.evaluator import evaluate
    from engine.platforms.nki.suites.loader import load_suite

    silu = load_suite("nkibench").problem("silu")
    body = "\n".join(line for line in silu.baseline_for("mini").splitlines() if not line.startswith("import "))
    result = evaluate(complete_imports(body, "trn1"), silu.reference_source("mini"), seeds=(1, 2, 3))
    assert result.correct, (result.error_kind, result.error_message)


def test_a_reply_that_has_its_imports_is_left_alone(problem):
    reply = f"```python\n{SILU}```"
    with ScriptedOpenAI(lambda _: Reply(reply, 1, 1)) as server:
        request = WriteRequest(problem=problem, kernel=KernelView(source=SILU), plan="p", memory=(), seed=1)
        result = asyncio.run(agents_for(server).write(request))
    assert result.value == SILU


def run_search(problem, **config):
    agents = FakeAgents(plans=("faster", "slower"))
    memory = ListOptimizationMemory()
    search = asyncio.run(BeamSearch.open(
        problem=problem, start_source=fake_kernel(10.0), agents=agents, evaluator=FakeEvaluator(), memory=memory,
        config=SearchConfig(iterations=3, beam_width=1, plans_per_candidate=2, samples_per_plan=1,
                            rewrites_per_iteration=2, fix_attempts=0, **config),
        events=ListEventSink(), store=InMemoryCheckpoint()))
    asyncio.run(search.run())
    return agents, memory


def test_the_executor_sees_no_memory_unless_asked(problem):
    agents, memory = run_search(problem)
    writes = [r for r in agents.requests if isinstance(r, WriteRequest)]
    plans = [r for r in agents.requests if isinstance(r, PlanRequest)]
    assert memory.items and any(p.memory for p in plans)  # the Planner learns from the memory
    assert writes and all(w.memory == () for w in writes)
    agents, _ = run_search(problem, executor_memory=True)
    assert any(r.memory for r in agents.requests if isinstance(r, WriteRequest))


def test_the_executor_prompt_has_no_memory_section_without_memory(problem):
    from engine.agents import prompting

    item = MemoryItem(key="k", title="Reuse tiles", summary="Load once.")
    without = prompting.executor_messages(WriteRequest(problem, KERNEL, "p", (), seed=1))[1]["content"]
    with_memory = prompting.executor_messages(WriteRequest(problem, KERNEL, "p", (item,), seed=1))[1]["content"]
    assert "optimization memory" not in without and "Reuse tiles" not in without
    assert "Related lessons from the optimization memory" in with_memory and "Reuse tiles" in with_memory


def test_accelopt_memory_is_the_latest_rewrites_plus_a_seeded_sample_of_older_ones():
    learned = [(1, "a1"), (1, "a2"), (1, "a3"), (2, "b1"), (2, "b2"), (3, "c1")]
    chosen = select_accelopt(learned, limit=4, seed=0)
    assert chosen[:1] == ["c1"] and len(chosen) == 4 and len(set(chosen)) == 4
    assert select_accelopt(learned, limit=4, seed=0) == chosen  # reproducible
    samples = {tuple(select_accelopt(learned, limit=3, seed=s)) for s in range(20)}
    assert len(samples) > 1  # the older ones are sampled, not always the same
    assert select_accelopt(learned, limit=1, seed=0) == ["c1"]
    assert select_accelopt([], limit=4, seed=0) == []


def test_a_run_in_accelopt_memory_mode_shows_the_planner_this_runs_rewrites(problem):
    # The mode belongs to the memory the caller builds from the run's config (the Django worker does).
    accelopt = ListOptimizationMemory(mode="accelopt", seed=3)
    agents = FakeAgents(plans=("faster", "slower"))
    search = asyncio.run(BeamSearch.open(
        problem=problem, start_source=fake_kernel(10.0), agents=agents, evaluator=FakeEvaluator(), memory=accelopt,
        config=SearchConfig(iterations=3, beam_width=1, plans_per_candidate=2, samples_per_plan=1,
                            rewrites_per_iteration=2, fix_attempts=0, memory_mode="accelopt", memory_size=2),
        events=ListEventSink(), store=InMemoryCheckpoint()))
    asyncio.run(search.run())
    plans = [r for r in agents.requests if isinstance(r, PlanRequest)]
    assert plans[0].memory == ()  # nothing learned yet
    latest = [item for iteration, item in accelopt.learned if iteration == 2]
    third = plans[-1].memory
    assert 0 < len(third) <= 2 and all(item in third for item in latest[:2])
