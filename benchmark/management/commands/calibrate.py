"""python manage.py calibrate --nkibench DIR: the performance model against real trn1 measurements.

With `--measurements FILE` (a calibration CSV: the shipped one, or what `manage.py hardware_check` wrote on
a Trainium host) it refits the model's fitted constants to those measurements instead, on the traces of the
same NKIBench kernels, and records the fit as a model version (docs/operations.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmark.perf.calibration import (
    DEFAULT_CACHE,
    DEFAULT_CSV,
    calibrate,
    format_fit,
    format_report,
    record_fit,
    refit_from_measurements,
)

DEFAULT_RECORDS = Path(__file__).resolve().parents[3] / "var" / "perf_fits"


class Command(BaseCommand):
    help = ("Simulate each NKIBench baseline (traces are cached), predict its latency and profile, and compare "
            "with the measured CSV: per problem, then median |log error| and Spearman rank correlation. With "
            "--measurements FILE, refit the model's fitted constants to that CSV and record the fit.")

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
        parser.add_argument("--measurements", type=Path, metavar="FILE",
                            help="refit the fitted constants to this calibration CSV (hardware_check's format) "
                                 "measured on the kernels of --nkibench")
        parser.add_argument("--rounds", type=int, default=3, help="refit: coordinate-descent rounds at most")
        parser.add_argument("--record-dir", type=Path, default=DEFAULT_RECORDS,
                            help="refit: where the fit is recorded as <version>-<platform>-<csv sha>.json")

    def handle(self, *args, **options):
        cache = None if options["no_cache"] else options["cache"]
        if options["measurements"] is not None:
            self._refit(options, cache)
            return
        try:
            report = calibrate(options["nkibench"], platform=options["platform"], csv_path=options["csv"],
                               only=options["only"], cache_dir=cache)
        except (FileNotFoundError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=2))
        else:
            self.stdout.write(format_report(report))

    def _refit(self, options, cache):
        if not options["measurements"].is_file():
            raise CommandError(f"calibrate: {options['measurements']} not found")
        try:
            result = refit_from_measurements(options["nkibench"], options["measurements"], platform=options["platform"],
                                             cache_dir=cache, rounds=options["rounds"])
        except (FileNotFoundError, KeyError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        path = record_fit(result, options["record_dir"])
        if options["json"]:
            self.stdout.write(json.dumps(dict(result.to_dict(), record=str(path)), indent=2))
        else:
            self.stdout.write(format_fit(result))
            self.stdout.write(f"recorded {path}")
