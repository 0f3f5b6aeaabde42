"""A curator prunes a memory entry and restores it; each change shows in the entry's history with who."""

from __future__ import annotations

from typing import Any

TITLE = "Hoist the scale out of the inner loop"  # seeded by tests/browser/seed.py


def _open_entry(page: Any) -> None:
    page.goto("/memory/?status=all")
    page.get_by_role("link", name=TITLE).click()
    page.wait_for_selector("[data-testid=entry-status]")


def test_a_curator_prunes_an_entry_and_restores_it(pages: Any) -> None:
    page = pages.open("cora")
    _open_entry(page)
    assert page.locator(".diff-table").count() == 1  # slow vs fast side by side
    pages.screenshot(page, "memory-entry")

    page.get_by_role("button", name="Prune").click()
    page.wait_for_load_state()
    assert page.locator("[data-testid=entry-status]").inner_text() == "pruned"
    page.goto("/memory/")  # the default view leaves pruned entries out
    assert page.get_by_role("link", name=TITLE).count() == 0

    _open_entry(page)
    page.get_by_role("button", name="Restore").click()
    page.wait_for_load_state()
    assert page.locator("[data-testid=entry-status]").inner_text() == "active"
    history = page.locator(".history tbody").inner_text()
    assert "pruned" in history.lower() and "restored" in history.lower() and "cora" in history
    page.goto("/memory/")
    assert page.get_by_role("link", name=TITLE).count() == 1
    pages.screenshot(page, "memory-list")


def test_an_engineer_reads_the_memory_but_gets_no_curator_controls(pages: Any) -> None:
    page = pages.open("tom")
    _open_entry(page)
    assert page.get_by_role("button", name="Prune").count() == 0
    # Through the page's own session, without navigating (a 403 page would log a console error).
    response = page.request.get(page.url + "edit/")
    assert response.status == 403
