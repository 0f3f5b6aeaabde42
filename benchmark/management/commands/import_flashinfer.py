"""python manage.py import_flashinfer PATH...: FlashInfer-Bench definitions, workloads and solutions in."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmark import services
from engine.platforms.registry import FLASHINFER_FORMAT, platforms_storing


class Command(BaseCommand):
    help = (
        "Import FlashInfer-Bench files: definitions (.json with axes, inputs, outputs, reference), workloads "
        "(.jsonl, one per line) and solutions (.json with spec and sources), given as files or directories "
        "(searched for .json and .jsonl). Each definition becomes a Triton problem, each solution an imported "
        "kernel. All or nothing: a bad file stores nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="files or directories")
        gpus = [p.value for p in platforms_storing(FLASHINFER_FORMAT)]
        parser.add_argument("--platform", choices=gpus, default=gpus[0], help="the GPU the problems are for")
        parser.add_argument("--suite", default=services.FLASHINFER_SUITE, help="suite to import into")
        parser.add_argument("--evaluate", action="store_true",
                            help="evaluate every imported solution on the platform's default backend and wait")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            items = services.flashinfer_items_from_paths(options["paths"])
            summary = services.import_flashinfer(items, platform=options["platform"], suite=options["suite"],
                                                 evaluate=options["evaluate"])
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        evaluated = ""
        if summary.evaluations:
            services.wait_for_evaluations(summary.evaluations)
            for evaluation in summary.evaluations:
                evaluation.refresh_from_db()
            correct = sum(1 for e in summary.evaluations if e.correct and not e.error_kind)
            evaluated = f"; {len(summary.evaluations)} evaluated, {correct} correct"
        self.stdout.write(f"{summary}{evaluated}")
        for problem in summary.problems:
            self.stdout.write(f"  {problem.address}: {len(problem.workloads)} workloads")
