"""The Planner's bounded view of the memory."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.agents.base import MemoryItem, ProblemContext
from engine.memory.selection import UNRELATED, relevance, select_for_planner
from engine.search import ListOptimizationMemory
from memory import services
from memory.models import EntryStatus


def test_pinned_entries_are_always_selected_even_when_old(make_entry):
    pinned = services.pin_entry(make_entry(title="old but pinned"))
    for _ in range(5):
        make_entry()
    selected = services.select_entries(limit=3)
    assert pinned in selected
    assert len(selected) == 3


def test_pruned_entries_are_never_selected(make_entry):
    pruned = services.prune_entry(make_entry())
    selected = services.select_entries(limit=10)
    assert pruned not in selected
    assert selected == []


def test_entries_of_the_same_problem_come_before_newer_unrelated_ones(make_entry, problem, other_problem):
    same_problem = make_entry(problem=problem)
    same_family = make_entry(family=problem.family)
    for _ in range(3):
        make_entry(problem=other_problem)
    selected = services.select_entries(problem=problem, family=problem.family, limit=2)
    assert selected == [same_problem, same_family]


def test_newest_entries_come_first_within_equal_relevance(make_entry):
    older, newer = make_entry(), make_entry()
    assert services.select_entries(limit=1) == [newer]
    assert older.status == EntryStatus.ACTIVE


def test_the_problem_family_is_taken_from_the_problem_when_not_given(make_entry, problem):
    assert make_entry(problem=problem).family == "elementwise"


# --- the rule itself (engine.memory.selection, no database) ---------------------------------------------------


@dataclass(frozen=True)
class Entry:
    name: str
    pinned: bool = False
    problem: object = None
    family: str = ""


def names(entries: list[Entry]) -> list[str]:
    return [entry.name for entry in entries]


def test_the_rule_keeps_every_pinned_entry_even_past_the_limit_newest_first():
    entries = [Entry("new pinned", pinned=True), Entry("newest"), Entry("old pinned", pinned=True)]
    assert names(select_for_planner(entries, limit=1)) == ["new pinned", "old pinned"]
    assert names(select_for_planner(entries, limit=0)) == ["new pinned", "old pinned"]


def test_the_rule_ranks_same_problem_then_same_family_then_any_newest_first_within_each():
    entries = [Entry("unrelated", family="matmul"), Entry("family", family="elementwise"),
               Entry("problem new", problem=7), Entry("problem old", problem=7, family="elementwise")]
    selected = select_for_planner(entries, limit=3, problem=7, family="elementwise")
    assert names(selected) == ["problem new", "problem old", "family"]


def test_a_blank_problem_or_family_matches_nothing():
    assert relevance(Entry("x", problem="", family=""), problem="", family="") == UNRELATED
    assert relevance(Entry("x", problem=None), problem=None) == UNRELATED


def test_the_selection_rule_and_the_search_core_import_no_django():
    code = ("import sys, engine.memory.selection, engine.search; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.stdout.strip() == "[]"


# --- one rule for the database and for the search's list double ------------------------------------------


@pytest.mark.parametrize("limit", [0, 2, 3, 5, 10])
def test_the_search_list_double_selects_as_the_database_does(limit, make_entry, problem, other_problem):
    specs = [("pinned same problem", problem, True), ("same problem old", problem, False),
             ("same family", None, False), ("other problem", other_problem, False), ("pinned none", None, True),
             ("same problem new", problem, False), ("unrelated", None, False)]
    items = []
    for title, entry_problem, pinned in specs:
        family = "elementwise" if title == "same family" else ""
        entry = make_entry(title=title, problem=entry_problem, family=family)
        if pinned:
            entry = services.pin_entry(entry)
        items.append(MemoryItem(key=title, title=title, summary="", family=entry.family, pinned=pinned,
                                problem=entry_problem.slug if entry_problem else ""))
    from_database = services.select_entries(problem=problem, family=problem.family, limit=limit)
    context = ProblemContext(slug=problem.slug, reference_source="", family=problem.family)
    from_list = asyncio.run(ListOptimizationMemory(items).select(context, limit))
    assert [item.title for item in from_list] == [entry.title for entry in from_database]
