"""The memory browser, an entry's page, curation, bulk prune, import and export."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from memory.models import EntryStatus, MemoryEntry
from memory.services import add_entry

pytestmark = pytest.mark.django_db


def _entry(title: str = "Fuse the scale into the activation", **fields: Any) -> MemoryEntry:
    defaults = {"summary": "One pass instead of two.", "slow_kernel": "a = 1\nb = 2\n", "fast_kernel": "a = 1\nb = 3\n",
                "speedup": 1.5, "family": "elementwise"}
    return add_entry(title=title, **{**defaults, **fields})


def test_the_browser_searches_code_and_filters_by_speedup(login, engineer) -> None:
    _entry("Hoist loads", fast_kernel="nl.load hoisted\n", speedup=1.2)
    _entry("Bigger tiles", speedup=2.5)
    client = login(engineer)
    assert "Hoist loads" in client.get("/memory/", {"q": "hoisted"}).content.decode()
    assert "Bigger tiles" not in client.get("/memory/", {"q": "hoisted"}).content.decode()
    html = client.get("/memory/", {"min_speedup": "2"}).content.decode()
    assert "Bigger tiles" in html and "Hoist loads" not in html


def test_the_browser_hides_pruned_entries_unless_asked(login, engineer) -> None:
    entry = _entry()
    MemoryEntry.objects.filter(pk=entry.pk).update(status=EntryStatus.PRUNED)
    client = login(engineer)
    assert entry.title not in client.get("/memory/").content.decode()
    assert entry.title in client.get("/memory/", {"status": "pruned"}).content.decode()


def test_an_entry_page_shows_the_slow_and_fast_kernels_side_by_side(login, engineer) -> None:
    entry = _entry()
    html = login(engineer).get(f"/memory/{entry.pk}/").content.decode()
    assert 'class="diff-changed"' in html and "b = 2" in html and "b = 3" in html
    assert "Prune" not in html  # engineers read; curators change


def test_a_curator_edit_is_recorded_with_who(login, curator) -> None:
    entry = _entry()
    client = login(curator)
    response = client.post(f"/memory/{entry.pk}/edit/", {"title": "Fold the scale", "summary": "Cheaper."})
    assert response.status_code == 302
    html = client.get(f"/memory/{entry.pk}/").content.decode()
    assert "Fold the scale" in html and "edited" in html and curator.username in html


def test_an_engineer_cannot_prune(login, engineer) -> None:
    entry = _entry()
    assert login(engineer).post(f"/memory/{entry.pk}/prune/").status_code == 403
    assert MemoryEntry.objects.get(pk=entry.pk).status == EntryStatus.ACTIVE


def test_a_curator_prunes_a_selection_at_once(login, curator) -> None:
    first, second, kept = _entry("one"), _entry("two", fast_kernel="x\n"), _entry("three", fast_kernel="y\n")
    response = login(curator).post("/memory/prune/", {"entries": [first.pk, second.pk]})
    assert response.status_code == 302
    statuses = dict(MemoryEntry.objects.values_list("title", "status"))
    assert statuses == {"one": "pruned", "two": "pruned", "three": "active"}
    assert kept.versions.count() == 1


def test_export_then_import_round_trips_the_accelopt_format(login, curator) -> None:
    _entry()
    client = login(curator)
    exported = json.loads(client.get("/memory/export/").content)
    assert exported[0]["title"] == "**Fuse the scale into the activation**" and exported[0]["speedup"] == 1.5
    MemoryEntry.objects.all().delete()
    upload = io.BytesIO(json.dumps(exported).encode())
    upload.name = "experience.json"
    assert client.post("/memory/import/", {"file": upload}).status_code == 302
    assert MemoryEntry.objects.get().title == "Fuse the scale into the activation"


def test_a_malformed_import_says_what_is_missing(login, curator) -> None:
    upload = io.BytesIO(json.dumps([{"title": "x"}]).encode())
    upload.name = "bad.json"
    html = login(curator).post("/memory/import/", {"file": upload}).content.decode()
    assert "missing &#x27;slow_kernel&#x27;" in html or "missing 'slow_kernel'" in html


def test_the_empty_memory_says_how_entries_get_there(login, curator) -> None:
    html = login(curator).get("/memory/").content.decode()
    assert "The memory is empty" in html and "/memory/import/" in html


def test_the_browser_filters_by_family_polarity_and_source_run(login, engineer) -> None:
    _entry("Elementwise win", family="elementwise", source_run_id=7)
    _entry("Matmul loss", family="matmul", polarity="negative", fast_kernel="c = 4\n")
    client = login(engineer)
    for query, shown, hidden in (({"family": "matmul"}, "Matmul loss", "Elementwise win"),
                                 ({"polarity": "negative"}, "Matmul loss", "Elementwise win"),
                                 ({"run": "7"}, "Elementwise win", "Matmul loss")):
        html = client.get("/memory/", query).content.decode()
        assert shown in html and hidden not in html, query


def test_a_curator_puts_back_an_earlier_title_from_the_history(login, curator) -> None:
    entry = _entry()
    client = login(curator)
    client.post(f"/memory/{entry.pk}/edit/", {"title": "A worse title", "summary": "One pass instead of two."})
    assert f'action="/memory/{entry.pk}/revert/1/"' in client.get(f"/memory/{entry.pk}/").content.decode()
    assert client.post(f"/memory/{entry.pk}/revert/1/").status_code == 302
    entry.refresh_from_db()
    assert entry.title == "Fuse the scale into the activation"
    assert [v.change for v in entry.versions.order_by("number")] == ["created", "edited", "edited"]
    assert client.post(f"/memory/{entry.pk}/revert/9/").status_code == 404


def test_an_engineer_cannot_put_back_a_version(login, engineer) -> None:
    entry = _entry()
    assert login(engineer).post(f"/memory/{entry.pk}/revert/1/").status_code == 403
    assert "revert" not in login(engineer).get(f"/memory/{entry.pk}/").content.decode()
