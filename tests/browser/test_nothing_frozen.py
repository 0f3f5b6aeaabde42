"""Nothing looks frozen, and the run page's memory panel says what the database holds (issue 32).

This module starts its own server with one evaluation worker and a short evaluation timeout; three uploaded
kernels that never return hold that worker for a while, so the run's kernels really wait in line behind them:
the run page must show "queued (n ahead)" with a growing time, the number falling as those ahead finish, and
the queue page the same. Then a second run learns the same lessons again: its memory panel
lists the entries that hold them (written by the first run), each once, before and after the live replay.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.conftest import Pages, seeded_server
from tests.browser.run_form import fill_new_run_form

RUN_TIMEOUT_MS = 300_000
SLOW_S = 8
# No memory shown to the Planner: each run plans the same rewrites, so a later run learns the same lessons again.
SEARCH = {"iterations": "1", "beam_width": "1", "plans_per_candidate": "3", "samples_per_plan": "2",
          "memory_size": "0"}
# Every text a kernel's evaluation cell shows, in order, by cell id (the page's own script rewrites them).
RECORD_CELLS = """
window.__cells = {};
new MutationObserver(() => {
  document.querySelectorAll('.cand-eval[id]').forEach(cell => {
    const seen = (window.__cells[cell.id] = window.__cells[cell.id] || []);
    const text = cell.textContent.trim();
    if (seen[seen.length - 1] !== text) seen.push(text);
  });
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh seeded server whose evaluations run one at a time."""
    # A kernel that never returns holds the one worker for SLOW_S: the line behind it is there to see.
    with seeded_server(tmp_path_factory.mktemp("one-worker"), ACCELOPT_EVALUATION_WORKERS="1",
                       ACCELOPT_EVALUATION_TIMEOUT_S=str(SLOW_S)) as base:
        yield base


@pytest.fixture
def pages(browser: Any, one_worker: str) -> Iterator[Pages]:
    opened = Pages(browser, one_worker)
    yield opened
    for context in opened.contexts:
        context.close()
    assert opened.errors == [], "console errors:\n" + "\n".join(opened.errors)


def _launch(page: Any) -> str:
    fill_new_run_form(page, "silu:mini", SEARCH)
    page.click("main form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    return re.search(r"/runs/(\d+)/", page.url).group(1)


def _memory_panel(page: Any, run_id: str) -> list[str]:
    return page.eval_on_selector_all(f"#run-{run_id}-memory-panel li[data-entry]",
                                     "items => items.map(i => i.dataset.entry + ':' + i.dataset.how)")


def _upload_never_returning_kernels(page: Any, count: int) -> None:
    from tests.benchmark.bad_inputs import BAD_INPUTS

    source = next(case.kernel for case in BAD_INPUTS if case.name == "too_slow")
    for n in range(count):
        page.goto("/kernels/upload/")
        option = page.eval_on_selector(
            "select[name=problem]", "s => [...s.options].find(o => o.textContent.includes('silu:mini')).value")
        page.select_option("select[name=problem]", option)
        page.fill("textarea[name=source]", f"{source}\n# slow {n}\n")
        page.click("main form button[type=submit]")
        page.wait_for_url(re.compile(r"/kernels/\d+/"))


def test_waiting_kernels_show_their_place_in_line_and_the_time_they_have_waited(pages: Any) -> None:
    page = pages.open("erin")
    _upload_never_returning_kernels(page, 3)
    page.add_init_script(RECORD_CELLS)
    run_id = _launch(page)
    page.wait_for_function("() => /queued \\(\\d+ ahead\\) · \\d+ s/.test(document.body.textContent)",
                           timeout=60_000)
    pages.screenshot(page, "run-start-kernel-queued")

    # While the line waits behind the one worker, the queue page lists it in order, with the times.
    queue = pages.open("erin")
    queue.goto("/ops/evaluations/")
    queue.wait_for_function(
        "() => /\\d+ queued ahead/.test(document.body.textContent) && /running for \\d+/.test(document.body.textContent)",
        timeout=60_000)
    pages.screenshot(queue, "evaluation-queue")
    waited = queue.locator("[data-testid=queue-elapsed]").first.inner_text()
    queue.wait_for_function("w => document.querySelector('[data-testid=queue-elapsed]').textContent.trim() !== w",
                            arg=waited, timeout=20_000)  # the table re-reads itself: the times move

    page.wait_for_selector(f"#run-{run_id}-events .run-event--run-finished", timeout=RUN_TIMEOUT_MS)
    assert page.locator(".cand-eval[data-pending]").count() == 0  # every kernel ended with its result

    cells: dict[str, list[str]] = page.evaluate("() => window.__cells")
    kernels = {cell: texts for cell, texts in cells.items() if "-cand-" in cell or cell.endswith("-start-eval")}
    assert len(kernels) > 1, cells
    for cell, texts in kernels.items():
        assert "written" not in texts[-1] and "queued" not in texts[-1], (cell, texts)
    shown = [text for texts in kernels.values() for text in texts]
    assert any(re.fullmatch(r"queued \(\d+ ahead\) · \d+ s", t) for t in shown), shown
    assert any(re.fullmatch(r"running · \d+ s", t) for t in shown), shown
    # Someone's place moved up as those ahead of it finished.
    ahead = [[int(n or 0) for t in texts for n in re.findall(r"queued \((?:(\d+) ahead|next)\)", t)]
             for texts in kernels.values()]
    assert any(len(seq) >= 2 and seq[-1] < seq[0] for seq in ahead), kernels

    queue.reload()
    assert "Nothing is queued or running" in queue.locator("main").inner_text()


def test_the_memory_panel_lists_each_entry_once_before_and_after_the_replay(pages: Any) -> None:
    page = pages.open("erin")
    first = _launch(page)
    page.wait_for_selector(f"#run-{first}-events .run-event--run-finished", timeout=RUN_TIMEOUT_MS)
    pages.screenshot(page, "run-memory-first")
    page.wait_for_selector(f"#run-{first}-memory-panel li[data-entry]", timeout=20_000)
    written_by_first = {item.split(":")[0] for item in _memory_panel(page, first)}
    assert written_by_first  # new entries, or (after the test above) ones its run wrote: learned again

    # The same search again: the same lessons, filed under the entries the first run wrote.
    second = _launch(page)
    page.wait_for_selector(f"#run-{second}-events .run-event--run-finished", timeout=RUN_TIMEOUT_MS)
    time.sleep(1)  # the last memory refresh (at most every 0.4 s) lands
    live = _memory_panel(page, second)

    # A fresh page: the panel from the database, then again after the whole event log is replayed over it.
    with page.expect_response(lambda r: f"/runs/{second}/memory/" in r.url, timeout=60_000):
        page.reload()
        before = _memory_panel(page, second)
    page.wait_for_selector(f"#run-{second}-events .run-event--run-finished")
    time.sleep(1)
    after = _memory_panel(page, second)
    pages.screenshot(page, "run-memory-learned-again")

    assert before == after == live, (before, after, live)
    assert len(after) == len(set(after)), after  # each entry once
    assert {item.split(":")[0] for item in after} <= written_by_first
    assert all(item.endswith(":learned again") for item in after), after
    hint = page.locator(f"#run-{second}-memory-panel .hint").inner_text()
    assert hint.startswith(f"{len(after)} entr"), hint
    # The entries' own pages (the database) name this run among their evidence.
    page.locator(f"#run-{second}-memory-panel li[data-entry] a").first.click()
    page.wait_for_url(re.compile(r"/memory/\d+/"))
    assert page.locator(f"a[href^='/runs/{second}/candidates/']").count() >= 1
