"""AccelOpt experience files come in and go out unchanged in meaning."""

from __future__ import annotations

import json

import pytest

from memory import services
from memory.models import MemoryEntry, Polarity, SourceKind

ACCELOPT_ITEMS = [
    {
        "service_name": "silu_kernel",
        "case_name": "silu_M4096_N7168",
        "id": "plan_0_1",
        "speedup_original": 1.8,
        "speedup": 1.8,
        "slow_kernel": "def k():\n    slow()\n",
        "fast_kernel": "def k():\n    fast()\n",
        "raw_response": "...",
        "summary": "**Fuse the sigmoid and multiply** into one activation.",
        "title": "**Fuse the sigmoid and multiply**",
    },
    {
        "service_name": "silu_kernel",
        "case_name": "silu_M4096_N7168",
        "id": "plan_1_0",
        "speedup_original": 0.5,
        "speedup": 2.0,
        "slow_kernel": "def k():\n    tiny_tiles()\n",
        "fast_kernel": "def k():\n    big_tiles()\n",
        "summary": "Shrinking tiles to 32 partitions halves throughput.",
        "title": "**Smaller tiles**",
    },
    {
        "service_name": "silu_kernel",
        "case_name": "silu_M4096_N7168",
        "id": "plan_2_0",
        "speedup_original": 1.0,
        "speedup": 1.0,
        "slow_kernel": "a",
        "fast_kernel": "b",
        "title": "**No optimization found**",
    },
]


def test_an_accelopt_file_is_imported_with_polarity_from_the_original_speedup(db, curator):
    report = services.import_entries(json.loads(json.dumps(ACCELOPT_ITEMS)), curator)
    assert len(report.created) == 2 and report.skipped_empty == 1
    fuse, tiles = report.created
    assert (fuse.title, fuse.polarity, fuse.speedup) == ("Fuse the sigmoid and multiply", Polarity.POSITIVE, 1.8)
    assert (tiles.polarity, tiles.speedup) == (Polarity.NEGATIVE, 2.0)
    assert fuse.source_kind == SourceKind.IMPORT and fuse.source_label == "silu_kernel/silu_M4096_N7168"
    assert fuse.versions.get().changed_by == curator


def test_importing_the_same_file_twice_adds_nothing_the_second_time(db):
    services.import_entries(ACCELOPT_ITEMS)
    report = services.import_entries(ACCELOPT_ITEMS)
    assert report.created == [] and report.duplicates == 2
    assert MemoryEntry.objects.count() == 2


def test_a_malformed_item_names_its_index_and_imports_nothing(db):
    broken = [ACCELOPT_ITEMS[0], {"slow_kernel": "x", "speedup": 1.2}]
    with pytest.raises(services.MemoryImportError, match="item 1: missing 'fast_kernel'"):
        services.import_entries(broken)
    assert MemoryEntry.objects.count() == 0


def test_a_file_that_is_not_a_list_is_refused(db):
    with pytest.raises(services.MemoryImportError, match="JSON list"):
        services.import_entries({"slow_kernel": "x"})


def test_export_then_import_elsewhere_round_trips_the_entries(db, make_entry):
    make_entry(title="Hoist loads", speedup=1.3)
    make_entry(title="Split the matmul", speedup=1.7, polarity=Polarity.NEGATIVE)
    services.prune_entry(make_entry(title="bad advice"))
    exported = json.loads(json.dumps(services.export_entries()))
    assert {item["title"] for item in exported} == {"**Hoist loads**", "**Split the matmul**"}
    negative = next(item for item in exported if item["polarity"] == Polarity.NEGATIVE)
    assert negative["speedup"] == 1.7 and negative["speedup_original"] == pytest.approx(1 / 1.7)

    MemoryEntry.objects.all().delete()
    report = services.import_entries(exported)
    imported = {entry.title: (entry.polarity, entry.speedup) for entry in report.created}
    assert imported == {"Hoist loads": (Polarity.POSITIVE, 1.3), "Split the matmul": (Polarity.NEGATIVE, 1.7)}
