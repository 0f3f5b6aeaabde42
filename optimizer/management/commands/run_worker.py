"""python manage.py run_worker: claim queued runs and drive them, as a process of its own (scale-out).

With the default embedded mode the web process already runs a worker; run this one too (or set
ACCELOPT_EMBEDDED_WORKER=0 on the web processes) to give runs their own processes. Several may run at
once: claiming is a conditional UPDATE, so each run has exactly one worker.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from benchmark.services.baselines import start_background_baselines
from optimizer.events import warm_up
from optimizer.worker import RunWorker


class Command(BaseCommand):
    help = "Run the optimization-run worker until interrupted (or, with --once, drive one queued run)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="drive at most one run, then exit")
        parser.add_argument("--concurrency", type=int, default=None, help="runs driven at the same time")

    def handle(self, *args: Any, **options: Any) -> None:
        worker = RunWorker(concurrency=options["concurrency"])
        if options["once"]:
            did_work = asyncio.run(worker.step())
            self.stdout.write("drove one run" if did_work else "no queued run")
            return
        start_background_baselines()  # the suite's baselines, in a thread, unless already evaluated
        warm_up()  # the event template and URLconf, before the first run's first batch of events
        self.stdout.write(f"run worker {worker.worker_id}: waiting for queued runs (Ctrl-C stops)")
        asyncio.run(self._serve(worker))

    async def _serve(self, worker: RunWorker) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        # Runs being driven when we stop keep their checkpoint; another worker takes them over once
        # their heartbeat is stale (ACCELOPT_WORKER_STALE_S).
        await worker.run_forever(stop)
