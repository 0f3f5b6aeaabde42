"""Curators edit, pin, prune and restore entries; every change is kept in the history."""

from __future__ import annotations

import pytest

from memory import services
from memory.models import ChangeKind, EntryStatus


def test_an_edit_records_who_changed_what(make_entry, curator):
    entry = make_entry(title="Fuse ops")
    services.edit_entry(entry, curator, title="Fuse exp and multiply", summary="one activation instead of two")
    entry.refresh_from_db()
    assert entry.title == "Fuse exp and multiply"
    latest = entry.versions.last()
    assert (latest.number, latest.change, latest.changed_by) == (2, ChangeKind.EDITED, curator)
    assert latest.summary == "one activation instead of two"
    assert entry.versions.first().title == "Fuse ops"


def test_an_edit_that_changes_nothing_records_no_version(make_entry, curator):
    entry = make_entry()
    services.edit_entry(entry, curator, title=entry.title, summary=entry.summary)
    assert entry.versions.count() == 1


def test_an_empty_title_is_refused(make_entry, curator):
    with pytest.raises(ValueError, match="title cannot be empty"):
        services.edit_entry(make_entry(), curator, title="  ")


def test_prune_then_restore_brings_the_entry_back_to_the_planner(make_entry, curator):
    entry = make_entry()
    services.prune_entry(entry, curator)
    assert services.select_entries(limit=5) == []
    services.restore_entry(entry, curator)
    assert services.select_entries(limit=5) == [entry]
    changes = list(entry.versions.values_list("change", flat=True))
    assert changes == [ChangeKind.CREATED, ChangeKind.PRUNED, ChangeKind.RESTORED]


def test_bulk_prune_counts_only_entries_that_changed(make_entry, curator):
    already = services.prune_entry(make_entry(), curator)
    fresh = [make_entry(), make_entry()]
    assert services.prune_entries([already, *fresh], curator) == 2


def test_revert_puts_back_an_earlier_title(make_entry, curator):
    entry = make_entry(title="first")
    services.edit_entry(entry, curator, title="second")
    services.revert_entry(entry, 1, curator)
    entry.refresh_from_db()
    assert entry.title == "first"
    assert entry.versions.count() == 3


def test_unpin_returns_a_pinned_entry_to_active(make_entry, curator):
    entry = services.pin_entry(make_entry(), curator)
    assert services.unpin_entry(entry, curator).status == EntryStatus.ACTIVE


def test_adding_the_same_source_key_twice_returns_the_first_entry(make_entry):
    first = make_entry(source_key="run:1:i0-b0-p0-s0")
    second = make_entry(source_key="run:1:i0-b0-p0-s0")
    assert first.pk == second.pk
    assert first.versions.count() == 1
