"""python manage.py load_suite nkibench: create or update a built-in suite's problems and baselines."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmark import services
from benchmark.models import Platform
from engine.platforms.nki.suites.specs import SuiteError

EVALUATE_CHOICES = {"none": (), "mini": ("mini",), "full": ("full",), "all": ("mini", "full")}


class Command(BaseCommand):
    help = (
        "Load a built-in problem suite (idempotent) and evaluate its baseline kernels. By default only the mini "
        "cases are evaluated, on trn1: they take seconds; the full NKIBench shapes take minutes each."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("suite", nargs="?", default="nkibench", help="suite name (default: nkibench)")
        parser.add_argument(
            "--evaluate", choices=sorted(EVALUATE_CHOICES), default="mini",
            help="which cases' baselines to evaluate (default: mini)",
        )
        parser.add_argument(
            "--platform", action="append", choices=Platform.values, dest="platforms",
            help="platform to evaluate on; repeat for several (default: trn1)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.monotonic()
        try:
            summary = services.load_suite(
                options["suite"],
                evaluate_cases=EVALUATE_CHOICES[options["evaluate"]],
                platforms=options["platforms"] or [Platform.TRN1],
            )
        except SuiteError as error:
            raise CommandError(str(error)) from None
        correct = sum(1 for e in summary.evaluations if e.correct and not e.error_kind)
        failed = [e for e in summary.evaluations if not (e.correct and not e.error_kind)]
        for evaluation in failed:
            self.stderr.write(
                f"baseline {evaluation.kernel.problem.address} on {evaluation.platform}: {evaluation.outcome}: "
                f"{evaluation.error_message[:300]}"
            )
        self.stdout.write(
            f"{summary.suite}: {summary.problems} problems ({summary.problems_created} new), "
            f"{summary.kernels_created} new baseline kernels; {len(summary.evaluations)} baseline evaluations: "
            f"{correct} correct, {len(failed)} not; {time.monotonic() - started:.1f} s"
        )
