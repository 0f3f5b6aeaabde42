"""python manage.py calibrate --nkibench DIR: the performance model against real trn1 measurements."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmark.perf.calibration import DEFAULT_CACHE, DEFAULT_CSV, calibrate, format_report


class Command(BaseCommand):
    help = ("Simulate each NKIBench baseline (traces are cached), predict its latency and profile, and compare "
            "with the measured CSV: per problem, then median |log error| and Spearman rank correlation.")

    def add_arguments(self, parser):
        parser.add_argument("--nkibench", required=True, type=Path,
                            help="directory with summary.json, kernels/ and reference/ (AccelOpt NKIBench layout)")
        parser.add_argument("--platform", default="trn1", choices=["trn1", "trn2"])
        parser.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="measured latencies and counters")
        parser.add_argument("--only", action="append", default=[], metavar="PROBLEM",
                            help="calibrate only this problem (repeatable)")
        parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where simulated traces are kept")
        parser.add_argument("--no-cache", action="store_true", help="simulate again, keep nothing")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, **options):
        try:
            report = calibrate(options["nkibench"], platform=options["platform"], csv_path=options["csv"],
                               only=options["only"], cache_dir=None if options["no_cache"] else options["cache"])
        except (FileNotFoundError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=2))
        else:
            self.stdout.write(format_report(report))
