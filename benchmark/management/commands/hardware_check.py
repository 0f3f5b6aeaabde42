"""python manage.py hardware_check: the NKIBench baselines on this host's NeuronCores, side by side with the
simulator, written out as a calibration CSV (the format of measurements/data/trn1_nkibench_baselines.csv).

For a Trainium owner (docs/operations.md, "Running on a Trainium instance"). Without a Neuron device it says
so and exits with status 1 before anything else happens; it never reads or writes the database.

    python manage.py hardware_check                          # the 14 built-in baselines, full size
    python manage.py hardware_check --problems silu,matmul --case mini
    python manage.py hardware_check --nkibench /path/to/AccelOpt/NKIBench --output trn1.csv
    python manage.py calibrate --nkibench /path/to/AccelOpt/NKIBench --measurements trn1.csv

`calibrate --measurements` refits the performance model on the traces of the kernels that were measured,
so measure the kernels you will refit on: AccelOpt's (`--nkibench`) for the model's calibration set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from benchmark import conf
from engine.evaluator import EvaluationRequest, EvaluationResult, Limits, LocalExecutor
from engine.platforms.nki.neuron import NeuronHost
from engine.platforms.nki.perf.calibration import (
    COMPARED_COUNTERS,
    calibration_row,
    discover_cases,
    write_calibration_csv,
)
from engine.platforms.nki.suites.loader import load_suite

DEFAULT_OUTPUT_DIR = Path(__file__).resolve().parents[3] / "var" / "hardware_check"


@dataclass
class Target:
    """One baseline to measure: a problem at one shape, its kernel and reference sources."""

    problem: str
    shape: dict[str, int]
    kernel_source: str
    reference_source: str
    large: bool
    peak_counts: dict[str, float] | None = None
    tolerance: float | None = None


def suite_targets(case: str, wanted: set[str]) -> list[Target]:
    targets = []
    for spec in load_suite("nkibench").problems:
        if wanted and spec.slug not in wanted:
            continue
        peak = spec.peak_counts(case)
        targets.append(Target(spec.slug, dict(spec.case(case)), spec.baseline_for(case), spec.reference_source(case),
                              large=case != "mini", peak_counts=peak.as_dict() if peak is not None else None,
                              tolerance=spec.tolerance))
    return targets


def nkibench_targets(directory: Path, wanted: set[str]) -> list[Target]:
    return [Target(c.problem, dict(c.values), c.kernel_path.read_text(), c.reference_path.read_text(), large=True)
            for c in discover_cases(directory) if not wanted or c.problem in wanted]


def limits(large: bool) -> Limits:
    seconds = conf.timeout_seconds(large)
    return Limits(wall_seconds=float(seconds), cpu_seconds=seconds, memory_bytes=conf.memory_bytes(large))


class Command(BaseCommand):
    help = ("Evaluate the NKIBench baselines on this host's NeuronCores (neuron backend) and on the simulator, "
            "print measured and simulated latency and counters side by side, and write a calibration CSV.")
    requires_migrations_checks = False

    def add_arguments(self, parser):
        parser.add_argument("--problems", default="", help="comma-separated problem slugs (default: all 14)")
        parser.add_argument("--case", default="full", choices=["full", "mini"],
                            help="the built-in suite's case to measure (default: full, the published shapes)")
        parser.add_argument("--nkibench", type=Path, default=None,
                            help="measure the kernels of an AccelOpt NKIBench directory instead of the built-in "
                                 "baselines (the kernels the performance model is calibrated on)")
        parser.add_argument("--platform", default="trn1", choices=["trn1", "trn2"])
        parser.add_argument("--output", type=Path, default=None,
                            help=f"the calibration CSV (default: {DEFAULT_OUTPUT_DIR}/<platform>_<time>.csv)")
        parser.add_argument("--workers", type=int, default=0,
                            help="evaluations at once (default: one per NeuronCore, at most 8)")
        parser.add_argument("--no-simulate", action="store_true", help="measure only; no simulated column")
        parser.add_argument("--seeds", default="", help="comma-separated seeds (at least 3) to reproduce a run")

    def handle(self, *args, **options):
        host = NeuronHost.from_environment(options["platform"])
        problems = host.problems()
        if problems:
            # Checked before anything else: no evaluation, no database, no file written.
            for line in problems:
                self.stderr.write(f"  - {line}")
            what = ("No Neuron device is present on this host" if not host.devices()
                    else "The neuron backend cannot run on this host")
            raise CommandError(f"{what}, so nothing was measured. hardware_check needs a trn1 or trn2 instance with "
                               "the Neuron driver, neuronx-cc and aws-neuronx-tools (docs/operations.md, 'Running "
                               "on a Trainium instance').")
        wanted = {p.strip() for p in options["problems"].split(",") if p.strip()}
        targets = (nkibench_targets(options["nkibench"], wanted) if options["nkibench"]
                   else suite_targets(options["case"], wanted))
        if not targets:
            raise CommandError(f"no problem named {sorted(wanted)}")
        seeds = [int(s) for s in options["seeds"].split(",") if s.strip()] or None
        cores = host.cores()
        self.stdout.write(f"hardware_check on {options['platform']}: {len(cores)} NeuronCores {list(cores)} on "
                          f"{len(host.devices())} Neuron device(s), neuronx-cc {host.sdk_version()}, "
                          f"{host.profiler}; {len(targets)} problem(s)")
        measured, simulated = self._evaluate(targets, options, seeds, len(cores))
        self._print(targets, measured, simulated)
        rows = [calibration_row(t.problem, t.shape, r.latency_ms, r.profile)
                for t, r in zip(targets, measured, strict=True) if r.ok and r.latency_ms]
        output = options["output"] or DEFAULT_OUTPUT_DIR / (
            f"{options['platform']}_nkibench_baselines_{datetime.now(UTC):%Y%m%dT%H%M%SZ}.csv")
        write_calibration_csv(rows, output)
        self.stdout.write(f"wrote {len(rows)} measured row(s) to {output}")
        failed = [(t, r) for t, r in zip(targets, measured, strict=True) if not (r.ok and r.latency_ms)]
        if failed:
            for target, result in failed:
                kind = result.error_kind.value if result.error_kind else "no latency"
                self.stderr.write(f"  {target.problem}: {kind}: {result.error_message[:300]}")
            raise CommandError(f"{len(failed)} of {len(targets)} baselines were not measured (above)")

    def _evaluate(self, targets: list[Target], options: dict[str, Any], seeds: list[int] | None,
                  cores: int) -> tuple[list[EvaluationResult], list[EvaluationResult | None]]:
        def request(target: Target, backend: str) -> EvaluationRequest:
            return EvaluationRequest(kernel_source=target.kernel_source, reference_source=target.reference_source,
                                     platform=options["platform"], backend=backend, peak_counts=target.peak_counts,
                                     seeds=seeds, limits=limits(target.large), tolerance=target.tolerance)

        workers = options["workers"] or max(1, min(cores, 8))
        with LocalExecutor(max_workers=workers) as executor:
            neuron = [executor.submit(request(t, "neuron")) for t in targets]
            sim = [None if options["no_simulate"] else executor.submit(request(t, "simulator")) for t in targets]
            measured = []
            for target, future in zip(targets, neuron, strict=True):
                result = future.result()
                self.stdout.write(f"  measured {target.problem}: "
                                  + (f"{result.latency_ms:.4f} ms" if result.ok and result.latency_ms else
                                     f"{result.error_kind.value if result.error_kind else 'failed'}"))
                measured.append(result)
            simulated = [f.result() if f is not None else None for f in sim]
        return measured, simulated

    def _print(self, targets: list[Target], measured: list[EvaluationResult],
               simulated: list[EvaluationResult | None]) -> None:
        out = self.stdout
        out.write(f"{'problem':24} {'shape':34} {'measured ms':>12} {'simulated ms':>13} {'sim/meas':>9}")
        for target, real, sim in zip(targets, measured, simulated, strict=True):
            shape = ",".join(f"{k}={v}" for k, v in sorted(target.shape.items()))
            real_ms = real.latency_ms if real.ok else None
            sim_ms = sim.latency_ms if sim is not None and sim.ok else None
            out.write(f"{target.problem:24} {shape:34} {_fmt(real_ms):>12} {_fmt(sim_ms):>13} "
                      f"{_ratio(sim_ms, real_ms):>9}")
        out.write("")
        out.write("counters, measured / simulated (sim/meas):")
        for target, real, sim in zip(targets, measured, simulated, strict=True):
            if not real.ok:
                continue
            sim_profile = sim.profile if sim is not None and sim.ok else {}
            out.write(f"  {target.problem}")
            for name in COMPARED_COUNTERS:
                mine, model = real.profile.get(name), sim_profile.get(name)
                if mine is None and model is None:
                    continue
                out.write(f"    {name:36} {_fmt(mine):>16} {_fmt(model):>16} {_ratio(model, mine):>9}")


def _fmt(value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _ratio(model: Any, measured: Any) -> str:
    if not isinstance(model, int | float) or not isinstance(measured, int | float) or not measured:
        return "-"
    return f"{model / measured:.2f}"
