"""python manage.py optimize --problem SLUG[:CASE]: one optimization run, driven here to completion.

The run is an ordinary Run row (visible in the web pages and the API while it goes); this command
claims it itself instead of leaving it to a worker, prints one line per iteration, and ends with the
best speedup and peak fraction. Ctrl-C pauses the run: resume it from the web page, the API, or a
worker, and it continues from its last checkpoint. `--continue RUN` goes on with a run a budget stopped
(services.continue_run), with the budget options as its new caps.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import Q
from django.http import Http404

from benchmark import services as benchmark_services
from benchmark.models import Backend, Platform
from engine.search import BUDGET_FIELDS, BeamSearch
from engine.search.config import STRATEGIES
from optimizer import services
from optimizer.models import AgentKind, Run, RunStatus
from optimizer.worker import claim_run, drive_run, new_worker_id

# Command-line option -> SearchConfig field.
SEARCH_OPTIONS = {
    "iterations": "iterations",
    "beam": "beam_width",
    "plans": "plans_per_candidate",
    "samples": "samples_per_plan",
    "memory_size": "memory_size",
    "fix_attempts": "fix_attempts",
    "seed": "seed",
    "memory_mode": "memory_mode",
    "executor_memory": "executor_memory",
    "strategy": "strategy",
    "mini_first": "mini_first",
}


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.2f}%"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g} ms"


def _best(latency_ms: float | None, speedup: float | None, peak: float | None) -> str:
    """An iteration's best kernel; a correctness-only backend (the Triton interpreter) times nothing, so it
    says so instead of printing a zero speedup."""
    if latency_ms is None:
        return "no latency (the backend checks correctness only)" if not speedup else f"best x{speedup:.3f}"
    speed = f"x{speedup:.3f}, " if speedup else ""
    return f"best {_ms(latency_ms)} ({speed}peak {_percent(peak)})"


class Command(BaseCommand):
    help = "Optimize a problem's kernel with the beam search and print the best speedup and peak fraction."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--problem", help="[SUITE/]SLUG[:CASE], e.g. silu or silu:mini (required unless --continue)")
        parser.add_argument("--continue", dest="continue_run", type=int, metavar="RUN",
                            help="continue run RUN, which a budget stopped, with the budget options given (none: no "
                                 "cap) from where it stopped; the search options do not apply")
        parser.add_argument("--agent", choices=AgentKind.values, default=AgentKind.OFFLINE)
        parser.add_argument("--kernel", help="starting kernel file (default: the problem's baseline)")
        parser.add_argument("--iterations", type=int, help="search iterations (T)")
        parser.add_argument("--beam", type=int, help="beam width (B)")
        parser.add_argument("--plans", type=int, help="plans per beam kernel (N)")
        parser.add_argument("--samples", type=int, help="kernels written per plan (K)")
        parser.add_argument("--memory-size", type=int, help="memory entries shown to the Planner")
        parser.add_argument("--fix-attempts", type=int, help="Fixer rounds per failing kernel")
        parser.add_argument("--seed", type=int)
        parser.add_argument("--memory-mode", choices=["curated", "accelopt"],
                            help="curated: the global memory ranked for each kernel; accelopt: this run's rewrites")
        parser.add_argument("--executor-memory", action="store_true", default=None,
                            help="show the memory to the Executor too (off by default, as in AccelOpt)")
        parser.add_argument("--platform", choices=Platform.values,
                            help="default: the problem's own (trn1 for NKI, h100 for Triton)")
        parser.add_argument("--backend", choices=Backend.values, help="default: the platform's own")
        parser.add_argument("--public", action="store_true", help="let anyone watch the run")
        parser.add_argument("--strategy", choices=list(STRATEGIES), help="beam (default) or repeated_sampling")
        parser.add_argument("--mini-first", action=argparse.BooleanOptionalAction, default=None,
                            help="check candidates on the problem's mini case before full size (default: on where "
                                 "a full-size problem has a mini case)")
        parser.add_argument("--current-generation", action="store_true",
                            help="NKI: return kernels in NKI 0.6 (the nki package) even from a legacy neuronxcc.nki "
                                 "start (the offline agent migrates the kernel first)")
        for name, (label, unit) in BUDGET_FIELDS.items():
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=float,
                                help=f"budget: stop cleanly once the run has spent this many {unit} ({label})")

    def handle(self, *args: Any, **options: Any) -> None:
        search = {field: options[opt] for opt, field in SEARCH_OPTIONS.items() if options.get(opt) is not None}
        worker_id = "optimize-command:" + new_worker_id()
        budget = {name: options.get(name) for name in BUDGET_FIELDS}
        if options["continue_run"] is not None:
            run = self._continue(options["continue_run"], budget, worker_id)
            self._drive(run, worker_id)
            return
        if not options["problem"]:
            raise CommandError("give --problem (or --continue RUN)")
        try:
            problem = benchmark_services.get_problem_by_address(options["problem"], require_visible=False)
            source = Path(options["kernel"]).read_text(encoding="utf-8") if options["kernel"] else None
            # Created and claimed in one transaction: a worker elsewhere never sees it queued.
            with transaction.atomic():
                run = services.create_run(
                    None, problem, start_source=source, start_name=Path(options["kernel"] or "").name,
                    agent=options["agent"], platform=options["platform"], backend=options["backend"],
                    search=search, is_public=options["public"],
                    budget=budget, current_generation=options["current_generation"],
                )
                claim_run(worker_id, run.pk)
        except (ValueError, Http404, OSError) as error:
            raise CommandError(str(error)) from None
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None

        config = run.config["search"]
        self.stdout.write(
            f"run {run.pk}: {problem.address} on {run.platform}, {run.agent} agent, "
            f"T={config['iterations']} B={config['beam_width']} N={config['plans_per_candidate']} "
            f"K={config['samples_per_plan']} seed={config['seed']}"
        )
        self._drive(run, worker_id)

    def _continue(self, run_id: int, budget: dict[str, Any], worker_id: str) -> Run:
        """services.continue_run on a run a budget stopped, claimed here in the same transaction."""
        try:
            with transaction.atomic():
                run = services.continue_run(Run.objects.get(pk=run_id), None, budget)
                claim_run(worker_id, run.pk)
        except Run.DoesNotExist:
            raise CommandError(f"no run with id {run_id}") from None
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        self.stdout.write(f"run {run.pk}: continued from iteration {run.current_iteration} with more budget")
        return run

    def _drive(self, run: Run, worker_id: str) -> None:
        try:
            # A continued run's earlier iterations were reported when they ran.
            done = len((run.checkpoint or {}).get("history") or [])
            status = asyncio.run(drive_run(run.pk, worker_id, on_step=self._progress(done)))
        except KeyboardInterrupt:
            # The driver has already handed the run back (queued); hold it instead, as promised.
            Run.objects.filter(Q(claimed_by=worker_id) | Q(status=RunStatus.QUEUED), pk=run.pk).update(
                status=RunStatus.PAUSED, claimed_by=""
            )
            self.stdout.write(f"\ninterrupted: run {run.pk} paused at its last checkpoint (resume it to continue)")
            return
        run.refresh_from_db()
        self._summary(run, status)

    @staticmethod
    def _savings(run: Run) -> str:
        """The run page's evaluation counts (engine.search.cascade), ending the summary line."""
        saved = services.evaluation_savings(run)
        if saved is None:
            return "evaluations: no counts (the run ended before its first step)"
        mini = (f"mini shapes first: {saved.mini_stopped} stopped there, {saved.mini_passed} went on to full size"
                if saved.mini_first else "mini shapes first: off")
        return (f"evaluations: {saved.full_size} at full size, {saved.mini} on the mini shapes; "
                f"{saved.from_cache} answered from the cache ({saved.repeated} repeated in the run, "
                f"{saved.cached} same source stored, {saved.normalized} identical source stored); {mini}")

    def _progress(self, done: int = 0) -> Any:
        reported = {"iterations": done}

        live = self.stdout.isatty()  # a one-line status that rewrites itself, on terminals only

        async def on_step(search: BeamSearch) -> None:
            state = search.state
            if live and not state.finished:
                self.stdout.write(
                    f"\r  iteration {state.iteration}/{state.config.iterations}: {state.phase:<9} "
                    f"{len(state.candidates)} candidates, {state.totals.evaluations} evaluations so far",
                    ending="",
                )
                self.stdout.flush()
            if live and len(state.history) > reported["iterations"]:
                self.stdout.write("\r\033[K", ending="")
            for summary in state.history[reported["iterations"]:]:
                best_peak = state.evaluations.get(summary.get("best_sha") or "")
                await sync_to_async(self.stdout.write)(
                    f"  iteration {summary['iteration']}/{state.config.iterations}: "
                    f"{summary['correct']}/{summary['candidates']} candidates correct, "
                    f"{summary['rewrites']} rewrites remembered, "
                    + _best(summary["best_latency_ms"], summary["best_speedup"],
                            best_peak.peak_fraction if best_peak else None)
                )
            reported["iterations"] = len(state.history)

        return on_step

    def _summary(self, run: Run, status: str) -> None:
        if run.status == RunStatus.STOPPED:  # a budget ended it: not an error, and what it found is kept
            self.stdout.write(f"stopped: budget ({BUDGET_FIELDS[run.stopped_by_budget][0]} budget reached)")
        elif run.status != RunStatus.SUCCEEDED:
            raise CommandError(f"run {run.pk} {run.status}: {run.error_message or status}")
        speedup = run.best_speedup or None  # no timed kernel (a correctness-only backend): no "x0.000"
        self.stdout.write(
            f"best speedup x{speedup:.3f} ({_ms(run.start_latency_ms)} -> {_ms(run.best_latency_ms)}), "
            f"peak fraction {_percent(run.best_peak_fraction)}; kernel {run.best_kernel_id}, "
            f"{run.total_tokens} tokens, ${run.cost_usd:.4f}; {self._savings(run)}"
            if speedup is not None
            else f"run {run.pk} finished without a timed kernel; {self._savings(run)}"
        )
