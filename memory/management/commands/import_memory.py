"""python manage.py import_memory FILE.json: bring an AccelOpt experience list into the memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.http import Http404

from benchmark.services import get_problem_by_address
from memory import services


class Command(BaseCommand):
    help = "Import an AccelOpt experience file (JSON list of slow_kernel/fast_kernel/speedup/title/summary)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the JSON file the AccelOpt scripts wrote")
        parser.add_argument("--problem", help="attach the entries to this problem ([SUITE/]SLUG[:CASE])")
        parser.add_argument("--family", default="", help="problem family for the entries, e.g. matmul")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["file"])
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise CommandError(f"{path}: {error.strerror}") from None
        except json.JSONDecodeError as error:
            raise CommandError(f"{path}: not JSON ({error.msg} at line {error.lineno})") from None
        problem = None
        if options["problem"]:
            try:
                problem = get_problem_by_address(options["problem"], require_visible=False)
            except (ValueError, Http404) as error:
                raise CommandError(str(error)) from None
        try:
            report = services.import_entries(data, problem=problem, family=options["family"])
        except services.MemoryImportError as error:
            raise CommandError(f"{path}: {error}") from None
        self.stdout.write(f"{path}: {report}")
