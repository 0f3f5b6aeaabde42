"""A FlashInfer-Bench solution uploaded on the import page is judged correct on Triton's CPU interpreter (issue 32,
"Show"): with only what `make run` installs (the triton extra), an engineer imports our rmsnorm_h128 definition,
a workload and our own committed solution (tests/fixtures/rmsnorm_h128_one_row.json), and the kernel's page ends
on a correct verdict; nothing is installed by hand and the page never asks for it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.browser.conftest import REPO, Pages

SAMPLES = REPO / "engine" / "platforms" / "triton" / "samples"
SOLUTION = REPO / "tests" / "fixtures" / "rmsnorm_h128_one_row.json"
EVALUATION_TIMEOUT_MS = 240_000  # the interpreter and the sandbox on 2 shared cores


def test_an_imported_solution_is_judged_correct_on_the_interpreter(pages: Pages, tmp_path: Path) -> None:
    # The import takes workloads one JSON object per line (.jsonl), as flashinfer-trace ships them.
    workloads = tmp_path / "rmsnorm_h128.jsonl"
    workloads.write_text(json.dumps(json.loads((SAMPLES / "workloads" / "rmsnorm_h128_b7.json").read_text())) + "\n")
    page = pages.open("erin")
    page.goto("/problems/import-flashinfer/")
    assert page.locator("[data-testid=evaluation-unavailable]").count() == 0, "the Triton extra is not installed"
    page.set_input_files("input[type=file]", [str(SAMPLES / "definitions" / "rmsnorm_h128.json"), str(workloads),
                                              str(SOLUTION)])
    page.select_option("select[name=platform]", "h100")
    page.check("input[name=evaluate]")
    page.click("main form button[type=submit]")
    page.wait_for_load_state()
    assert page.locator("[data-testid=import-errors]").count() == 0, page.locator("main").inner_text()[:2000]
    assert "rmsnorm_h128" in page.locator("h1").inner_text()  # the new problem's page
    page.click("main a:has-text('studio_rmsnorm_h128_one_row')")
    page.wait_for_load_state()
    verdict = page.locator(".evaluation-panel .checks li.ok", has_text="correct")
    verdict.wait_for(timeout=EVALUATION_TIMEOUT_MS)
    panel = page.locator(".evaluation-panel").inner_text()
    assert "triton-interpreter" in panel and "error" not in panel.lower().replace("relative l2 error", ""), panel
    pages.screenshot(page, "flashinfer-solution-correct-on-interpreter")
