"""The run page's memory panel is read from where the run's lessons count now: an entry the run wrote, an entry
held before that learned the lesson again, or one the run's entry was merged into; each entry once."""

from __future__ import annotations

from django.urls import reverse

from memory import learning
from optimizer import services

TITLE = "Split tiles in two: slower on double"
SUMMARY = "Splitting each tile doubles the instructions; avoid it for kernels of this shape."


def _learn(problem, run_id: int, n: int, title: str = TITLE):
    return learning.learn(title=title, summary=SUMMARY, slow_kernel=f"nl.load(a{n})", fast_kernel=f"nl.load(b{n})",
                          speedup=1.3, polarity="negative", problem=problem, source_run_id=run_id,
                          candidate_key=f"1.0.{n}.0", iteration=1, source_key=f"{run_id}:1.0.{n}.0")


def test_the_panel_lists_new_learned_again_and_merged_entries_once_each(client, owner, problem):
    earlier = services.create_run(owner, problem)
    run = services.create_run(owner, problem)
    held = _learn(problem, earlier.pk, 1).entry
    assert _learn(problem, run.pk, 2).action == "strengthened"  # the same lesson: into the entry held before
    merged = _learn(problem, run.pk, 4, title="Split the tiles in two: slower on double")
    assert merged.action in ("merged", "strengthened") and merged.entry == held
    new = _learn(problem, run.pk, 5, title="Unroll the inner loop fully").entry

    lessons, count = services.run_memory(owner, run)
    assert count == 2 and {(lesson.entry.pk, lesson.how) for lesson in lessons} == {
        (held.pk, "merged" if merged.action == "merged" else "learned again"), (new.pk, "new")}

    client.force_login(owner)
    panel = client.get(reverse("optimizer:run_memory", args=[run.pk])).content.decode()
    assert panel.count(f'data-entry="{held.pk}"') == 1 and panel.count(f'data-entry="{new.pk}"') == 1
    assert "2 entries hold this run's lessons" in panel
    page = client.get(reverse("optimizer:run_detail", args=[run.pk])).content.decode()
    assert page.count(f'data-entry="{held.pk}"') == 1


def test_a_run_whose_lesson_was_merged_lists_the_entry_it_went_into(owner, problem):
    earlier = services.create_run(owner, problem)
    run = services.create_run(owner, problem)
    held = _learn(problem, earlier.pk, 1).entry
    mine = _learn(problem, run.pk, 2, title="Unroll the inner loop fully").entry
    learning.merge_entries(held, mine)  # a curator merges the run's entry into the one held before
    lessons, count = services.run_memory(owner, run)
    assert count == 1 and [(lesson.entry.pk, lesson.how) for lesson in lessons] == [(held.pk, "merged")]
