"""The run worker: claims queued runs from the database and drives their beam search step by step.

* Claiming is a conditional UPDATE (queued -> running, or a running run whose heartbeat is older than
  the stale limit -> taken over), so two workers never drive the same run: only one UPDATE matches.
* Every search step checkpoints (optimizer.adapters.RunRecorder); a run whose worker died is taken over
  after ACCELOPT_WORKER_STALE_S and resumes from its last checkpoint. Finished evaluations are found in
  the benchmark cache and memory entries are keyed, so nothing is evaluated or remembered twice. An
  evaluation the dead worker left running is restarted at once by the taker (DjangoEvaluator): its
  result died with that process, whether or not the pipeline had finished computing it.
* Between two steps the worker honours cancel and pause requests (optimizer.services sets the flags). A
  cancel that arrives while a step waits on evaluations stops it at once: the evaluator withdraws the
  run's evaluations from the executor (on Ray their tasks are killed, in the local pool their sandbox
  children), stores them as cancelled, and the step is dropped.
* Embedded mode (default): `EmbeddedWorkerMiddleware` wraps the ASGI application and starts one worker
  as an asyncio task in the web process when the server starts. ACCELOPT_EMBEDDED_WORKER=0 turns it
  off; then run `python manage.py run_worker` as its own process (scale-out).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone

from benchmark.services.baselines import start_background_baselines
from engine.agents.offline import OfflineAgents
from engine.search import STOPPED, SUCCEEDED, BeamSearch, SearchConfig
from optimizer import conf
from optimizer.adapters import (
    DjangoEvaluator,
    DjangoOptimizationMemory,
    LostClaim,
    RunCancelled,
    RunRecorder,
    problem_context,
)
from optimizer.events import append_events, publish_events_async, record_events
from optimizer.models import AgentKind, Run, RunStatus

logger = logging.getLogger(__name__)

AgentsFactory = Callable[[Run], Any]
StepHook = Callable[[BeamSearch], Awaitable[None]]


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def default_agents(run: Run) -> Any:
    """The agents a run asked for: the offline rewrite search, or LLM roles from settings."""
    if run.agent == AgentKind.LLM:
        from engine.agents.llm import LLMClient  # lazy: the LLM agents import openai
        from engine.agents.llm_agents import LLMAgents

        models = {role: spec.get("model", "") for role, spec in (run.config.get("models") or {}).items()}
        client = LLMClient(
            conf.llm_roles(models),
            prices=conf.price_table(),
            max_concurrency=conf.llm_concurrency(),
            max_retries=conf.llm_max_retries(),
            backoff_s=conf.llm_backoff_s(),
        )
        return LLMAgents(client)

    return OfflineAgents()


# --- claiming -----------------------------------------------------------------------------------------


def claim_run(worker_id: str, run_id: int | None = None, *, stale_after_s: float | None = None) -> int | None:
    """Take one run for `worker_id` (a given one, or the oldest queued, or a stale running one)."""
    now = timezone.now()
    stale_after_s = conf.worker_settings().stale_after_s if stale_after_s is None else stale_after_s
    stale = Q(status=RunStatus.RUNNING) & (Q(heartbeat_at__lt=now - timedelta(seconds=stale_after_s)) | Q(heartbeat_at=None))
    claimable = Run.objects.filter(Q(status=RunStatus.QUEUED) | stale)
    if run_id is not None:
        claimable = claimable.filter(pk=run_id)
    for candidate in claimable.order_by("created", "id").values("pk", "status", "heartbeat_at", "claimed_by")[:5]:
        # The UPDATE matches only if nobody changed the row since we read it: exactly one claimer wins.
        taken = Run.objects.filter(
            pk=candidate["pk"], status=candidate["status"], heartbeat_at=candidate["heartbeat_at"]
        ).update(status=RunStatus.RUNNING, claimed_by=worker_id, heartbeat_at=now)
        if taken:
            Run.objects.filter(pk=candidate["pk"], started=None).update(started=now)
            if candidate["status"] == RunStatus.RUNNING:
                logger.warning("run %s: taking over from %s (no heartbeat)", candidate["pk"], candidate["claimed_by"])
                record_events(candidate["pk"], [("run.resumed_after_crash", {"worker": worker_id})])
            return candidate["pk"]
    return None


def _record_lifecycle(run_id: int, kind: str, payload: dict[str, Any]) -> list[Any]:
    with transaction.atomic():
        return append_events(run_id, [(kind, payload)])


def _stop_if_requested(run_id: int, worker_id: str) -> str | None:
    """Between steps: apply a pending cancel or pause. Returns the new status, or None to keep going."""
    now = timezone.now()
    with transaction.atomic():
        row = Run.objects.filter(pk=run_id).values("claimed_by", "status", "cancel_requested", "pause_requested").first()
        if row is None or row["claimed_by"] != worker_id or row["status"] != RunStatus.RUNNING:
            raise LostClaim(f"run {run_id} is no longer held by worker {worker_id}")
        if row["cancel_requested"]:
            Run.objects.filter(pk=run_id).update(status=RunStatus.CANCELLED, finished=now, claimed_by="")
            return RunStatus.CANCELLED
        if row["pause_requested"]:
            Run.objects.filter(pk=run_id).update(status=RunStatus.PAUSED, pause_requested=False, claimed_by="")
            return RunStatus.PAUSED
        Run.objects.filter(pk=run_id).update(heartbeat_at=now)
    return None


def _leave(run_id: int, worker_id: str, event: tuple[str, dict[str, Any]], **fields: Any) -> list[Any]:
    """Set `fields` on a run this worker still holds, let go of it and log `event`; nothing if it lost it."""
    with transaction.atomic():
        if not Run.objects.filter(pk=run_id, claimed_by=worker_id, status=RunStatus.RUNNING).update(
            claimed_by="", **fields
        ):
            return []
        return append_events(run_id, [event])


def _fail(run_id: int, worker_id: str, error: str) -> list[Any]:
    return _leave(run_id, worker_id, ("run.failed", {"error": error, "phase": "worker"}),
                  status=RunStatus.FAILED, error_message=error, finished=timezone.now())


def _release(run_id: int, worker_id: str) -> list[Any]:
    return _leave(run_id, worker_id, ("run.queued", {"reason": "worker stopped; resumes from its checkpoint"}),
                  status=RunStatus.QUEUED)


def _claimed_by(worker_id: str) -> list[int]:
    return list(Run.objects.filter(claimed_by=worker_id, status=RunStatus.RUNNING).values_list("pk", flat=True))


def _heartbeat(run_id: int, worker_id: str) -> bool:
    return bool(Run.objects.filter(pk=run_id, claimed_by=worker_id).update(heartbeat_at=timezone.now()))


# --- driving one run ----------------------------------------------------------------------------------


async def drive_run(
    run_id: int,
    worker_id: str,
    *,
    agents_factory: AgentsFactory | None = None,
    evaluator_factory: Callable[[Run], Any] | None = None,
    on_step: StepHook | None = None,
) -> str:
    """Drive a claimed run until it finishes, is cancelled or paused, or is lost. Returns its status.

    `on_step` is awaited after every step (the `optimize` command shows progress with it). The agents
    and the evaluator default to `default_agents` and `DjangoEvaluator` (resolved at call time).
    """
    agents_factory = agents_factory or default_agents
    evaluator_factory = evaluator_factory or DjangoEvaluator
    agents: Any = None
    heartbeat = asyncio.create_task(_keep_alive(run_id, worker_id))
    try:
        run = await sync_to_async(Run.objects.select_related("problem", "start_kernel").get)(pk=run_id)
        recorder = RunRecorder(run, worker_id)
        agents = await sync_to_async(agents_factory)(run)
        search = await BeamSearch.open(
            problem=problem_context(run),
            start_source=run.start_kernel.source,
            config=SearchConfig.from_dict(run.config.get("search", {})),
            agents=agents,
            evaluator=evaluator_factory(run),
            memory=DjangoOptimizationMemory(run),
            events=recorder,
            store=recorder,
            run_key=f"run{run_id}",
            budget=run.budget,
        )
        while not search.state.finished:
            stopped = await sync_to_async(_stop_if_requested)(run_id, worker_id)
            if stopped is not None:
                kind = "run.cancelled" if stopped == RunStatus.CANCELLED else "run.paused"
                await _record_then_publish(run_id, _record_lifecycle, kind, {"iteration": search.state.iteration})
                return stopped
            try:
                await search.step()
            except RunCancelled as cancelled:
                # Cancelled mid-step: its evaluations were withdrawn and the step is dropped (nothing of it was
                # saved); the check above records the cancel.
                logger.info("%s", cancelled)
                continue
            if on_step is not None:
                await on_step(search)
        return {SUCCEEDED: RunStatus.SUCCEEDED, STOPPED: RunStatus.STOPPED}.get(search.state.status, RunStatus.FAILED)
    except LostClaim as lost:
        logger.warning("%s", lost)
        return "lost"
    except asyncio.CancelledError:
        # The worker is shutting down: hand the run back at once rather than after the stale limit.
        try:
            await _record_then_publish(run_id, _release, worker_id)
        except Exception:  # RunWorker.run_forever tries again; failing that, the run is taken over when stale
            logger.exception("run %s: handing it back to the queue failed", run_id)
        raise
    except Exception as error:  # our bug or a broken dependency: fail the run with the reason, keep serving
        logger.exception("run %s failed in the worker", run_id)
        await _record_then_publish(run_id, _fail, worker_id, f"{type(error).__name__}: {error}")
        return RunStatus.FAILED
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat
        client = getattr(agents, "client", None)
        if client is not None and hasattr(client, "close"):
            with contextlib.suppress(Exception):
                await client.close()


async def _record_then_publish(run_id: int, record: Callable[..., list[Any]], *args: Any) -> None:
    """Run `record(run_id, *args)`, a transaction that logs events, off the event loop; then publish them."""
    events = await sync_to_async(record)(run_id, *args)
    await publish_events_async(run_id, events)


async def _keep_alive(run_id: int, worker_id: str) -> None:
    """Heartbeat while a long step (evaluations, slow model calls) is in progress."""
    interval = conf.worker_settings().heartbeat_interval_s
    while True:
        await asyncio.sleep(interval)
        try:
            if not await sync_to_async(_heartbeat)(run_id, worker_id):
                return
        except Exception:
            logger.exception("run %s: heartbeat failed", run_id)


# --- the worker loop ----------------------------------------------------------------------------------


class RunWorker:
    """Claims runs and drives up to `concurrency` of them at a time."""

    def __init__(
        self,
        worker_id: str | None = None,
        *,
        concurrency: int | None = None,
        poll_interval_s: float | None = None,
        agents_factory: AgentsFactory | None = None,
        evaluator_factory: Callable[[Run], Any] | None = None,
    ) -> None:
        settings = conf.worker_settings()
        self.worker_id = worker_id or new_worker_id()
        self.concurrency = concurrency or settings.concurrency
        self.poll_interval_s = settings.poll_interval_s if poll_interval_s is None else poll_interval_s
        self.agents_factory = agents_factory
        self.evaluator_factory = evaluator_factory
        self.tasks: set[asyncio.Task[str]] = set()

    async def claim(self) -> int | None:
        return await sync_to_async(claim_run)(self.worker_id)

    async def step(self) -> bool:
        """Claim one run and drive it to its end (or pause/cancel). Returns False if nothing was queued."""
        run_id = await self.claim()
        if run_id is None:
            return False
        await drive_run(run_id, self.worker_id, agents_factory=self.agents_factory,
                        evaluator_factory=self.evaluator_factory)
        return True

    async def run_forever(self, stop: asyncio.Event | None = None) -> None:
        stop = stop or asyncio.Event()
        logger.info("run worker %s started (concurrency %s)", self.worker_id, self.concurrency)
        try:
            while not stop.is_set():
                claimed = False
                if len(self.tasks) < self.concurrency:
                    try:
                        run_id = await self.claim()
                    except Exception:
                        logger.exception("run worker %s: claim failed", self.worker_id)
                        run_id = None
                    if run_id is not None:
                        claimed = True
                        task = asyncio.create_task(
                            drive_run(run_id, self.worker_id, agents_factory=self.agents_factory,
                                      evaluator_factory=self.evaluator_factory)
                        )
                        self.tasks.add(task)
                        task.add_done_callback(self.tasks.discard)
                if not claimed:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(), timeout=self.poll_interval_s)
        finally:
            for task in list(self.tasks):
                task.cancel()
            if self.tasks:
                await asyncio.gather(*self.tasks, return_exceptions=True)
            # A run claimed but cancelled before its driver started is handed back here.
            for run_id in await sync_to_async(_claimed_by)(self.worker_id):
                await _record_then_publish(run_id, _release, self.worker_id)
            await sync_to_async(close_old_connections)()
            logger.info("run worker %s stopped", self.worker_id)


# --- embedded mode ------------------------------------------------------------------------------------

_embedded: dict[str, Any] = {}


def start_embedded_worker() -> asyncio.Task[None] | None:
    """Start this process's worker on the running event loop, once; None when disabled."""
    if not conf.worker_settings().embedded:
        return None
    start_background_baselines()  # the suite's baselines, evaluated in a thread of their own (issue 20)
    task = _embedded.get("task")
    if task is None or task.done():
        worker = RunWorker()
        stop = asyncio.Event()
        _embedded.update(worker=worker, stop=stop, task=asyncio.create_task(worker.run_forever(stop)))
    return _embedded["task"]


async def stop_embedded_worker() -> None:
    task, stop = _embedded.pop("task", None), _embedded.pop("stop", None)
    _embedded.pop("worker", None)
    if task is not None and stop is not None:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class EmbeddedWorkerMiddleware:
    """ASGI wrapper that runs the embedded worker alongside the application it wraps.

    Servers with the ASGI lifespan protocol (uvicorn, hypercorn) start it on lifespan startup. Daphne
    has no lifespan, so the worker is scheduled on the event loop daphne's reactor is about to run
    (`daphne.server.twisted_loop`); in a process that never runs that loop (tests, management
    commands) the callback simply never fires. Connections themselves never start a worker.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        daphne_server = sys.modules.get("daphne.server")
        loop = getattr(daphne_server, "twisted_loop", None)
        if loop is not None and conf.worker_settings().embedded:
            loop.call_soon_threadsafe(start_embedded_worker)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        return await self.app(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                start_embedded_worker()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await stop_embedded_worker()
                await send({"type": "lifespan.shutdown.complete"})
                return
