"""A lesson learned in a private run is as private as that run (issue 36): it carries the run's kernels, so
another engineer's Planner, search (page, API, MCP) and the curators never get it, and it is never counted in,
nor merged into, a lesson everyone reads. The pages and API are tried by every role in
tests/site/test_authorization_matrix.py; this file covers the Planner, the MCP tool and the learning itself."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.roles import ADMIN, CURATOR, ENGINEER
from benchmark.models import Kernel
from mcp_server import tools
from memory import learning, services
from memory.models import MemoryEntry
from optimizer.adapters.optimization_memory import DjangoOptimizationMemory
from optimizer.models import Run

FAST = "def kernel():\n    return 2  # erin's private run wrote this\n"
TITLE = "Keep the tile in SBUF"
SUMMARY = "Loading each tile once and keeping it in SBUF removed the second load."


@pytest.fixture
def people(make_user: Any) -> dict[str, Any]:
    return {"erin": make_user("erin", role=ENGINEER), "tom": make_user("tom", role=ENGINEER),
            "cora": make_user("cora", role=CURATOR), "ada": make_user("ada", role=ADMIN)}


def _run(problem: Any, owner: Any, *, public: bool) -> Run:
    start = Kernel.objects.get_or_create(problem=problem, sha256="0" * 64, defaults={"source": "# start\n"})[0]
    return Run.objects.create(problem=problem, start_kernel=start, owner=owner, is_public=public, platform="trn1",
                              backend="simulator")


def _learn(problem: Any, run: Run, n: int, *, title: str = TITLE, fast: str = FAST) -> learning.Learned:
    return learning.learn(title=title, summary=SUMMARY, slow_kernel="def kernel():\n    return 1\n",
                          fast_kernel=fast, speedup=2.0, polarity="positive", problem=problem,
                          source_run_id=run.pk, candidate_key=f"c{n}", source_key=f"run:{run.pk}:c{n}")


def test_another_engineers_planner_is_never_shown_a_private_runs_lesson(problem, people):
    private = _learn(problem, _run(problem, people["erin"], public=False), 1).entry

    def shown_to(run: Run) -> list[int]:
        return [item.provenance["entry"] for item in DjangoOptimizationMemory(run)._select(8)]

    assert shown_to(_run(problem, people["erin"], public=False)) == [private.pk]  # her own private work
    assert shown_to(_run(problem, people["tom"], public=False)) == []
    # Not even an admin's run, nor erin's own public one: their transcripts are read by people who may not see it.
    assert shown_to(_run(problem, people["ada"], public=False)) == []
    assert shown_to(_run(problem, people["erin"], public=True)) == []


def test_the_mcp_memory_search_answers_each_person_with_what_they_may_read(problem, people):
    private = _learn(problem, _run(problem, people["erin"], public=False), 1).entry
    public = _learn(problem, _run(problem, people["tom"], public=True), 2, title="Fuse the two loops",
                    fast="def kernel():\n    return 3\n").entry

    def found(user: Any, **query: Any) -> set[int]:
        return {lesson["id"] for lesson in tools.search_memory(user, **query)["lessons"]}

    for query in ({"text": "kernel"}, {"problem": str(problem.pk)}):
        assert found(people["erin"], **query) == {private.pk, public.pk}
        assert found(people["ada"], **query) == {private.pk, public.pk}
        assert found(people["tom"], **query) == {public.pk}, query
        assert found(people["cora"], **query) == {public.pk}, query


def test_a_public_run_repeating_a_private_lesson_files_its_own_entry(problem, people):
    erin_private = _run(problem, people["erin"], public=False)
    private = _learn(problem, erin_private, 1).entry
    public = _learn(problem, _run(problem, people["tom"], public=True), 2)  # the same lesson, word for word
    assert public.action == "created" and public.entry.pk != private.pk
    assert services.visible_entries(people["tom"]).filter(title=TITLE).get() == public.entry
    private.refresh_from_db()
    assert private.evidence_count == 1  # tom's run added nothing to erin's private entry
    # Her next private run strengthens her own entry, not the public one.
    again = _learn(problem, _run(problem, people["erin"], public=False), 3)
    assert (again.action, again.entry) == ("strengthened", private)


def test_a_private_run_repeating_a_public_lesson_keeps_it_to_itself(problem, people):
    public = _learn(problem, _run(problem, people["tom"], public=True), 1).entry
    repeated = _learn(problem, _run(problem, people["erin"], public=False), 2)  # the same lesson, word for word
    # Counted in the public entry, it would show there: one more time learned, its speedup, its problem's name.
    assert repeated.action == "created" and repeated.entry != public
    assert MemoryEntry.objects.get(pk=public.pk).evidence_count == 1
    assert services.visible_entries(people["tom"]).filter(title=TITLE).get() == public


def test_a_private_run_nobody_owns_keeps_its_lessons_to_itself_too(problem, people):
    """A management command's private run (no owner) is seen by admins only: its lesson joins no public entry,
    though it strengthens its own when the run learns it again."""
    public = _learn(problem, _run(problem, people["tom"], public=True), 1).entry
    ownerless = Run.objects.create(problem=problem, start_kernel=public_start(problem), owner=None, is_public=False,
                                   platform="trn1", backend="simulator")
    first, again = _learn(problem, ownerless, 2), _learn(problem, ownerless, 3)
    assert first.action == "created" and first.entry != public
    assert (again.action, again.entry) == ("strengthened", first.entry)
    assert MemoryEntry.objects.get(pk=public.pk).evidence_count == 1
    assert not services.visible_entries(people["tom"]).filter(pk=first.entry.pk).exists()


def public_start(problem: Any) -> Kernel:
    return Kernel.objects.get_or_create(problem=problem, sha256="0" * 64, defaults={"source": "# start\n"})[0]
