"""An engineer uploads a kernel, launches an offline-agent run from it and watches it live.

One test, because each step needs the previous one's result (the kernel, then the run) and the run takes
real simulator time; the assertions name the step that failed.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_MS = 240_000
ITERATIONS = 5  # enough that the reload after the first one lands mid-run


def _seqs(page: Any, run_id: str) -> list[int]:
    return [int(s) for s in page.eval_on_selector_all(f"#run-{run_id}-events [data-seq]",
                                                        "items => items.map(i => i.dataset.seq)")]


def _chart_points(page: Any, run_id: str) -> int:
    return page.evaluate(
        f"() => {{ const plot = document.querySelector('#run-{run_id}-chart .js-plotly-plot');"
        " return plot && plot.data ? plot.data[0].x.length : 0; }"
    )


def test_an_engineer_uploads_a_kernel_launches_a_run_and_watches_it_live(pages: Any) -> None:
    page = pages.open("erin")

    # Upload: the silu baseline with a comment, so it is a new kernel of the engineer's own.
    source = (REPO / "engine/platforms/nki/suites/nkibench/baselines/silu.py").read_text() + "\n# erin's copy\n"
    page.goto("/kernels/upload/")
    silu_mini = page.eval_on_selector(
        "select[name=problem]", "s => [...s.options].find(o => o.textContent.includes('silu:mini')).value"
    )
    page.select_option("select[name=problem]", silu_mini)
    page.fill("textarea[name=source]", source)
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r"/kernels/\d+/"))
    kernel_id = re.search(r"/kernels/(\d+)/", page.url).group(1)

    # Launch from that kernel with a small search.
    page.goto(f"/runs/new/?kernel={kernel_id}")
    assert page.locator("select[name=start]").input_value() == kernel_id
    for name, value in (("iterations", str(ITERATIONS)), ("beam_width", "1"), ("plans_per_candidate", "2"),
                        ("samples_per_plan", "1")):
        page.fill(f"input[name={name}]", value)
    # Leaving the last field fires the form's htmx `change` request for the estimate. Leave it now and let
    # the answer land: left to the screenshot or the click below, the request raced the form's submission
    # and the click sometimes submitted nothing.
    with page.expect_response(lambda response: "/estimate" in response.url):
        page.locator(f"input[name={name}]").blur()
    assert "no cost" in page.locator("#run-estimate").inner_text()
    pages.screenshot(page, "run-form")
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = re.search(r"/runs/(\d+)/", page.url).group(1)

    # Events arrive without reloading, and the chart appears once an iteration has finished.
    page.wait_for_selector(f"#run-{run_id}-events [data-seq]", timeout=30_000)
    page.wait_for_selector(f"#run-{run_id}-iterations .plan", timeout=RUN_TIMEOUT_MS)
    page.wait_for_function(f"() => !!document.querySelector('#run-{run_id}-chart .js-plotly-plot')",
                           timeout=RUN_TIMEOUT_MS)
    points_before_reload = _chart_points(page, run_id)
    assert points_before_reload >= 2  # the start and iteration 1
    seen_before_reload = _seqs(page, run_id)
    finished_before_reload = page.locator(f"#run-{run_id}-events .run-event--run-finished").count() > 0
    pages.screenshot(page, "run-live")

    # Reload mid-run: the whole history is replayed, with no gap and no duplicate, and the run goes on.
    page.reload()
    page.wait_for_function(
        f"n => document.querySelectorAll('#run-{run_id}-events [data-seq]').length >= n",
        arg=len(seen_before_reload), timeout=30_000,
    )
    page.wait_for_selector(f"#run-{run_id}-events .run-event--run-finished", timeout=RUN_TIMEOUT_MS)
    time.sleep(1.0)  # let the last refreshes of the state panel and the chart land
    seqs = _seqs(page, run_id)
    assert seqs == list(range(1, len(seqs) + 1)), f"gap or duplicate in {seqs}"
    assert seqs[: len(seen_before_reload)] == seen_before_reload
    if not finished_before_reload:
        assert _chart_points(page, run_id) > points_before_reload, "the chart did not grow after the reload"
    assert _chart_points(page, run_id) == ITERATIONS + 1  # the start, then one point per iteration
    assert page.locator(f"#run-{run_id}-state [data-status]").first.get_attribute("data-status") == "succeeded"
    assert page.locator(f"#run-{run_id}-iterations .candidate").count() >= 3
    assert "correct" in page.locator(f"#run-{run_id}-iterations .cand-eval").first.inner_text()

    # A finished run's page (loaded fresh) shows its best kernel and lineage; a candidate has a diff.
    page.reload()
    page.wait_for_selector(f"#run-{run_id}-events .run-event--run-finished", timeout=30_000)
    assert page.locator(".run-result h2").first.inner_text() in ("Best kernel", "Result")
    pages.screenshot(page, "run-finished")
    page.locator(f"#run-{run_id}-iterations .candidate a").first.click()
    page.wait_for_url(re.compile(r"/candidates/"))
    assert page.locator(".diff-table").count() == 1
    pages.screenshot(page, "run-candidate-diff")

    # The runs list shows it under "mine" with its status.
    page.goto("/runs/?scope=mine")
    assert page.locator(f"a[href='/runs/{run_id}/']").count() == 1
    assert page.locator(".runs-table .status").first.get_attribute("data-status") == "succeeded"
