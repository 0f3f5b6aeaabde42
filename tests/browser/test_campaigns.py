"""An engineer launches a campaign over three NKIBench mini problems with the offline agent, watches its rows fill
and its geomean chart grow without reloading, opens one of its runs' search tree and a node's diff, then compares
it with a second campaign.

One test: each step needs the previous one's result, and the runs take real simulator time (tiny searches:
2 iterations of one plan per kernel). The second campaign repeats the same problems without memory; the
offline agent is deterministic, so most of its kernels are already in the evaluation cache.
"""

from __future__ import annotations

import re
from typing import Any

PROBLEMS = ("silu", "rope_single_freq_apply", "swiglu")
CAMPAIGN_TIMEOUT_MS = 300_000


def _launch(page: Any, name: str, iterations: int, memory: bool) -> str:
    page.goto("/campaigns/new/")
    page.fill("input[name=name]", name)
    page.select_option("select[name=problems]", list(PROBLEMS))
    page.select_option("select[name=case]", "mini")
    for field, value in (("iterations", iterations), ("beam_width", 1), ("plans_per_candidate", 2),
                         ("samples_per_plan", 1), ("rewrites_per_iteration", 2), ("memory_size", 2)):
        page.fill(f"input[name={field}]", str(value))
    if not memory:
        page.uncheck("input[name=memory]")
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r"/campaigns/\d+/$"))
    return re.search(r"/campaigns/(\d+)/", page.url).group(1)


def _chart_points(page: Any) -> int:
    return page.evaluate(
        "() => { const plot = document.querySelector('[data-testid=iteration-chart] .js-plotly-plot');"
        " return plot && plot.data ? plot.data[0].x.length : 0; }"
    )


def _states(page: Any) -> list[str]:
    return page.eval_on_selector_all(".campaign-rows tr[data-state]", "rows => rows.map(r => r.dataset.state)")


def test_an_engineer_runs_two_campaigns_watches_one_live_and_compares_them(pages: Any) -> None:
    page = pages.open("erin")

    # Launch: three rows at once, one run queued (the worker drives one at a time), the others waiting.
    first = _launch(page, "three minis", iterations=2, memory=True)
    assert page.locator(".campaign-rows tr[data-problem]").count() == 3
    assert _states(page)[1:] == ["pending", "pending"]
    pages.screenshot(page, "campaign-launched")

    # Live, no reload: the first baseline's evaluation draws the chart, each finished iteration adds a point,
    # and the rows move from waiting to finished one after the other.
    page.wait_for_function("() => !!document.querySelector('[data-testid=iteration-chart] .js-plotly-plot')",
                           timeout=CAMPAIGN_TIMEOUT_MS)
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-testid=iteration-chart] .js-plotly-plot');"
        " return p && p.data && p.data[0].x.length >= 2; }", timeout=CAMPAIGN_TIMEOUT_MS)
    points_mid_run = _chart_points(page)
    pages.screenshot(page, "campaign-live")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=campaign-status]').textContent.trim() === 'Finished'",
        timeout=CAMPAIGN_TIMEOUT_MS)
    assert _states(page) == ["succeeded"] * 3
    # The last swap's chart is drawn with it (plotly_figures.js on htmx:afterSwap); a moment of grace for the
    # browser to run that handler after the text we waited for.
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-testid=iteration-chart] .js-plotly-plot');"
        " return p && p.data && p.data[0].x.length === 3; }", timeout=5000)
    assert _chart_points(page) == 3 >= points_mid_run  # iteration 0 (the baselines), 1 and 2
    assert re.match(r"\d+\.\d% → \d+\.\d%", page.locator("[data-testid=geomean]").inner_text())
    assert page.locator("a", has_text="CSV").count() == 1
    pages.screenshot(page, "campaign-finished")

    # One of its runs: an ordinary run page; its search tree opens a node's diff against its parent.
    page.locator(".campaign-rows tr[data-problem] a[href^='/runs/']").first.click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = re.search(r"/runs/(\d+)/", page.url).group(1)
    page.click(f"#run-{run_id}-tree-panel > summary")
    page.wait_for_selector("[data-testid=search-tree]")
    node = page.locator(".tree-node[data-key^='1.']:not([data-outcome=failed]) .tree-link").first
    key = node.inner_text()
    node.click()
    detail = page.locator(f"[data-testid=tree-node-detail][data-key='{key}']")
    detail.wait_for()
    assert detail.locator(".diff-table").count() == 1
    pages.screenshot(page, "campaign-run-tree")

    # A second campaign (memory off, one iteration), then the two side by side.
    second = _launch(page, "no memory", iterations=1, memory=False)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=campaign-status]').textContent.trim() === 'Finished'",
        timeout=CAMPAIGN_TIMEOUT_MS)
    page.goto("/campaigns/")
    page.check(f"input[name=ids][value='{first}']")
    page.check(f"input[name=ids][value='{second}']")
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r"/campaigns/compare/"))
    assert page.locator(".compare-summary tr[data-campaign]").count() == 2
    assert page.locator(".compare-rows tr[data-problem]").count() == 3
    traces = page.evaluate(
        "() => document.querySelector('[data-testid=compare-iteration-chart] .js-plotly-plot').data.length")
    assert traces == 2
    pages.screenshot(page, "campaign-compare")
