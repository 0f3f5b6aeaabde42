"""python manage.py export_flashinfer PROBLEM: our best kernel for a Triton problem as a FlashInfer-Bench solution."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.http import Http404

from benchmark import services


class Command(BaseCommand):
    help = ("Write the best kernel of a Triton problem (the fastest measured on a GPU, else the newest judged "
            "correct) as a FlashInfer-Bench solution JSON, to stdout or --output.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("problem", help="an id or address, e.g. flashinfer/rmsnorm_h128:workloads")
        parser.add_argument("--output", "-o", help="file to write (default: stdout)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            problem = services.get_problem_by_reference(None, options["problem"])
            solution = services.export_solution(problem)
        except (ValidationError, Http404, ValueError) as error:
            message = " ".join(error.messages) if isinstance(error, ValidationError) else str(error)
            raise CommandError(message) from None
        text = json.dumps(solution, indent=2) + "\n"
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
            self.stdout.write(f"wrote {options['output']}")
        else:
            self.stdout.write(text, ending="")
