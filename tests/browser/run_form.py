"""The new-run form as the browser tests fill it: a problem chosen by its label, then the search parameters."""

from __future__ import annotations

from typing import Any


def fill_new_run_form(page: Any, problem_label: str, fields: dict[str, str]) -> None:
    """Open /runs/new/, choose the problem whose option text includes `problem_label`, fill `fields` by name."""
    page.goto("/runs/new/")
    problem = page.eval_on_selector(
        "select[name=problem]", "(s, label) => [...s.options].find(o => o.textContent.includes(label)).value",
        problem_label,
    )
    page.select_option("select[name=problem]", problem)
    for name, value in fields.items():
        page.fill(f"input[name={name}]", value)
