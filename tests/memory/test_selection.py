"""The Planner's bounded view of the memory."""

from __future__ import annotations

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
