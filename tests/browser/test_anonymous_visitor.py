"""An anonymous visitor sees the public leaderboard and is sent to log in for the editor pages."""

from __future__ import annotations

from typing import Any


def test_an_anonymous_visitor_sees_the_leaderboard_with_the_published_accelopt_rows(pages: Any) -> None:
    page = pages.open()
    page.goto("/leaderboard/")
    assert page.locator("h1").inner_text().startswith("NKIBench leaderboard")  # "· full cases on trn1" follows
    assert page.locator("tr[data-problem='silu:full']").count() == 1  # the full board is the default
    # AccelOpt's published trn1 latency sits in the silu row's measured column group.
    reference = page.locator("tr[data-problem='silu:full'] td.group-measured[data-reference='silu_M4096_N7168']")
    assert reference.count() == 1 and "ms" in reference.inner_text()
    assert page.locator("#leaderboard-chart").count() == 0 or page.locator("#leaderboard-chart .js-plotly-plot").count() == 1
    pages.screenshot(page, "leaderboard-anonymous")


def test_an_anonymous_visitor_is_sent_to_log_in_instead_of_the_run_form(pages: Any) -> None:
    page = pages.open()
    page.goto("/runs/new/")
    assert "/accounts/login/" in page.url
    assert page.locator("input[name=password]").count() == 1


def test_an_anonymous_visitor_is_sent_to_log_in_instead_of_the_memory_editor(pages: Any) -> None:
    page = pages.open()
    for address in ("/memory/", "/memory/1/edit/", "/memory/import/"):
        page.goto(address)
        assert "/accounts/login/" in page.url, address


def test_an_anonymous_visitor_sees_public_runs_only_and_is_told_what_to_do(pages: Any) -> None:
    page = pages.open()
    page.goto("/runs/")
    assert page.locator(".tabs a").all_inner_texts() == ["Public"]
    assert "Log in" in page.locator(".empty").inner_text() or page.locator(".runs-table").count() == 1
