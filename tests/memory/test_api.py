"""/api/memory: engineers read and export, curators change and import; every change lands in the history."""

from __future__ import annotations

import pytest

from memory.models import EntryStatus, MemoryEntry

from .test_import_export import ACCELOPT_ITEMS

pytestmark = pytest.mark.django_db


def test_anonymous_visitors_cannot_read_the_memory(client, make_entry):
    make_entry()
    assert client.get("/api/memory").status_code == 401


def test_an_engineer_searches_by_text_and_filters(client, engineer, make_entry):
    client.force_login(engineer)
    make_entry(title="Hoist the loads", speedup=1.3)
    make_entry(title="Fuse activation", speedup=2.5, family="elementwise")
    titles = [e["title"] for e in client.get("/api/memory", {"q": "hoist"}).json()]
    assert titles == ["Hoist the loads"]
    assert [e["title"] for e in client.get("/api/memory", {"min_speedup": 2}).json()] == ["Fuse activation"]
    assert client.get("/api/memory", {"polarity": "sideways"}).status_code == 400


def test_an_engineer_cannot_prune(client, engineer, make_entry):
    client.force_login(engineer)
    entry = make_entry()
    assert client.post(f"/api/memory/{entry.pk}/prune").status_code == 403
    assert MemoryEntry.objects.get(pk=entry.pk).status == EntryStatus.ACTIVE


def test_a_curator_prunes_and_restores_and_the_history_names_them(client, curator, make_entry):
    client.force_login(curator)
    entry = make_entry()
    assert client.post(f"/api/memory/{entry.pk}/prune").json()["status"] == "pruned"
    body = client.post(f"/api/memory/{entry.pk}/restore").json()
    assert body["status"] == "active"
    assert [(v["change"], v["changed_by"]) for v in body["versions"]] == [
        ("created", None), ("pruned", curator.username), ("restored", curator.username)
    ]


def test_a_curator_edits_the_title(client, curator, make_entry):
    client.force_login(curator)
    entry = make_entry(title="old")
    response = client.patch(f"/api/memory/{entry.pk}", {"title": "Keep tiles in SBUF"},
                            content_type="application/json")
    assert response.status_code == 200 and response.json()["title"] == "Keep tiles in SBUF"


def test_bulk_prune_counts_the_entries_it_changed(client, curator, make_entry):
    client.force_login(curator)
    ids = [make_entry().pk for _ in range(3)]
    response = client.post("/api/memory/prune", {"ids": ids[:2]}, content_type="application/json")
    assert response.json() == {"pruned": 2}
    assert MemoryEntry.objects.filter(status=EntryStatus.PRUNED).count() == 2


def test_import_then_export_through_the_api(client, curator):
    client.force_login(curator)
    report = client.post("/api/memory/import", ACCELOPT_ITEMS, content_type="application/json").json()
    assert (report["created"], report["skipped_empty"]) == (2, 1)
    exported = client.get("/api/memory/export").json()
    assert sorted(item["slow_kernel"] for item in exported) == sorted(
        item["slow_kernel"] for item in ACCELOPT_ITEMS[:2]
    )


def test_a_malformed_import_is_refused_with_the_reason(client, curator):
    client.force_login(curator)
    response = client.post("/api/memory/import", [{"slow_kernel": "x"}], content_type="application/json")
    assert response.status_code == 400
    assert "missing 'fast_kernel'" in response.json()["detail"]
