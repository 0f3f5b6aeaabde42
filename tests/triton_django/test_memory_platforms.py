"""Memory per platform (issue 24): a lesson learned on NKI is not shown to a Triton Planner, and the other
way round, unless a curator marks it as transferring; the curator's word is recorded in the entry's history."""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.models import Problem
from engine.memory.selection import select_for_planner
from memory import services
from memory.models import ChangeKind
from tests.conftest import TEST_PASSWORD


def _entry(title: str, problem: Problem) -> object:
    return services.add_entry(title=title, summary=f"{title} summary", slow_kernel=f"# {title} slow",
                              fast_kernel=f"# {title} fast", speedup=1.4, problem=problem)


def test_an_entry_takes_the_language_of_the_problem_it_was_learned_on(nki_problem, triton_problem):
    assert _entry("tile the loads", nki_problem).language == "nki"
    assert _entry("raise num_warps", triton_problem).language == "triton"
    person = services.add_entry(title="by hand", summary="", slow_kernel="a", fast_kernel="b", speedup=1.1)
    assert person.language == "nki"  # the memory's language before Triton


def test_each_planner_sees_only_its_own_languages_lessons(nki_problem, triton_problem):
    nki_lesson = _entry("tile the loads", nki_problem)
    triton_lesson = _entry("raise num_warps", triton_problem)
    assert services.select_entries(problem=triton_problem, family="elementwise", limit=8) == [triton_lesson]
    assert services.select_entries(problem=nki_problem, family="elementwise", limit=8) == [nki_lesson]
    # Even a pinned NKI entry (always shown to NKI Planners) stays away from a Triton Planner.
    services.pin_entry(nki_lesson)
    assert services.select_entries(problem=triton_problem, limit=8) == [triton_lesson]


def test_a_curator_marks_an_entry_as_transferring_and_it_is_recorded(nki_problem, triton_problem, curator):
    nki_lesson = _entry("fuse the two passes", nki_problem)
    triton_lesson = _entry("raise num_warps", triton_problem)
    services.set_transfers(nki_lesson, True, curator)
    selected = services.select_entries(problem=triton_problem, limit=8)
    assert set(selected) == {nki_lesson, triton_lesson}
    latest = services.entry_history(nki_lesson, newest_first=True).first()
    assert (latest.change, latest.transfers, latest.changed_by) == (ChangeKind.TRANSFERS, True, curator)
    # Setting it again records nothing; taking it back is recorded and hides it again.
    versions = nki_lesson.versions.count()
    services.set_transfers(nki_lesson, True, curator)
    assert nki_lesson.versions.count() == versions
    services.set_transfers(nki_lesson, False, curator)
    assert services.entry_history(nki_lesson, newest_first=True).first().change == ChangeKind.STAYS
    assert services.select_entries(problem=triton_problem, limit=8) == [triton_lesson]


def test_the_pure_rule_filters_by_language_and_the_transfer_flag():
    @dataclass(frozen=True)
    class Entry:
        name: str
        language: str
        transfers: bool = False
        pinned: bool = False
        problem: object = None
        family: str = ""

    entries = [Entry("a", "nki", pinned=True), Entry("b", "triton"), Entry("c", "nki", transfers=True)]
    assert [e.name for e in select_for_planner(entries, limit=5, language="triton")] == ["b", "c"]
    assert [e.name for e in select_for_planner(entries, limit=5, language="nki")] == ["a", "c"]
    # A caller that does not say its language (the search's test double) sees every entry, as before.
    assert len(select_for_planner(entries, limit=5)) == 3


def test_the_memory_page_and_api_show_and_change_the_flag(client, nki_problem, curator, make_token):
    entry = _entry("fuse the two passes", nki_problem)
    assert client.login(username=curator.username, password=TEST_PASSWORD)
    page = client.get(f"/memory/{entry.pk}/").content.decode()
    assert "learned in nki" in page and "shown to nki Planners only" in page
    response = client.post(f"/memory/{entry.pk}/transfers/", follow=True)
    assert "shown to Planners of every language" in response.content.decode()
    entry.refresh_from_db()
    assert entry.transfers
    api = client.get(f"/api/memory/{entry.pk}", HTTP_AUTHORIZATION=f"Bearer {make_token(curator)}").json()
    assert (api["language"], api["transfers"]) == ("nki", True)
    assert api["versions"][-1]["change"] == "transfers"
    stays = client.post(f"/api/memory/{entry.pk}/stays", HTTP_AUTHORIZATION=f"Bearer {make_token(curator)}")
    assert stays.status_code == 200 and stays.json()["transfers"] is False


def test_an_engineer_cannot_change_the_flag(client, nki_problem, engineer, make_token):
    entry = _entry("fuse the two passes", nki_problem)
    response = client.post(f"/api/memory/{entry.pk}/transfers", HTTP_AUTHORIZATION=f"Bearer {make_token(engineer)}")
    assert response.status_code == 403
    entry.refresh_from_db()
    assert not entry.transfers
