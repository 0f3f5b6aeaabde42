"""An engineer evaluates a kernel and reads, beside the engine timeline, what bounds it: the verdict, the
table of engines and waits, and the Plotly bar of the critical path's shares (engine/platforms/nki/perf/explain.py)."""

from __future__ import annotations

import re
from typing import Any

from engine.platforms.nki.suites.loader import load_suite

EVALUATION_MS = 300_000  # silu:mini through the sandboxed simulator, on 2 shared cores


def test_the_kernel_page_says_what_bounds_the_kernel(pages: Any) -> None:
    engineer = pages.open("erin")
    engineer.goto("/kernels/upload/")
    silu_mini = engineer.eval_on_selector(
        "select[name=problem]", "s => [...s.options].find(o => o.textContent.startsWith('silu:mini')).value")
    engineer.select_option("select[name=problem]", silu_mini)
    source = load_suite("nkibench").problem("silu").baseline_for("mini")
    engineer.fill("textarea[name=source]", source + "\n# breakdown test\n")
    engineer.click("main form button[type=submit]")
    engineer.wait_for_url(re.compile(r"/kernels/\d+/"))
    engineer.wait_for_selector(".evaluation-panel .checks", timeout=EVALUATION_MS)
    panel = engineer.locator(".evaluation-panel").inner_text()
    assert engineer.locator(".checks li.ok", has_text="correct").count() == 1, panel
    verdict = engineer.locator(".breakdown .verdict").inner_text()
    assert re.fullmatch(r"bound by: .+ \(\d+% of the critical path\)", verdict), verdict
    assert engineer.locator(".breakdown tr.bound").count() == 1
    # Both figures are drawn by plotly.js: the engine timeline and the critical-path bars.
    engineer.wait_for_selector(".breakdown .critical-path .js-plotly-plot .main-svg")
    assert engineer.locator(".timeline .js-plotly-plot").count() == 1
    pages.screenshot(engineer, "evaluation-breakdown")
