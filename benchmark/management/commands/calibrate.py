"""python manage.py calibrate --nkibench DIR: the performance model against real trn1 measurements.

With `--measurements FILE` (a calibration CSV: the shipped one, or what `manage.py hardware_check` wrote on
a Trainium host) it refits the model's fitted constants to those measurements instead, on the traces of the
same NKIBench kernels, and records the fit as a model version (docs/operations.md).

After the per-problem table it prints the honest errors (docs/benchmarks.md, issue 19): leave-one-out over the
problems (engine/platforms/nki/perf/validation.py) and the measured against predicted speedup of every differential pair
(engine/platforms/nki/perf/pairs.py, measurements/data/trn1_differential_pairs.csv).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from engine.platforms.nki.hardware import get_core_spec
from engine.platforms.nki.perf.calibration import (
    DEFAULT_CACHE,
    DEFAULT_CSV,
    calibrate,
    format_fit,
    format_report,
    record_fit,
    refit_from_measurements,
)
from engine.platforms.nki.perf.pairs import (
    DEFAULT_PAIRS_CSV,
    PairTraces,
    format_pairs,
    load_pairs,
    predict_pairs,
)
from engine.platforms.nki.perf.validation import baseline_traces, format_validation, leave_one_out

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
        parser.add_argument("--no-loo", action="store_true",
                            help="skip leave-one-out (each problem predicted by constants refitted without it)")
        parser.add_argument("--loo-rounds", type=int, default=2, help="leave-one-out: coordinate-descent rounds")
        parser.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS_CSV,
                            help="measured differential pairs (two versions of one kernel) to predict")
        parser.add_argument("--no-pairs", action="store_true", help="skip the differential pairs")
        parser.add_argument("--kernel-source", action="append", default=[], metavar="NAME=PATH",
                            help="where a pair's kernel source lives: a work tree or git directory, e.g. "
                                 "neuron-sdk=<aws-neuron-sdk clone> (accelopt defaults to --nkibench's parent)")

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
        extra = {} if options["only"] else self._honest_errors(options, cache)
        if options["json"]:
            self.stdout.write(json.dumps(dict(report.to_dict(), **{k: v for k, (v, _) in extra.items()}), indent=2))
        else:
            self.stdout.write(format_report(report))
            for _, text in extra.values():
                self.stdout.write("")
                self.stdout.write(text)

    def _honest_errors(self, options, cache):
        """Leave-one-out over the baselines and the differential pairs: {key: (json value, text)}."""
        spec = get_core_spec(options["platform"])
        out = {}
        if not options["no_loo"]:
            problems, prepared, measured = baseline_traces(options["nkibench"], spec, csv_path=options["csv"],
                                                           cache_dir=cache)
            if len(problems) >= 3:  # a fit on fewer than two points says nothing
                v = leave_one_out(problems, prepared, measured, spec, rounds=options["loo_rounds"])
                out["validation"] = (v.to_dict(), format_validation(v))
        if not options["no_pairs"] and options["pairs"].is_file():
            roots = {"accelopt": options["nkibench"].resolve().parent}
            for item in options["kernel_source"]:
                name, _, path = item.partition("=")
                roots[name] = Path(path)
            traces = PairTraces(load_pairs(options["pairs"]), roots, spec.name,
                                cache / "pairs" if cache else None, log=self.stderr.write)
            results = predict_pairs(traces, spec)
            out["pairs"] = ([asdict(r) | {"ratio": r.ratio, "sign_right": r.sign_right} for r in results],
                            format_pairs(results))
        return out

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
