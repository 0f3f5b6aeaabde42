"""python manage.py import_nkibench DIR: bring an AccelOpt NKIBench/ directory's problems and kernels in."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmark import services
from benchmark.models import Platform
from engine.platforms.nki.suites.specs import SuiteError


class Command(BaseCommand):
    help = (
        "Import a directory in the public AccelOpt NKIBench layout (summary.json, seeds/, reference/, kernels/). "
        "Each problem case becomes a problem of SUITE with its own reference; each kernel an imported kernel."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory")
        parser.add_argument("--suite", default=services.IMPORTED_SUITE, help="suite to import into (default: imported)")
        parser.add_argument(
            "--evaluate", action="store_true",
            help="also evaluate every imported kernel (full NKIBench shapes: minutes per kernel)",
        )
        parser.add_argument("--platform", choices=Platform.values, default=Platform.TRN1)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            summary = services.import_nkibench(options["directory"], suite=options["suite"])
        except (SuiteError, ValidationError, OSError) as error:
            message = " ".join(error.messages) if isinstance(error, ValidationError) else str(error)
            raise CommandError(message) from None
        evaluated = ""
        if options["evaluate"]:
            evaluations = [
                services.request_evaluation(kernel, options["platform"]) for kernel in summary.kernels
            ]
            services.wait_for_evaluations(evaluations)
            for evaluation in evaluations:
                evaluation.refresh_from_db()
            correct = sum(1 for e in evaluations if e.correct and not e.error_kind)
            evaluated = f"; {len(evaluations)} evaluated on {options['platform']}, {correct} correct"
        self.stdout.write(
            f"{summary.suite}: {len(summary.problems)} problems, {summary.kernels_created} new kernels "
            f"({summary.kernels_existing} already there){evaluated}"
        )
