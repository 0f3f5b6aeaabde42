"""An entry that holds lessons from several problems says so: its title names each problem its evidence comes
from, its family names each family, and an undone merge gives the title and family back."""

from __future__ import annotations

from django.urls import reverse

from engine.memory.lessons import title_for_problems
from memory import learning, services
from memory.models import MemoryEntry
from tests.memory.test_learning import SLOWER, learn


def _on(problem) -> dict[str, str]:
    """The offline Summarizer's wording for the same lesson learned on `problem`."""
    return {"title": SLOWER[0].replace("silu", problem.slug), "summary": SLOWER[1].replace("silu", problem.slug)}


def test_the_same_lesson_learned_on_another_problem_names_both_problems_and_families(problem, other_problem):
    learn(problem, 1)
    again = learn(other_problem, 2, **_on(other_problem))
    assert again.action == "strengthened"
    entry = MemoryEntry.objects.get()
    assert entry.title == "Split tiles in two: slower on silu and matmul"
    assert entry.family == "elementwise, matmul"
    assert learning.evidence_summary(entry).problems == ["matmul", "silu"]


def test_a_near_duplicate_from_another_problem_merged_in_names_it_and_an_undo_takes_it_back(problem, other_problem):
    keep = learn(problem, 1).entry
    near = learn(other_problem, 2, title="Split the tiles in two: slower on matmul",
                 summary=_on(other_problem)["summary"])
    assert near.action == "merged" and near.entry == keep
    keep.refresh_from_db()
    assert (keep.title, keep.family) == ("Split tiles in two: slower on silu and matmul", "elementwise, matmul")

    learning.unmerge_entry(MemoryEntry.objects.exclude(pk=keep.pk).get())
    keep.refresh_from_db()
    assert (keep.title, keep.family) == ("Split tiles in two: slower on silu", "elementwise")


def test_a_merged_entry_is_found_under_each_of_its_families(client, curator, problem, other_problem):
    learn(problem, 1)
    learn(other_problem, 2, **_on(other_problem))
    entry = MemoryEntry.objects.get()
    assert services.entry_families() == ["elementwise", "matmul"]
    # The Planner of a problem of either family sees it as of its family.
    third = type(other_problem).objects.create(slug="bmm", case="mini", family="matmul", reference_source="# r")
    assert services.select_entries(problem=third, family="matmul", limit=5) == [entry]
    client.force_login(curator)
    for family in ("elementwise", "matmul"):
        page = client.get(reverse("memory:entries"), {"family": family}).content.decode()
        assert f'data-entry="{entry.pk}"' in page, family


def test_a_title_naming_no_problem_is_left_as_written():
    assert title_for_problems("Keep tiles in SBUF", ["silu", "gelu"]) == "Keep tiles in SBUF"
    assert title_for_problems("Fuse: slower on a", list("abcdef")) == "Fuse: slower on a, b, c, d and 2 more"
    assert title_for_problems("Fuse: slower on silu_mul", ["silu_mul", "silu"]) == "Fuse: slower on silu_mul and silu"
