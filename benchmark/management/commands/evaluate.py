"""python manage.py evaluate KERNEL.py (--problem SLUG[:CASE] | --reference REF.py): one sandboxed evaluation.

Nothing is stored. `--seeds` takes the seeds an earlier evaluation recorded (its `seeds`, in the API's
`provenance`), so the same kernel, problem, platform and backend version give the same numbers again. The exit status is 0 whenever the evaluation ran (read `correct` in the output) and 1
when the command could not start it (a missing file, an unknown problem).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.http import Http404

from benchmark import services
from benchmark.display import PROFILE_FIELD_HELP, format_counter
from benchmark.models import Backend, Platform
from engine.evaluator.inputs import MIN_SEEDS
from engine.platforms.registry import BACKENDS, DEFAULT_PLATFORM, PREDICTED, get_definition


def _read_source(path: str, what: str) -> str:
    file = Path(path)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise CommandError(f"{what} {path}: no such file") from None
    except OSError as error:
        raise CommandError(f"{what} {path}: {error.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CommandError(f"{what} {path}: not UTF-8 text (byte {error.start})") from None


def _parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise CommandError(f"--seeds must be comma-separated integers, e.g. 11,12,13; got {text!r}") from None
    if len(seeds) < MIN_SEEDS:
        raise CommandError(f"--seeds needs at least {MIN_SEEDS} seeds; got {len(seeds)}")
    if any(not 0 <= seed < 2**32 for seed in seeds):
        raise CommandError(f"--seeds must be between 0 and 2**32 - 1 (numpy seeds); got {text!r}")
    return seeds


def _yes_no(value: Any) -> str:
    return "—" if value is None else ("yes" if value else "no")


class Command(BaseCommand):
    help = "Evaluate a kernel file against a problem or a reference file and print the result."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kernel", help="kernel source file (an @nki.jit function)")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--problem", help="[SUITE/]SLUG[:CASE], e.g. silu or silu:full (default case: mini)")
        target.add_argument("--reference", help="a reference file in NKIBench's format")
        parser.add_argument("--platform", choices=Platform.values,
                            help="default: the problem's own (trn1 for NKI and a reference file, h100 for Triton)")
        parser.add_argument("--backend", choices=Backend.values, help="default: the platform's own")
        parser.add_argument(
            "--seeds",
            help=f"comma-separated seeds to reproduce an earlier evaluation (at least {MIN_SEEDS}); "
            "default: fresh ones",
        )
        parser.add_argument("--json", action="store_true", help="print the full result as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        seeds = _parse_seeds(options["seeds"]) if options["seeds"] is not None else None
        kernel_source = _read_source(options["kernel"], "kernel")
        problem = None
        reference_source = None
        if options["problem"]:
            try:
                problem = services.get_problem_by_address(options["problem"], require_visible=False)
            except (ValueError, Http404) as error:
                raise CommandError(str(error)) from None
        else:
            reference_source = _read_source(options["reference"], "reference")
        options["platform"] = options["platform"] or (problem.default_platform if problem else DEFAULT_PLATFORM).value
        options["backend"] = options["backend"] or get_definition(options["platform"]).default_backend.value
        try:
            if problem is not None:
                services.check_platform_for(problem, options["platform"])
            result = services.evaluate_source(
                kernel_source,
                problem=problem,
                reference_source=reference_source,
                platform=options["platform"],
                backend=options["backend"],
                seeds=seeds,
            )
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2, sort_keys=True))
            return
        self._print_human(options, problem, data)

    def _print_human(self, options: dict[str, Any], problem: Any, data: dict[str, Any]) -> None:
        target = problem.address if problem is not None else options["reference"]
        write = self.stdout.write
        write(f"kernel {options['kernel']} on {target}, {data.get('platform') or options['platform']}, "
              f"{data.get('backend') or options['backend']} {data.get('backend_version', '')}".rstrip())
        write(f"compiled: {_yes_no(data.get('compiled'))}  runnable: {_yes_no(data.get('runnable'))}  "
              f"correct: {_yes_no(data.get('correct'))}")
        if data.get("error_kind"):
            where = f" at line {data['error_line']}" if data.get("error_line") else ""
            write(f"error: {data['error_kind']}{where}: {data.get('error_message', '')}")
        errors = data.get("output_errors") or []
        if errors:
            shown = ", ".join("not finite" if e is None else f"{e:.2e}" for e in errors)
            write(f"relative L2 error per output (worst over seeds {data.get('seeds', [])}): {shown}"
                  f" (tolerance {data.get('tolerance')})")
        if data.get("latency_ms") is not None:
            backend = BACKENDS.get(data.get("backend", ""))
            simulated = " (predicted by the performance model)" if backend and backend.latency == PREDICTED else ""
            write(f"latency_ms: {data['latency_ms']:.6g}{simulated}")
        if data.get("peak_fraction") is not None:
            write(f"peak_fraction: {data['peak_fraction']:.4f} (theoretical peak {data.get('theoretical_peak_ms'):.6g} ms)")
        elif problem is None and data.get("latency_ms") is not None:
            write("peak_fraction: unknown (no FLOP/byte counts for a reference file; use --problem)")
        profile = data.get("profile") or {}
        if profile:
            write("profile:")
            width = max(len(name) for name in profile)
            for name in [n for n in PROFILE_FIELD_HELP if n in profile] + sorted(set(profile) - set(PROFILE_FIELD_HELP)):
                write(f"  {name:<{width}}  {format_counter(name, profile[name])}")
        write(f"wall time: {data.get('wall_time_s', 0.0):.2f} s")
