"""The offline agent's roles: plans from applicable rewrites ranked by memory, kernels, memory entries."""

from __future__ import annotations

from engine.agents.base import (
    FixRequest,
    KernelView,
    MemoryItem,
    PlanRequest,
    ProblemContext,
    SummaryRequest,
    WriteRequest,
)
from engine.agents.offline import LABEL, OfflineAgents, parse_plan
from tests.optimizer.test_offline_rewrites import MATMUL, kernel

ELEMENTWISE = kernel("""
rows, cols = x.shape
out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
tile_cols = _even_tile(cols, 512)
for i in nl.affine_range(rows // 128):
    for j in nl.affine_range(cols // tile_cols):
        t = nl.load(x[i * 128:(i + 1) * 128, j * tile_cols:(j + 1) * tile_cols])
        nl.store(out[i * 128:(i + 1) * 128, j * tile_cols:(j + 1) * tile_cols], value=nl.exp(nl.multiply(t, 0.5)))
return out
""")
PROBLEM = ProblemContext(slug="exp_mini", reference_source="", family="elementwise")


async def plans_for(source, memory=(), count=20, seed=0):
    result = await OfflineAgents().plan(PlanRequest(problem=PROBLEM, kernel=KernelView(source), memory=tuple(memory),
                                                    count=count, seed=seed))
    return result


async def test_the_planner_lists_each_applicable_rewrite_site_once():
    result = await plans_for(ELEMENTWISE)
    names = [parse_plan(p)[0].name for p in result.value]
    assert names.count("smaller_free_tiles") == 2  # 256 and 128
    assert {"fold_scale_into_activation", "larger_free_tiles", "interchange_loops"} <= set(names)
    assert result.calls == [] and "no language model" in LABEL


async def test_memory_moves_rewrites_that_helped_first_and_ones_that_hurt_last():
    def entry(name, polarity):
        return MemoryItem(key=name, title=name, summary=f"lesson (rewrite: `{name}`, found by …)", polarity=polarity)

    memory = [entry("interchange_loops", "positive"), entry("fold_scale_into_activation", "negative")]
    names = [parse_plan(p)[0].name for p in (await plans_for(ELEMENTWISE, memory)).value]
    assert names[0] == "interchange_loops" and names[-1] == "fold_scale_into_activation"


async def test_the_plan_count_caps_the_list_and_the_seed_only_breaks_ties():
    few = (await plans_for(ELEMENTWISE, count=2)).value
    assert len(few) == 2
    assert (await plans_for(ELEMENTWISE, seed=1)).value == (await plans_for(ELEMENTWISE, seed=1)).value


async def test_a_kernel_no_rewrite_applies_to_gives_an_unusable_plan_reply():
    result = await plans_for("def kernel(x):\n    return x\n")
    assert result.value is None and "no rewrite" in result.unusable


async def test_the_executor_applies_the_planned_site_and_sample_one_applies_every_site():
    two_sites = kernel("""
a = nl.load(x[0:128, 0:64])
nl.store(x[0:128, 0:64], value=nl.exp(nl.multiply(a, 0.5)))
nl.store(x[0:128, 64:128], value=nl.tanh(nl.multiply(a, 2.0)))
""")
    plan = next(p for p in (await plans_for(two_sites)).value if "fold_scale_into_activation #0" in p)
    agents = OfflineAgents()
    once = await agents.write(WriteRequest(PROBLEM, KernelView(two_sites), plan, (), seed=0, sample=0))
    everywhere = await agents.write(WriteRequest(PROBLEM, KernelView(two_sites), plan, (), seed=0, sample=1))
    assert once.value.count("nisa.activation(") == 1
    assert everywhere.value.count("nisa.activation(") == 2


async def test_the_executor_refuses_a_plan_that_is_not_a_catalog_rewrite():
    result = await OfflineAgents().write(WriteRequest(PROBLEM, KernelView(MATMUL), "1. make it fast", (), seed=0))
    assert result.value is None and "only applies catalog rewrites" in result.unusable


async def test_the_offline_fixer_says_it_does_not_repair():
    result = await OfflineAgents().fix(FixRequest(PROBLEM, KernelView(MATMUL), "p", "src", "incorrect", "msg", 1, 0))
    assert result.value is None and "fix_attempts=0" in result.unusable


async def test_the_summarizer_writes_the_lesson_the_measurement_and_the_diff():
    plan = next(p for p in (await plans_for(MATMUL)).value if "[rewrite hoist_invariant_loads" in p)
    fast = (await OfflineAgents().write(WriteRequest(PROBLEM, KernelView(MATMUL), plan, (), seed=0))).value
    positive = await OfflineAgents().summarize(SummaryRequest(PROBLEM, MATMUL, fast, 1.25, "positive", plan, seed=0))
    assert positive.value.title == "Load loop-invariant tiles once"
    assert "1.25x faster (simulated)" in positive.value.summary
    assert "+    rhs_cache = nl.ndarray(" in positive.value.summary and "rewrite: `hoist_invariant_loads`" in positive.value.summary
    negative = await OfflineAgents().summarize(SummaryRequest(PROBLEM, fast, MATMUL, 1.25, "negative", plan, seed=0))
    assert negative.value.title.endswith("slower on exp_mini") and "1.25x slower" in negative.value.summary
    assert "+    rhs_cache = nl.ndarray(" in negative.value.summary  # the diff still shows the rewrite as added


async def test_asked_again_about_the_same_kernel_the_planner_proposes_what_it_has_not_yet():
    agents = OfflineAgents()

    async def top(seed):
        request = PlanRequest(problem=PROBLEM, kernel=KernelView(ELEMENTWISE), memory=(), count=1, seed=seed)
        return (await agents.plan(request)).value[0]

    first, second = await top(0), await top(1)
    assert first != second  # a beam that kept the kernel gets the next plan, not the one already evaluated
    assert (await plans_for(ELEMENTWISE, count=1, seed=0)).value[0] == first  # a fresh agent starts over
