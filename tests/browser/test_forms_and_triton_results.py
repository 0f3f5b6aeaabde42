"""The run form offers only what fits the chosen problem, without a reload; a Triton interpreter result reads
as correct, with its per-workload numbers in a table and no NKI wording (issue 32)."""

from __future__ import annotations

from typing import Any

RED = "rgb(185, 28, 28)"  # .result-bad / .bad in benchmark.css


def _visible_options(page: Any, name: str) -> list[str]:
    return page.eval_on_selector(
        f"select[name={name}]", "s => [...s.options].filter(o => !o.hidden && !o.disabled).map(o => o.value)"
    )


def _choose_problem(page: Any, label: str) -> str:
    value = page.eval_on_selector(
        "select[name=problem]", "(s, label) => [...s.options].find(o => o.textContent.includes(label)).value", label
    )
    page.select_option("select[name=problem]", value)
    return value


def test_the_run_form_offers_only_the_chosen_problems_kernels_and_platforms(pages: Any) -> None:
    page = pages.open("erin")
    page.goto("/runs/new/")
    url = page.url
    mine = page.eval_on_selector(
        "select[name=start]", "s => [...s.options].find(o => o.textContent.includes(\"erin's axpy\")).value"
    )

    _choose_problem(page, "silu:mini")
    assert mine not in _visible_options(page, "start"), "another problem's kernel is offered"
    assert _visible_options(page, "platform") == ["trn1", "trn2", "trn3"]
    assert "triton-interpreter" not in _visible_options(page, "backend")

    _choose_problem(page, "studio_axpy_h16")
    assert mine in _visible_options(page, "start")
    assert set(_visible_options(page, "platform")) <= {"h100", "h200"}
    assert page.input_value("select[name=platform]") in ("h100", "h200")
    assert page.input_value("select[name=backend]") == "triton-interpreter"
    assert "simulator" not in _visible_options(page, "backend")
    page.select_option("select[name=start]", mine)

    # Back to an NKI problem: the Triton kernel and platform are dropped for ones that fit.
    _choose_problem(page, "silu:mini")
    assert page.input_value("select[name=start]") == "baseline"
    assert page.input_value("select[name=platform]") == "trn1"
    assert page.input_value("select[name=backend]") == "simulator"
    assert page.url == url, "the form reloaded"
    help_link = page.locator(".field:has(select[name=backend]) .help a")
    assert help_link.get_attribute("href") == "/docs/operations/"
    pages.screenshot(page, "run-form-filtered")


def test_a_triton_interpreter_result_reads_correct(pages: Any) -> None:
    page = pages.open()
    page.goto("/kernels/")
    page.click("text=axpy solution")
    page.wait_for_selector("[data-testid=correctness-only]")
    cell = page.locator("[data-testid=correct-no-latency]").first
    assert cell.is_visible() and cell.evaluate("e => getComputedStyle(e).color") != RED
    text = page.inner_text("main").lower()
    for wording in ("simulating", "performance model", "x0.000", "{'"):
        assert wording not in text, wording
    assert page.locator("main .bad").count() == 0, "a correct result's errors are shown in red"
    table = page.locator("[data-testid=profile-workloads]")
    assert table.locator("tbody tr").count() == 2
    assert table.locator("thead th").all_inner_texts()[0] == "uuid"
    pages.screenshot(page, "triton-interpreter-result")
