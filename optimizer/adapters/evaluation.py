"""`DjangoEvaluator`: the search's Evaluator for one run, over the benchmark app.

Kernels become `benchmark.Kernel` rows and are evaluated through `benchmark.services.request_evaluation`,
whose cache (kernel, platform, backend, version) is why a resumed run never evaluates a kernel twice: an
evaluation finished before a crash is simply found. A result held for review reaches the search as
suspicious (`reviewed`).

No evaluation is spent on a candidate that cannot win (engine.search.cascade): a kernel with a stored result,
its own or an identical source's (`benchmark.services.IdenticalSources`), is answered from it; where the run's
config says `mini_first`, the others are evaluated on the problem's mini case first (each a Kernel and an
Evaluation of that problem, cached like any other), and only those correct there at full size. Each result
says which stage answered it (`cascade_stage`); the search counts them. A step redone after a crash finds the
evaluations it finished before the crash stored, and so counts them as answered from the cache.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.db import close_old_connections

from benchmark import services as benchmark_services
from benchmark.models import Evaluation, EvaluationStatus, Kernel, KernelOrigin, Problem, Review
from engine.evaluator.identity import normalized_source_key
from engine.evaluator.result import ErrorKind
from engine.search import cascade
from optimizer.models import Run, RunEvent

CANCEL_CHECK_S = 1.0  # how often a step waiting on evaluations looks for a cancel request


class RunCancelled(BaseException):
    """The run was cancelled while a step waited on its evaluations; they were withdrawn from the executor.

    A BaseException, like asyncio.CancelledError: it is a stop signal, not a failure, so the search's
    `except Exception` (which fails the run) lets it through to the worker, which records the cancel.
    """


@dataclass(frozen=True)
class _Result:
    """A result the search sees in place of an Evaluation row: a source the benchmark app refused to store
    (too large, NUL bytes), reported like a static-check rejection so the search treats it as a failed
    kernel; or a result after review (`reviewed`)."""

    error_message: str | None
    correct: bool = False
    latency_ms: float | None = None
    peak_fraction: float | None = None
    error_kind: str | None = "rejected"
    profile: Any = None
    breakdown: Any = None  # the performance model's, kept so the Planner still sees where the time goes
    review_accepted: bool = False
    cascade_stage: str | None = None  # which stage of engine.search.cascade answered it


def reviewed(evaluation: Evaluation, stage: str | None = None) -> Evaluation | _Result:
    """Held or rejected: suspicious, whatever the pipeline said (kept out of the beam). Accepted: a plain
    correct result that the speedup-over-parent rule no longer holds (`review_accepted`). `stage`: which
    stage of the cascade answered it (engine.search.cascade), for the search's counts."""
    if not evaluation.review:
        evaluation.cascade_stage = stage
        return evaluation
    accepted = evaluation.review == Review.ACCEPTED
    return _Result(
        correct=bool(evaluation.correct),
        latency_ms=evaluation.latency_ms,
        peak_fraction=evaluation.peak_fraction,
        error_kind=None if accepted else "suspicious",
        error_message=None if accepted else f"{evaluation.get_review_display().lower()}: {evaluation.held_reason}",
        profile=evaluation.profile,
        breakdown=evaluation.breakdown,
        review_accepted=accepted,
        cascade_stage=stage,
    )


