"""A new user's first hour (issue 20), in a real browser against a server started the way `make run` starts it:
the suite's baselines evaluate in the background while the pages show the progress; a kernel written against
NKIBench's published silu interface, uploaded to silu:full, is correct with a fraction of peak; the boards
keep mini and full apart and simulated and measured apart; the grid opens a run's transcript.

One test, because each step needs the previous one's server state, and the full-size evaluation takes real
simulator time. This module starts its own server (the shared one has background evaluation off), with the
background pass on the mini cases only: the full ones take minutes each (measurements/first_run.py times
them). Screenshots go to var/screenshots/ (ACCELOPT_SCREENSHOTS).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import REPO, Pages, _free_port, _wait_until_up

UPLOAD = Path(__file__).resolve().parent / "kernels" / "silu_nkibench_layout.py"
FULL_EVALUATION_MS = 900_000  # a full-size silu evaluation: about a minute alone, more beside the baselines


@pytest.fixture(scope="module")
def first_contact(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """(base URL, run id, kernel id) of a fresh server whose baselines evaluate in the background."""
    var = tmp_path_factory.mktemp("first-contact")
    env = {
        **os.environ, "ACCELOPT_VAR_DIR": str(var), "DATABASE_URL": f"sqlite:///{var / 'db.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "accelopt_site.settings", "ACCELOPT_EMBEDDED_WORKER": "1",
        "ACCELOPT_BACKGROUND_BASELINES": "mini", "PYTHONUNBUFFERED": "1",
    }
    env.pop("REDIS_URL", None)
    for script in ("seed.py", "seed_transcript.py"):
        done = subprocess.run([sys.executable, str(REPO / "tests" / "browser" / script)], env=env, cwd=REPO,
                              check=True, capture_output=True, text=True, timeout=300)
    run_id, kernel_id = re.search(r"run (\d+) kernel (\d+)", done.stdout).groups()
    port = _free_port()
    log = (var / "daphne.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "accelopt_site.asgi:application"],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(f"{base}/healthz", process)
        yield base, run_id, kernel_id
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_first_contact(browser: Any, first_contact: tuple[str, str, str]) -> None:
    base, run_id, kernel_id = first_contact
    pages = Pages(browser, base)
    try:
        _walk_through(pages, run_id, kernel_id)
    finally:
        for context in pages.contexts:
            context.close()
    assert pages.errors == [], "console errors:\n" + "\n".join(pages.errors)


def _walk_through(pages: Pages, run_id: str, kernel_id: str) -> None:
    # 1. The server answers at once; the mini board shows the baselines being evaluated, and fills in.
    visitor = pages.open()
    visitor.goto("/leaderboard/?case=mini")
    count = visitor.locator('[data-testid="baseline-count-mini"]')
    assert re.fullmatch(r"\d+ of 14", count.inner_text()), count.inner_text()
    pages.screenshot(visitor, "leaderboard-progress")
    # The fragment updates itself (htmx, every 5 s) without a reload until the first baseline is done.
    visitor.wait_for_function(
        "() => { const c = document.querySelector('[data-testid=baseline-count-mini]');"
        " return !c || !c.textContent.startsWith('0 of'); }", timeout=300_000)
    visitor.reload()
    assert visitor.locator('[data-testid="simulated-latency"]').count() >= 1

    # 2. An engineer uploads a kernel in NKIBench's published silu layout to silu:full: correct, with a peak fraction.
    engineer = pages.open("erin")
    engineer.goto("/kernels/upload/")
    silu_full = engineer.eval_on_selector(
        "select[name=problem]", "s => [...s.options].find(o => o.textContent.startsWith('silu:full')).value")
    engineer.select_option("select[name=problem]", silu_full)
    engineer.fill("textarea[name=source]", UPLOAD.read_text())
    engineer.click("main form button[type=submit]")
    engineer.wait_for_url(re.compile(r"/kernels/\d+/"))
    engineer.wait_for_selector(".evaluation-panel .checks", timeout=FULL_EVALUATION_MS)
    assert engineer.locator(".checks li.ok", has_text="correct").count() == 1, engineer.locator(".evaluation-panel").inner_text()
    peak = engineer.locator("dl.headline dt:has-text('Peak fraction') + dd").inner_text()
    assert re.fullmatch(r"\d+(\.\d)?%", peak) and float(peak[:-1]) > 0, peak
    # The evaluations table follows the panel (it used to keep saying "running").
    row_result = engineer.locator("[id^=evaluation-][id$=-result]").first.inner_text()
    assert "running" not in row_result and "of peak" in row_result, row_result
    assert engineer.locator('[data-testid="optimize-kernel"]').count() == 1
    pages.screenshot(engineer, "upload-nkibench-silu-full")

    # 3. The full board ranks it in the simulated columns; measured columns stay apart (AccelOpt's published row).
    visitor.goto("/leaderboard/?case=full")
    silu = visitor.locator('tr[data-problem="silu:full"]')
    assert silu.locator('[data-testid="simulated-latency"]').count() == 1
    assert silu.locator("[data-reference]").count() == 1  # the published trn1 latency, in the measured group
    assert "silu:mini" not in visitor.locator('[data-testid="board"]').inner_text()
    pages.screenshot(visitor, "leaderboard-full")
    visitor.goto("/leaderboard/?case=mini")
    assert "silu:full" not in visitor.locator('[data-testid="board"]').inner_text()
    pages.screenshot(visitor, "leaderboard-mini")

    # 4. The grid's cell opens the run and the transcript of its best kernel: every role, its model and tokens.
    visitor.click('[data-testid="grid-link"]')
    visitor.wait_for_url(re.compile(r"/leaderboard/grid/"))
    cell = visitor.locator('tr[data-problem="rmsnorm_matmul:mini"] [data-testid="grid-cell"]')
    assert cell.get_attribute("href") == f"/runs/{run_id}/"
    pages.screenshot(visitor, "leaderboard-grid")
    visitor.locator('tr[data-problem="rmsnorm_matmul:mini"] a', has_text="transcript").click()
    visitor.wait_for_url(re.compile(rf"/runs/{run_id}/kernels/{kernel_id}/transcript/"))
    roles = visitor.eval_on_selector_all(".agent-call", "calls => calls.map(c => c.dataset.role)")
    assert roles == ["planner", "executor", "fixer", "summarizer"]
    assert "qwen3-coder-480b" in visitor.locator(".agent-call h3").first.inner_text()
    pages.screenshot(visitor, "transcript")
