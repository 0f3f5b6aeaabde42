"""The offline agent picks its rewrite catalog by the platform's kernel language, and writes a negative
lesson from a rewrite that failed."""

from __future__ import annotations

from engine.agents.base import KernelView, PlanRequest, ProblemContext, SummaryRequest, WriteRequest
from engine.agents.offline import OfflineAgents, parse_plan
from engine.platforms.nki.rewrites import CATALOG
from engine.platforms.triton.rewrites import TRITON_CATALOG
from tests.triton_agents.kernels import CASES, RMSNORM_UNMASKED

TRITON = ProblemContext(slug="rmsnorm_mini", reference_source="", platform="h100")


async def test_a_gpu_problem_is_planned_from_the_triton_catalog_masks_first():
    agents = OfflineAgents()
    result = await agents.plan(PlanRequest(TRITON, KernelView(RMSNORM_UNMASKED), (), count=50, seed=0))
    names = [parse_plan(p)[0].name for p in result.value]
    assert names[0] == "mask_out_of_bounds"
    assert set(names) <= {r.name for r in TRITON_CATALOG}
    assert agents.catalog_for("h200") == TRITON_CATALOG and agents.catalog_for("trn1") == CATALOG


async def test_an_nki_problem_gets_no_plan_for_a_triton_kernel():
    nki = ProblemContext(slug="rmsnorm_mini", reference_source="", platform="trn1")
    result = await OfflineAgents().plan(PlanRequest(nki, KernelView(RMSNORM_UNMASKED), (), count=5, seed=0))
    assert result.value is None and "no rewrite" in result.unusable


async def test_the_executor_applies_the_planned_triton_rewrite():
    agents = OfflineAgents()
    [plan] = (await agents.plan(PlanRequest(TRITON, KernelView(RMSNORM_UNMASKED), (), count=1, seed=0))).value
    written = await agents.write(WriteRequest(TRITON, KernelView(RMSNORM_UNMASKED), plan, (), seed=0))
    assert written.value.count("mask=cols < n_cols") == 3


async def test_a_failed_rewrite_becomes_a_negative_lesson_that_names_the_failure():
    agents = OfflineAgents()
    source = CASES["rmsnorm_masked"].source
    [plan] = [p for p in (await agents.plan(PlanRequest(TRITON, KernelView(source), (), count=50, seed=0))).value
              if "smaller_blocks" in p]
    broken = (await agents.write(WriteRequest(TRITON, KernelView(source), plan, (), seed=0))).value
    draft = (await agents.summarize(SummaryRequest(TRITON, slow_source=broken, fast_source=source, speedup=1.0,
                                                   polarity="negative", plan=plan, seed=0,
                                                   failure="incorrect: wrong output on shapes [(4, 96)]"))).value
    assert draft.title == "Use smaller blocks: failed on rmsnorm_mini"
    assert "failed its check (incorrect: wrong output" in draft.summary and "rewrite: `smaller_blocks`" in draft.summary
    assert "BLOCK=64)" in draft.summary  # the diff shows the change
    assert "simulated" not in draft.summary