class DjangoEvaluator:
    """`evaluate_many` for one run: its problem, platform and backend.

    After a crash takeover, an evaluation still pending from before the takeover is restarted at once
    instead of after ACCELOPT_EVALUATION_STALE_AFTER_S: the dead worker started it, and its result
    would have been saved by a callback in the dead process, so it will never finish.
    """

    def __init__(
        self,
        run: Run,
        *,
        poll_interval_s: float = 0.2,
        timeout_s: float = 3600.0,
    ) -> None:
        self.run_id = run.pk
        self.problem = run.problem
        self.platform = run.platform
        self.backend = run.backend
        self.start_kernel_id = run.start_kernel_id
        self._start_kernel: Kernel | None = None  # loaded in the worker thread, once
        self.poll_interval_s = poll_interval_s
        self.timeout_s = timeout_s
        self._abandoned_before: datetime | None = None
        # Check candidates on the mini shapes first: the run's recorded choice (create_run resolves it).
        self.mini_first = bool((run.config or {}).get("search", {}).get("mini_first", False))
        self._mini_problem: Problem | None = None
        self._twins = benchmark_services.IdenticalSources(run.problem)
        self._takeover_known = False

    async def evaluate_many(self, sources: Sequence[str]) -> Sequence[Any]:
        # Not thread_sensitive: the wait must not block the one thread the web requests' ORM calls share.
        return await sync_to_async(self._evaluate_many, thread_sensitive=False)(list(sources))

    def abandoned_before(self) -> datetime | None:
        """When this run was last taken over from a dead worker (None if never). A pending evaluation
        started before then was the dead worker's, or (rarely) a live process's that shares the kernel:
        that one is then run twice, which costs time but saves the same result."""
        if not self._takeover_known:
            self._abandoned_before = (
                RunEvent.objects.filter(run_id=self.run_id, kind="run.resumed_after_crash")
                .order_by("-seq").values_list("created", flat=True).first()
            )
            self._takeover_known = True
        return self._abandoned_before

    def request(self, kernel: Kernel) -> Evaluation:
        return benchmark_services.request_evaluation(
            kernel, self.platform, self.backend, abandoned_before=self.abandoned_before()
        )

    def start_kernel(self) -> Kernel:
        """What every candidate rewrites: a Triton candidate keeps its entry point and other solution files."""
        if self._start_kernel is None:
            self._start_kernel = Kernel.objects.get(pk=self.start_kernel_id)
        return self._start_kernel

    def _evaluate_many(self, sources: list[str]) -> list[Any]:
        try:
            results: list[Any] = [None] * len(sources)
            kernels: dict[int, Kernel] = {}
            for index, source in enumerate(sources):
                try:
                    kernels[index], _ = benchmark_services.create_kernel(
                        self.problem, source, origin=KernelOrigin.GENERATED, run_id=self.run_id,
                        rewrite_of=self.start_kernel(),
                    )
                except ValidationError as error:
                    results[index] = _Result(" ".join(error.messages))
            # A source identical to an earlier one of the batch waits for it: its result then answers it.
            first: dict[int, Kernel] = {}
            later: dict[int, Kernel] = {}
            seen: set[str] = set()
            for index, kernel in kernels.items():
                key = normalized_source_key(kernel.source) or kernel.sha256
                (later if key in seen else first)[index] = kernel
                seen.add(key)
            for group in (first, later):
                results_of = self._evaluate_group(group)
                for index, result in results_of.items():
                    results[index] = result
            return results
        finally:
            close_old_connections()

    def _evaluate_group(self, kernels: dict[int, Kernel]) -> dict[int, Any]:
        """Each kernel's result: a stored one (its own, or an identical source's), else the mini stage where
        the run has it, else (or then, for the correct ones) a full-size evaluation."""
        results: dict[int, Any] = {}
        todo: dict[int, Kernel] = {}
        for index, kernel in kernels.items():
            answer = self._stored_answer(kernel)
            if answer is not None:
                results[index] = answer
            else:
                todo[index] = kernel
        passed: set[int] = set()
        mini = self.mini_problem()
        # The starting kernel is no candidate: it is what the run measures against, at full size.
        candidates = {i: k for i, k in todo.items() if k.pk != self.start_kernel_id}
        if mini is not None and candidates:
            for index, evaluation in self._wait({i: self._request_mini(mini, k) for i, k in candidates.items()}).items():
                if cascade.stops_at_mini(evaluation.correct, evaluation.error_kind):
                    del todo[index]
                    results[index] = _Result(
                        cascade.stopped_at_mini_message(evaluation.error_kind, evaluation.error_message),
                        error_kind=evaluation.error_kind or "incorrect", cascade_stage=cascade.MINI_STOPPED)
                elif evaluation.correct:
                    passed.add(index)
        for index, evaluation in self._wait({i: self.request(k) for i, k in todo.items()}).items():
            results[index] = reviewed(evaluation, cascade.MINI_PASSED if index in passed else None)
        return results

    def mini_problem(self) -> Problem | None:
        """The problem's mini shapes when this run checks candidates there first (its config says so)."""
        if not self.mini_first:
            return None
        if self._mini_problem is None:
            self._mini_problem = benchmark_services.mini_sibling(self.problem)
            if self._mini_problem is None:  # the mini case was removed since the run was launched
                self.mini_first = False
        return self._mini_problem

    def _request_mini(self, mini: Problem, kernel: Kernel) -> Evaluation:
        mini_kernel, _ = benchmark_services.create_kernel(
            mini, kernel.source, origin=KernelOrigin.GENERATED, run_id=self.run_id)
        return self.request(mini_kernel)

    def _stored_answer(self, kernel: Kernel) -> Any:
        """The kernel's finished full-size result if one is stored, or one copied from a kernel with an
        identical source (`engine.search.cascade`); None when it must be evaluated."""
        version = benchmark_services.backend_version(self.backend)
        own = Evaluation.objects.filter(kernel=kernel, platform=self.platform, backend=self.backend,
                                        backend_version=version, status=EvaluationStatus.DONE).first()
        if own is not None and benchmark_services.finished_result(own):
            return reviewed(own, cascade.CACHED)
        twin = self._twins.answer_for(kernel, self.platform, self.backend, version)
        if twin is None:
            return None
        return reviewed(benchmark_services.copy_evaluation(twin, kernel), cascade.NORMALIZED)

    def _wait(self, pending: dict[int, Evaluation]) -> dict[int, Evaluation]:
        """Wait until every evaluation is done. An infrastructure error is returned as it is: the search
        retries it (a new request runs it again), so it is never taken for the kernel's fault."""
        deadline = time.monotonic() + self.timeout_s
        cancel_checked = time.monotonic()
        done: dict[int, Evaluation] = {}
        while pending:
            benchmark_services.wait_for_evaluations(pending.values(), timeout=self.poll_interval_s)
            if time.monotonic() - cancel_checked >= CANCEL_CHECK_S:
                cancel_checked = time.monotonic()
                self._stop_if_cancelled(pending)
            for index, evaluation in list(pending.items()):
                evaluation.refresh_from_db()
                if evaluation.status == EvaluationStatus.DONE:
                    done[index] = pending.pop(index)
                    if evaluation.error_kind == ErrorKind.INFRASTRUCTURE_ERROR:
                        # Cancelling a campaign stores its runs' evaluations as cancelled (infrastructure
                        # errors): stop now rather than hand them to the search, which would run them again.
                        self._stop_if_cancelled(pending)
            if not pending:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(pending)} evaluations still pending after {self.timeout_s:.0f} s")
            # Pending rows run elsewhere (another process, or a pool thread): ask again, which also
            # restarts an evaluation whose runner died (the benchmark app's stale rule).
            time.sleep(self.poll_interval_s)
            for index, evaluation in list(pending.items()):
                pending[index] = self.request(evaluation.kernel)
        return done

    def _stop_if_cancelled(self, pending: dict[int, Evaluation]) -> None:
        """A cancelled run's evaluations stop now, not when they would have finished: withdrawn from the
        executor (a running one's sandbox is killed, or its Ray task) and stored as cancelled, an
        infrastructure error (never the kernel's fault; run again by whoever asks next)."""
        if Run.objects.filter(pk=self.run_id, cancel_requested=True).exists():
            benchmark_services.cancel_pending_evaluations(pending.values(), f"run {self.run_id} was cancelled")
            raise RunCancelled(f"run {self.run_id} was cancelled while {len(pending)} evaluations were pending")
