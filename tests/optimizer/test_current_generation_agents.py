"""A run that returns kernels in the current NKI generation (NKI 0.6) from a legacy start: the offline agent
migrates the kernel first, and the LLM agents' legacy replies are migrated or unusable."""

from __future__ import annotations

import asyncio

from engine.agents.base import KernelView, PlanRequest, ProblemContext, WriteRequest
from engine.agents.imports import complete_imports, in_target_generation
from engine.agents.llm_agents import _kernel_of
from engine.agents.offline import MIGRATE_PLAN, OfflineAgents
from engine.agents.parsing import UnusableReply
from engine.platforms.nki.generations import CURRENT, LEGACY, kernel_generation
from engine.platforms.nki.migration import migrate_source
from engine.platforms.nki.suites.loader import load_suite

SILU = load_suite().problem("silu").baseline_for("mini")
PROBLEM = ProblemContext(slug="silu", reference_source="", platform="trn1", target_generation=CURRENT)


def test_the_offline_agent_migrates_first_and_rewrites_the_migrated_kernel():
    agents = OfflineAgents()
    kernel = KernelView(source=SILU, latency_ms=1.0)
    plans = asyncio.run(agents.plan(PlanRequest(PROBLEM, kernel, (), count=3, seed=0))).value
    assert plans[0] == MIGRATE_PLAN and len(plans) == 3
    written = [asyncio.run(agents.write(WriteRequest(PROBLEM, kernel, plan, (), seed=0))).value for plan in plans]
    assert all(source is not None and kernel_generation(source) == CURRENT for source in written)
    assert "neuronxcc" not in written[0] and written[1] != written[0]
    # Without the option the same agent keeps the legacy namespace and proposes no migration.
    legacy_plans = asyncio.run(agents.plan(PlanRequest(ProblemContext(slug="silu", reference_source=""), kernel, (),
                                                       count=3, seed=1))).value
    assert MIGRATE_PLAN not in legacy_plans


def test_an_llm_reply_is_returned_in_the_current_generation_or_is_unusable_naming_the_construct():
    reply = "```python\n" + SILU + "\n```"
    assert kernel_generation(_kernel_of(reply, SILU, PROBLEM)) == CURRENT
    masked = SILU.replace("tile = nl.load(x[r0:r0 + tile_rows, c0:c0 + tile_cols])",
                          "tile = nl.load(x[r0:r0 + tile_rows, c0:c0 + tile_cols], mask=None)\n"
                          "            t2 = nl.arange(4)")
    try:
        _kernel_of("```python\n" + masked + "\n```", SILU, PROBLEM)
    except UnusableReply as error:
        assert "returns kernels in NKI 0.6" in str(error) and "nl.arange" in str(error)
    else:
        raise AssertionError("an unmigratable legacy reply was accepted")
    # The option off: a legacy reply stays legacy.
    assert in_target_generation(SILU, "", "nki") == SILU and kernel_generation(SILU) == LEGACY


def test_a_reply_without_imports_gets_the_header_of_the_generation_it_is_in():
    body = "@nki.jit\ndef kernel(x):\n    return nl.exp(x)\n"
    assert complete_imports(body, "trn1", CURRENT).startswith("import nki\nimport nki.language as nl\n")
    assert "import neuronxcc.nki as nki" in complete_imports(body, "trn1")


def test_offline_rewrites_of_an_nki_0_6_kernel_stay_nki_0_6():
    # The catalog writes functional (legacy) ISA calls and imports; in a 0.6 kernel they are migrated too.
    gqa = migrate_source(load_suite().problem("gqa_full").baseline_for("mini")).source
    agents = OfflineAgents()
    problem = ProblemContext(slug="gqa_full", reference_source="", platform="trn1")
    kernel = KernelView(source=gqa, latency_ms=1.0)
    plans = asyncio.run(agents.plan(PlanRequest(problem, kernel, (), count=8, seed=0))).value
    written = [asyncio.run(agents.write(WriteRequest(problem, kernel, plan, (), seed=0))) for plan in plans]
    sources = [result.value for result in written if result.value is not None]
    assert sources and all(kernel_generation(source) == CURRENT and "neuronxcc" not in source for source in sources)
