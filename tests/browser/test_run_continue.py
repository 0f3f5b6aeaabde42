"""An engineer's run stops on its evaluation budget; on its page they give it more and watch it go on to the end."""

from __future__ import annotations

import re
from typing import Any

from tests.browser.run_form import fill_new_run_form

RUN_TIMEOUT_MS = 240_000


def _status(page: Any, run_id: str) -> str:
    return page.locator(f"#run-{run_id}-state [data-status]").first.get_attribute("data-status")


def test_a_run_stopped_by_its_budget_is_continued_from_its_page(pages: Any) -> None:
    page = pages.open("erin")
    fill_new_run_form(page, "silu:mini", {"iterations": "2", "beam_width": "1", "plans_per_candidate": "2",
                                          "samples_per_plan": "1", "max_evaluations": "2"})
    with page.expect_response(lambda response: "/estimate" in response.url):
        page.locator("input[name=max_evaluations]").blur()
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = re.search(r"/runs/(\d+)/", page.url).group(1)

    # The budget stops it; the state panel then offers the form, prefilled with the old caps.
    page.wait_for_selector(f"#run-{run_id}-events .run-event--run-stopped", timeout=RUN_TIMEOUT_MS)
    page.wait_for_selector("[data-testid=run-continue]", timeout=30_000)
    assert _status(page, run_id) == "stopped"
    assert page.locator("#continue-max_evaluations").input_value() == "2"
    pages.screenshot(page, "run-continue-form")

    # A cap not above the spend is refused in place, naming it.
    page.fill("#continue-max_evaluations", "2")
    page.click("[data-testid=run-continue] button[type=submit]")
    page.wait_for_selector("[data-testid=run-continue] .error", timeout=30_000)
    assert "must be above what the run already spent" in page.locator("[data-testid=run-continue] .error").inner_text()

    page.fill("#continue-max_evaluations", "")  # no cap: it goes on to its last iteration
    page.click("[data-testid=run-continue] button[type=submit]")
    page.wait_for_selector(f"#run-{run_id}-events .run-event--run-continued", timeout=30_000)
    page.wait_for_selector(f"#run-{run_id}-events .run-event--run-finished", timeout=RUN_TIMEOUT_MS)
    page.wait_for_function(
        f"() => document.querySelector('#run-{run_id}-state [data-status]').dataset.status === 'succeeded'",
        timeout=30_000)
    assert page.locator("[data-testid=run-continue]").count() == 0
    kinds = page.eval_on_selector_all(f"#run-{run_id}-events [data-seq]", "items => items.map(i => i.className)")
    stopped = next(i for i, k in enumerate(kinds) if "run-stopped" in k)
    continued = next(i for i, k in enumerate(kinds) if "run-continued" in k)
    assert stopped < continued < len(kinds) - 1
