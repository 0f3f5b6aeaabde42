"""Issue 36: every page carries a Content-Security-Policy that allows no inline script, and the pages still
work under it in Chromium: htmx requests, a Plotly chart drawn from the server's figure, the live websocket.
Any violation is recorded by the page itself (securitypolicyviolation) and fails the test, as does any
console error (the `pages` fixture)."""

from __future__ import annotations

import re
from typing import Any

RUN_TIMEOUT_MS = 240_000
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`));
"""


def test_pages_work_under_the_content_security_policy(pages: Any) -> None:
    page = pages.open("erin")
    page.context.add_init_script(RECORD_VIOLATIONS)

    response = page.goto("/runs/new/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in policy

    # htmx: the form's estimate is fetched as the fields change.
    silu_mini = page.eval_on_selector(
        "select[name=problem]", "s => [...s.options].find(o => o.textContent.includes('silu:mini')).value")
    page.select_option("select[name=problem]", silu_mini)
    for name, value in (("iterations", "1"), ("beam_width", "1"), ("plans_per_candidate", "1"),
                        ("samples_per_plan", "1")):
        page.fill(f"input[name={name}]", value)
    with page.expect_response(lambda r: "/estimate" in r.url):
        page.locator("input[name=samples_per_plan]").blur()
    assert "no cost" in page.locator("#run-estimate").inner_text()

    # The websocket: events arrive live; then the chart is fetched by htmx and drawn by plotly_figures.js.
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run_id = re.search(r"/runs/(\d+)/", page.url).group(1)
    page.wait_for_selector(f"#run-{run_id}-events [data-seq]", timeout=30_000)
    page.wait_for_function(f"() => !!document.querySelector('#run-{run_id}-chart .js-plotly-plot')",
                           timeout=RUN_TIMEOUT_MS)
    assert page.evaluate(f"() => document.querySelector('#run-{run_id}-chart .js-plotly-plot').data.length") >= 1

    assert page.evaluate("() => window.__cspViolations") == []
