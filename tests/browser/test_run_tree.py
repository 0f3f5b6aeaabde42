"""An engineer launches an offline run with an evaluation budget, sees it stop as "stopped: budget" with its
progress bar full, opens the run's search tree and a node's diff against its parent, in real Chromium."""

from __future__ import annotations

import re
from typing import Any

from tests.browser.run_form import fill_new_run_form

RUN_TIMEOUT_MS = 240_000


def test_a_budgeted_run_stops_and_its_search_tree_opens_a_nodes_diff(pages: Any) -> None:
    page = pages.open("erin")
    fill_new_run_form(page, "rope_single_freq_apply:mini", {"iterations": "3", "beam_width": "1",
                                                            "plans_per_candidate": "2", "samples_per_plan": "1",
                                                            "max_evaluations": "2"})
    # The estimate under the form checks the budget against what the search parameters allow.
    page.locator("input[name=max_evaluations]").blur()
    page.locator("#run-estimate", has_text="Stops after 2 evaluations, of up to 7").wait_for()
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = re.search(r"/runs/(\d+)/", page.url).group(1)

    # The run stops on its evaluation cap; the state panel says so and shows the full bar.
    page.wait_for_selector(f"#run-{run_id}-state [data-status=stopped]", timeout=RUN_TIMEOUT_MS)
    state = page.locator(f"#run-{run_id}-state")
    assert "stopped: budget" in state.inner_text() and "evaluations budget was reached" in state.inner_text()
    assert page.locator("[data-budget=max_evaluations] progress").get_attribute("value") == "1.0000"

    # The search tree loads when its panel is opened: the start and the kernels under it.
    page.click(f"#run-{run_id}-tree-panel > summary")
    page.wait_for_selector("[data-testid=search-tree]")
    assert page.locator(".tree-node[data-key=start]").count() == 1
    written = page.locator(".tree-node[data-key^='1.']:not([data-outcome=failed]) .tree-link").first
    key = written.inner_text()
    written.click()
    detail = page.locator(f"[data-testid=tree-node-detail][data-key='{key}']")
    detail.wait_for()
    text = detail.inner_text()
    assert "Diff against its parent" in text and "Plan" in text and "Agent calls" in text
    assert detail.locator(".diff-table tr.diff-changed, .diff-table tr.diff-added, .diff-table tr.diff-removed").count() > 0
    pages.screenshot(page, "run-tree")
