"""python manage.py export_memory [-o FILE]: the memory as an AccelOpt experience list (JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory import services
from memory.models import EntryStatus, MemoryEntry


class Command(BaseCommand):
    help = "Export the optimization memory in the JSON list format the AccelOpt scripts read."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")
        parser.add_argument("--include-pruned", action="store_true", help="also export pruned entries")

    def handle(self, *args: Any, **options: Any) -> None:
        entries = MemoryEntry.objects.select_related("problem")
        if not options["include_pruned"]:
            entries = entries.exclude(status=EntryStatus.PRUNED)
        text = json.dumps(services.export_entries(entries), indent=2)
        if options["output"]:
            Path(options["output"]).write_text(text + "\n", encoding="utf-8")
            self.stderr.write(f"wrote {entries.count()} entries to {options['output']}")
        else:
            self.stdout.write(text)
