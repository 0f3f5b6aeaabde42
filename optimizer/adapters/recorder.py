"""`RunRecorder`: the search's EventSink and CheckpointStore for one run, held by one worker.

Events emitted during a search step are buffered and written, together with the checkpoint and the rows
they describe (Iteration, Candidate, AgentCall, the Run's totals and best kernel), in ONE transaction
when the step saves. A crash therefore loses a whole step or nothing, and the event log never repeats or
skips a step. Events are published to the run's channel-layer group after that transaction commits.

The checkpoint stores kernel sources by sha only (they are Kernel rows already), so it stays small
however many kernels a run writes; `load()` puts the sources back.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from benchmark import review
from benchmark import services as benchmark_services
from benchmark.models import Evaluation, Kernel, KernelOrigin
from engine.search import FAILED, STOPPED, SUCCEEDED
from optimizer.events import append_events, publish_events_async
from optimizer.models import (
    AgentCall,
    Candidate,
    CandidateStatus,
    Iteration,
    IterationStatus,
    Run,
    RunEvent,
    RunStatus,
)


class LostClaim(Exception):
    """The run is no longer held by this worker (taken over after a missed heartbeat, or finished)."""



def _candidate_indexes(key: str) -> tuple[int, int]:
    """"<iteration>.<beam>.<plan>.<sample>" -> (plan, sample)."""
    parts = key.split(".")
    try:
        return int(parts[2]), int(parts[3])
    except (IndexError, ValueError):
        return 0, 0


class RunRecorder:
    """EventSink and CheckpointStore of one run, held by one worker."""

    def __init__(self, run: Run, worker_id: str) -> None:
        self.run_id = run.pk
        self.problem = run.problem
        self.platform = run.platform
        self.backend = run.backend
        self.start_kernel_id = run.start_kernel_id
        self.worker_id = worker_id
        self._buffer: list[tuple[str, dict[str, Any]]] = []
        self._kernel_ids: dict[str, int] = {}
        self._projected: dict[str, tuple[Any, ...]] = {}
        self.saves = 0

    # EventSink
    async def emit(self, kind: str, payload: dict[str, Any]) -> None:
        self._buffer.append((kind, payload))

    # CheckpointStore
    async def load(self) -> dict[str, Any] | None:
        return await sync_to_async(self._load)()

    def _load(self) -> dict[str, Any] | None:
        checkpoint = Run.objects.values_list("checkpoint", flat=True).get(pk=self.run_id)
        if checkpoint is None:
            return None
        state = dict(checkpoint)
        shas = state.pop("kernel_shas", [])
        inline = state.pop("inline_kernels", {})
        rows = self._own_rows(shas)
        sources = dict(rows.values_list("sha256", "source"))
        self._kernel_ids = dict(rows.values_list("sha256", "pk"))
        missing = [sha for sha in shas if sha not in sources and sha not in inline]
        if missing:
            raise RuntimeError(f"run {self.run_id}: checkpoint names {len(missing)} kernels no longer stored")
        state["kernels"] = {sha: sources.get(sha) or inline[sha] for sha in shas}
        return state

    async def save(self, state: dict[str, Any]) -> None:
        events, self._buffer = self._buffer, []
        stored = await sync_to_async(self._save)(state, events)
        self.saves += 1
        await publish_events_async(self.run_id, stored)

    def _save(self, state: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> list[RunEvent]:
        with transaction.atomic():
            now = timezone.now()
            # Holding the claim is checked inside the transaction: a worker that lost the run writes nothing.
            if not Run.objects.filter(pk=self.run_id, claimed_by=self.worker_id, status=RunStatus.RUNNING).update(
                heartbeat_at=now
            ):
                raise LostClaim(f"run {self.run_id} is no longer held by worker {self.worker_id}")
            checkpoint, inline = self._store_kernels(state)
            iteration = self._project_iteration(state, now)
            self._project_candidates(state, iteration)  # first: the agent calls below point at them
            stored_events = self._store_events(state, events, iteration)
            self._update_run(state, checkpoint, inline, now)
        return stored_events

    # -- projection of the search state onto rows ---------------------------------------------------------

    def _parents(self, state: dict[str, Any]) -> dict[str, str]:
        parents: dict[str, str] = {}
        for candidate in state["candidates"]:
            for sha in candidate["attempts"]:
                parents.setdefault(sha, candidate["parent_sha"])
        return parents

    def _own_rows(self, shas: list[str]) -> Any:
        """The rows this run's kernels with these shas are: the ones create_kernel gave it (the first shareable row
        of each source; ordered so that the first wins in a dict), never another person's private run's copy."""
        return (benchmark_services.shareable_kernels(self.problem, self.run_id)
                .filter(sha256__in=shas).order_by("-pk"))

    def _store_kernels(self, state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """Every kernel of the state as a Kernel row; the checkpoint keeps their shas only."""
        kernels: dict[str, str] = state["kernels"]
        new = [sha for sha in kernels if sha not in self._kernel_ids]
        if new:
            self._kernel_ids.update(self._own_rows(new).values_list("sha256", "pk"))
        parents = self._parents(state)
        inline: dict[str, str] = {}
        for sha in kernels:
            if sha in self._kernel_ids:
                continue
            parent_id = self._kernel_ids.get(parents.get(sha, ""))
            try:
                kernel, _ = benchmark_services.create_kernel(
                    self.problem,
                    kernels[sha],
                    origin=KernelOrigin.GENERATED,
                    parent=Kernel(pk=parent_id) if parent_id else None,
                    run_id=self.run_id,
                )
            except ValidationError:
                inline[sha] = kernels[sha]  # refused by the benchmark app: keep it in the checkpoint
                continue
            self._kernel_ids[sha] = kernel.pk
        checkpoint = {key: value for key, value in state.items() if key != "kernels"}
        checkpoint["kernel_shas"] = list(kernels)
        return checkpoint, inline

    def _project_iteration(self, state: dict[str, Any], now: Any) -> Iteration | None:
        index = state["iteration"]
        if index < 1:
            return None
        iteration, created = Iteration.objects.get_or_create(
            run_id=self.run_id,
            index=index,
            defaults={"beam_kernel_ids": [self._kernel_ids.get(m["sha"]) for m in state["beam"]]},
        )
        # _step_next appends the finished iteration to the history and starts the next in the same step.
        if state["history"]:
            summary = state["history"][-1]
            Iteration.objects.filter(
                run_id=self.run_id, index=summary["iteration"], status=IterationStatus.RUNNING
            ).update(status=IterationStatus.FINISHED, finished=now, best_latency_ms=summary.get("best_latency_ms"))
        # (A run stopped on a budget selected its last beam in the step that stopped it.)
        if (state["phase"] in ("summarize", "next") or state["status"] == STOPPED) and not iteration.next_beam_kernel_ids:
            iteration.next_beam_kernel_ids = [self._kernel_ids.get(m["sha"]) for m in state["beam"]]
            best = _best(state["beam"])
            iteration.best_latency_ms = best["latency_ms"] if best else None
            if best:
                iteration.best_peak_fraction = state["evaluations"].get(best["sha"], {}).get("peak_fraction")
            iteration.save(update_fields=["next_beam_kernel_ids", "best_latency_ms", "best_peak_fraction"])
        return iteration

    def _evaluation_ids(self, kernel_ids: list[int]) -> dict[int, int]:
        if not kernel_ids:
            return {}
        version = benchmark_services.backend_version(self.backend)
        return dict(
            Evaluation.objects.filter(
                kernel_id__in=kernel_ids, platform=self.platform, backend=self.backend, backend_version=version
            ).values_list("kernel_id", "pk")
        )

    def _project_candidates(self, state: dict[str, Any], iteration: Iteration | None) -> None:
        if iteration is None:
            return
        plans = {plan["key"]: plan["text"] for plan in state["plans"]}
        evaluations = state["evaluations"]
        changed = []
        for record in state["candidates"]:
            sha = record["attempts"][-1] if record["attempts"] else None
            evaluation = evaluations.get(sha) if sha else None
            row = (
                sha,
                bool(evaluation),
                record["unusable"],
                record["fixes"],
                record["speedup"],
                record["chosen"],
            )
            projected_key = f"{iteration.index}:{record['key']}"
            if self._projected.get(projected_key) != row:
                changed.append((record, sha, evaluation))
                self._projected[projected_key] = row
        if not changed:
            return
        kernel_ids = [self._kernel_ids[sha] for _, sha, ev in changed if sha in self._kernel_ids and ev]
        evaluation_ids = self._evaluation_ids(kernel_ids)
        for record, sha, evaluation in changed:
            plan_index, sample_index = _candidate_indexes(record["key"])
            kernel_id = self._kernel_ids.get(sha) if sha else None
            if record["unusable"]:
                status, error = CandidateStatus.UNUSABLE, record["unusable"]
            elif evaluation is not None:
                status, error = CandidateStatus.EVALUATED, evaluation.get("error_message") or ""
            else:
                status, error = CandidateStatus.WRITTEN, ""
            Candidate.objects.update_or_create(
                iteration=iteration,
                key=record["key"],
                defaults={
                    "parent_kernel_id": self._kernel_ids.get(record["parent_sha"], self.start_kernel_id),
                    "plan_index": plan_index,
                    "sample_index": sample_index,
                    "plan": plans.get(record["plan_key"], ""),
                    "kernel_id": kernel_id,
                    "evaluation_id": evaluation_ids.get(kernel_id) if evaluation is not None else None,
                    "status": status,
                    "fix_attempts": record["fixes"],
                    "correct": evaluation.get("correct") if evaluation is not None else None,
                    "latency_ms": evaluation.get("latency_ms") if evaluation is not None else None,
                    "peak_fraction": evaluation.get("peak_fraction") if evaluation is not None else None,
                    "speedup": record["speedup"],
                    "chosen": record["chosen"],
                    "error": error,
                },
            )

    def _store_events(
        self, state: dict[str, Any], events: list[tuple[str, dict[str, Any]]], iteration: Iteration | None
    ) -> list[RunEvent]:
        """AgentCall rows for agent.call events (the event keeps a summary and the row id), then the log."""
        candidate_ids = (
            dict(Candidate.objects.filter(iteration=iteration).values_list("key", "pk")) if iteration else {}
        )
        unusable = {(p.get("task_key"), p.get("role")) for kind, p in events if kind == "agent.unusable"}
        writers = self._kernel_writers(events)
        log: list[tuple[str, dict[str, Any]]] = []
        for index, (kind, payload) in enumerate(events):
            if kind == "agent.call":
                call = payload.get("call", {})
                task_key = str(payload.get("task_key", ""))
                row = AgentCall.objects.create(
                    run_id=self.run_id,
                    iteration=iteration if iteration and payload.get("iteration") == iteration.index else None,
                    candidate_id=candidate_ids.get(task_key.split("#", 1)[0]),
                    role=call.get("role", ""),
                    model=call.get("model", ""),
                    prompt=call.get("prompt", []),
                    response=call.get("response", ""),
                    prompt_tokens=call.get("prompt_tokens", 0),
                    completion_tokens=call.get("completion_tokens", 0),
                    latency_ms=call.get("latency_ms"),
                    cost_usd=call.get("cost_usd", 0.0),
                    reasoning=call.get("reasoning", "") or "",
                    error=call.get("error", ""),
                    usable=(task_key, call.get("role")) not in unusable and not call.get("error"),
                    kernel_id=writers.get(index),
                )
                payload = {
                    "iteration": payload.get("iteration"),
                    "task_key": task_key,
                    "agent_call": row.pk,
                    **{
                        key: call.get(key)
                        for key in ("role", "model", "prompt_tokens", "completion_tokens", "latency_ms",
                                    "cost_usd", "error", "attempts", "finish_reason")
                    },
                }
            log.append((kind, payload))
        self._record_holds(events)
        return append_events(self.run_id, log)

    def _kernel_writers(self, events: list[tuple[str, dict[str, Any]]]) -> dict[int, int]:
        """Which agent.call event (by index) wrote which Kernel row: the last error-free Executor or Fixer
        call of a task whose candidate.written event (same step) names the sha. Earlier calls of the same
        task were retries that failed."""
        written: dict[str, str] = {}
        for kind, payload in events:
            if kind == "candidate.written" and payload.get("sha"):
                key, fix = str(payload.get("candidate_key", "")), payload.get("fix")
                written[f"{key}#fix{fix}" if fix else key] = payload["sha"]
        last_call: dict[str, int] = {}
        for index, (kind, payload) in enumerate(events):
            call = payload.get("call", {}) if kind == "agent.call" else {}
            if call.get("role") in ("executor", "fixer") and not call.get("error"):
                last_call[str(payload.get("task_key", ""))] = index
        return {
            index: self._kernel_ids[written[task_key]]
            for task_key, index in last_call.items()
            if written.get(task_key) in self._kernel_ids
        }

    def _record_holds(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        """A kernel the search held for its speedup over the parent is held on its benchmark Evaluation row
        too, so the leaderboard and the problem pages do not rank it before a curator accepts it."""
        held = {
            str(p["sha"]): str(p.get("error_message") or "held for review by the run")
            for kind, p in events
            if kind == "candidate.evaluated" and p.get("held_for_review") and p.get("sha")
        }
        kernel_ids = {self._kernel_ids[sha]: reason for sha, reason in held.items() if sha in self._kernel_ids}
        for kernel_id, evaluation_id in self._evaluation_ids(list(kernel_ids)).items():
            review.hold_evaluation(evaluation_id, f"run {self.run_id}: {kernel_ids[kernel_id]}")

    def _update_run(self, state: dict[str, Any], checkpoint: dict[str, Any], inline: dict[str, str], now: Any) -> None:
        if inline:
            checkpoint["inline_kernels"] = inline
        totals = state["totals"]
        beam = state["beam"]
        best = _best(beam)
        start = state["evaluations"].get(state["start_sha"])
        fields: dict[str, Any] = {
            "checkpoint": checkpoint,
            "current_iteration": state["iteration"],
            "prompt_tokens": totals["prompt_tokens"],
            "completion_tokens": totals["completion_tokens"],
            "cost_usd": totals["cost_usd"],
            "unpriced_calls": totals.get("unpriced_calls", 0),
            "start_latency_ms": start.get("latency_ms") if start else None,
        }
        if best is not None:
            fields["best_kernel_id"] = self._kernel_ids.get(best["sha"])
            fields["best_latency_ms"] = best["latency_ms"]
            fields["best_peak_fraction"] = state["evaluations"].get(best["sha"], {}).get("peak_fraction")
        if state["status"] in (SUCCEEDED, FAILED, STOPPED):
            status = {SUCCEEDED: RunStatus.SUCCEEDED, FAILED: RunStatus.FAILED, STOPPED: RunStatus.STOPPED}
            fields.update(
                status=status[state["status"]],
                error_message=state.get("error", ""),
                stopped_by_budget=(state.get("stop") or {}).get("budget", ""),
                finished=now,
                claimed_by="",
            )
        Run.objects.filter(pk=self.run_id).update(**fields)


def _best(beam: list[dict[str, Any]]) -> dict[str, Any] | None:
    """`RunState.best` on the checkpoint's beam: the fastest correct member, or the first correct one when
    none is timed (a correctness-only run); a failing start kernel is never the best."""
    correct = [m for m in beam if m.get("correct", True)]
    return min(correct, key=lambda m: (m["latency_ms"] is None, m["latency_ms"] or 0.0), default=None)
