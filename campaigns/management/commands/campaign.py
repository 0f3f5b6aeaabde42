"""python manage.py campaign --suite nkibench [--case full] | --problems silu,rope_single_freq_apply ...

Launches a campaign (the same service as the form and the API) with AccelOpt's published configuration
unless told otherwise, and prints its id and page. With --wait it drives the campaign's runs in this process
(as many at once as the campaign allows; workers elsewhere may take some too), prints a line as each run
ends, and ends with the table: a row per problem and the suite's geomean fraction of peak (--json: the
campaign report as JSON instead). Ctrl-C hands the runs it drives back to the queue; the campaign goes on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.http import Http404

from benchmark.models import DEFAULT_BACKEND, DEFAULT_PLATFORM, Backend, Platform
from campaigns import services
from campaigns.models import BUDGET_FIELDS, Campaign
from campaigns.progress import campaign_rows, headline
from campaigns.reports import campaign_report
from campaigns.scheduler import advance
from engine.search.config import MEMORY_MODES, STRATEGIES
from optimizer import conf
from optimizer.models import AgentKind, Run, RunStatus
from optimizer.worker import claim_run, drive_run, new_worker_id

# Command-line option -> SearchConfig field.
SEARCH_OPTIONS = {
    "strategy": "strategy",
    "memory_mode": "memory_mode",
    "iterations": "iterations",
    "beam": "beam_width",
    "plans": "plans_per_candidate",
    "samples": "samples_per_plan",
    "rewrites": "rewrites_per_iteration",
    "memory_size": "memory_size",
    "fix_attempts": "fix_attempts",
    "seed": "seed",
    "mini_first": "mini_first",
}
POLL_S = 0.5


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.2f}%"


def _speedup(value: float | None) -> str:
    return "—" if not value else f"x{value:.3f}"


def _cost(value: float | None, known: bool = True) -> str:
    return "unknown" if not known or value is None else f"${value:.4f}"


class Command(BaseCommand):
    help = "Optimize a suite or a set of problems with one configuration: a run per problem, fairly scheduled."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--suite", default="", help="every problem of this suite (e.g. nkibench)")
        parser.add_argument("--problems", default="", help="comma-separated [SUITE/]SLUG[:CASE] or ids")
        parser.add_argument("--case", choices=("mini", "full"), default="", help="shapes (default mini)")
        parser.add_argument("--name", default="")
        parser.add_argument("--platform", choices=Platform.values, default=DEFAULT_PLATFORM)
        parser.add_argument("--backend", choices=Backend.values, default=DEFAULT_BACKEND)
        parser.add_argument("--agent", choices=AgentKind.values, default=AgentKind.OFFLINE)
        parser.add_argument("--model", action="append", default=[], metavar="ROLE=MODEL",
                            help=f"model for a role ({', '.join(conf.ROLES)}); repeat per role")
        parser.add_argument("--strategy", help=f"search strategy: {', '.join(STRATEGIES)} (default beam)")
        parser.add_argument("--memory-mode", help=f"memory shown to the Planner: {', '.join(MEMORY_MODES)}")
        parser.add_argument("--iterations", type=int, help="iterations per run (default 15)")
        parser.add_argument("--beam", type=int, help="beam width (default 6)")
        parser.add_argument("--plans", type=int, help="plans per beam kernel (default 12)")
        parser.add_argument("--samples", type=int, help="kernels written per plan (default 2)")
        parser.add_argument("--rewrites", type=int, help="rewrites kept in memory per iteration (default 8)")
        parser.add_argument("--memory-size", type=int, help="memory entries shown to the Planner (default 16)")
        parser.add_argument("--no-memory", action="store_true", help="show and write no memory entries")
        parser.add_argument("--fix-attempts", type=int)
        parser.add_argument("--seed", type=int)
        parser.add_argument("--mini-first", action=argparse.BooleanOptionalAction, default=None,
                            help="check candidates on each problem's mini case before full size (default: on where a "
                                 "full-size problem has a mini case)")
        parser.add_argument("--current-generation", action="store_true",
                            help="NKI problems: every run returns kernels in NKI 0.6 (the nki package)")
        parser.add_argument("--max-tokens", type=int)
        parser.add_argument("--max-dollars", "--max-cost-usd", type=float, dest="max_cost_usd")
        parser.add_argument("--max-wall-s", "--max-wall-time-s", type=float, dest="max_wall_time_s",
                            help="seconds from launch to the end")
        parser.add_argument("--max-evaluations", type=int)
        parser.add_argument("--concurrency", type=int, help="runs of this campaign at once (default: the worker's)")
        parser.add_argument("--public", action="store_true")
        parser.add_argument("--wait", action="store_true", help="drive the runs here until the campaign ends")
        parser.add_argument("--json", action="store_true", help="with --wait: print the campaign report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        search = {field: options[opt] for opt, field in SEARCH_OPTIONS.items() if options.get(opt) is not None}
        models: dict[str, str] = {}
        for item in options["model"]:
            role, _, model = item.partition("=")
            if not model:
                raise CommandError(f"--model takes ROLE=MODEL, got {item!r}")
            models[role.strip()] = model.strip()
        try:
            campaign = services.create_campaign(
                None,
                suite=options["suite"],
                problems=[p for p in options["problems"].split(",") if p.strip()],
                case=options["case"],
                name=options["name"],
                agent=options["agent"],
                platform=options["platform"],
                backend=options["backend"],
                search=search,
                models=models,
                memory=not options["no_memory"],
                budgets={name: options[name] for name in BUDGET_FIELDS if options.get(name) is not None},
                max_concurrent_runs=options["concurrency"],
                is_public=options["public"],
                current_generation=options["current_generation"],
            )
        except (ValueError, Http404) as error:
            raise CommandError(str(error)) from None
        except ValidationError as error:
            raise CommandError(" ".join(error.messages)) from None
        config = campaign.config["search"]
        self.quiet = options["json"] and options["wait"]  # --json prints the report alone, for jq and scripts
        self._say(
            f"campaign {campaign.pk}: {campaign.entries.count()} problems on {campaign.platform}, {campaign.agent} agent, "
            f"T={config['iterations']} B={config['beam_width']} N={config['plans_per_candidate']} "
            f"K={config['samples_per_plan']} memory {'on' if campaign.config['memory'] else 'off'}, "
            f"{campaign.max_concurrent_runs} run(s) at once; page {campaign.get_absolute_url()}"
        )
        if not options["wait"]:
            return
        try:
            asyncio.run(self._drive(campaign.pk, campaign.max_concurrent_runs))
        except KeyboardInterrupt:
            self.stdout.write(f"\ninterrupted: campaign {campaign.pk} goes on with the workers")
            return
        campaign.refresh_from_db()
        if options["json"]:
            self.stdout.write(json.dumps(campaign_report(campaign), indent=2))
        else:
            self._table(campaign)

    async def _drive(self, campaign_id: int, slots: int) -> None:
        """Claim the campaign's queued runs and drive up to `slots` of them here until the campaign ends."""
        worker_id = "campaign-command:" + new_worker_id()
        tasks: dict[int, asyncio.Task[str]] = {}
        try:
            while True:
                # While runs are driven here the database is left to them (the scheduler follows their events);
                # it is read again only when one of them ends, or every POLL_S when runs are driven elsewhere.
                if tasks:
                    await asyncio.wait(list(tasks.values()), return_when=asyncio.FIRST_COMPLETED)
                for run_id, task in list(tasks.items()):
                    if task.done():
                        del tasks[run_id]
                        await sync_to_async(self._report_run)(run_id)
                await sync_to_async(advance)(campaign_id)
                finished = await sync_to_async(
                    lambda: Campaign.objects.values_list("finished", flat=True).get(pk=campaign_id))()
                if finished is not None and not tasks:
                    return
                queued = await sync_to_async(lambda: list(
                    Run.objects.filter(campaign_entry__campaign_id=campaign_id, status=RunStatus.QUEUED)
                    .order_by("created", "id").values_list("pk", flat=True)))()
                for run_id in queued:
                    if len(tasks) >= slots:
                        break
                    if await sync_to_async(claim_run)(worker_id, run_id) == run_id:
                        tasks[run_id] = asyncio.create_task(drive_run(run_id, worker_id))
                if not tasks:
                    await asyncio.sleep(POLL_S)
        finally:
            for task in tasks.values():
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks.values(), return_exceptions=True)

    def _say(self, line: str) -> None:
        if not getattr(self, "quiet", False):
            self.stdout.write(line)

    def _report_run(self, run_id: int) -> None:
        run = Run.objects.select_related("problem").get(pk=run_id)
        speedup = f"x{run.best_speedup:.3f}" if run.best_speedup else "no speedup"
        self._say(f"  run {run.pk} {run.problem.address}: {run.status}, {speedup}, "
                          f"peak {_percent(run.best_peak_fraction)}")

    def _table(self, campaign: Campaign) -> None:
        rows = campaign_rows(campaign)
        head = headline(campaign, rows)
        width = max([len(r["address"]) for r in rows] + [7])
        self.stdout.write(f"{'problem':<{width}}  {'state':<10} {'baseline':>9} {'best':>9} {'speedup':>8} "
                          f"{'evals':>6} {'tokens':>9} {'cost':>10}")
        for r in rows:
            self.stdout.write(
                f"{r['address']:<{width}}  {r['state']:<10} {_percent(r['baseline_fraction']):>9} "
                f"{_percent(r['best_fraction']):>9} {_speedup(r['speedup']):>8} "
                f"{r['evaluations']:>6} {r['tokens']:>9} {_cost(r['cost_usd'], r['cost_known']):>10}"
            )
        usage = head["usage"]
        speedup = _speedup(head["geomean_speedup"])
        self.stdout.write(
            f"campaign {campaign.pk} {campaign.status}{': ' + campaign.stop_reason if campaign.stop_reason else ''}; "
            f"geomean fraction of peak {_percent(head['baseline_geomean'])} -> {_percent(head['best_geomean'])} "
            f"over {head['counted']} of {head['problems']} problems, geomean speedup {speedup}; "
            f"{usage.evaluations} evaluations, {usage.tokens} tokens, cost {_cost(usage.cost_usd, not usage.cost_unknown)}, "
            f"wall {usage.wall_time_s:.1f} s"
        )
