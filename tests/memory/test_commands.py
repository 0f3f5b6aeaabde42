"""import_memory / export_memory: the AccelOpt experience file on the command line."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory.models import MemoryEntry

from .test_import_export import ACCELOPT_ITEMS


def test_import_memory_reads_an_accelopt_file_and_says_what_it_did(db, tmp_path):
    path = tmp_path / "experience.json"
    path.write_text(json.dumps(ACCELOPT_ITEMS))
    out = StringIO()
    call_command("import_memory", str(path), "--family", "elementwise", stdout=out)
    assert "imported 2 entries, skipped 0 already present and 1 with no optimization" in out.getvalue()
    assert set(MemoryEntry.objects.values_list("family", flat=True)) == {"elementwise"}


def test_import_memory_names_the_broken_line_of_a_file_that_is_not_json(db, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("[\n{]")
    with pytest.raises(CommandError, match="not JSON .* at line 2"):
        call_command("import_memory", str(path))


def test_export_memory_writes_what_import_memory_reads(db, tmp_path, make_entry):
    make_entry(title="Hoist loads")
    target = tmp_path / "out.json"
    call_command("export_memory", "-o", str(target), stderr=StringIO())
    MemoryEntry.objects.all().delete()
    call_command("import_memory", str(target), stdout=StringIO())
    assert list(MemoryEntry.objects.values_list("title", flat=True)) == ["Hoist loads"]
