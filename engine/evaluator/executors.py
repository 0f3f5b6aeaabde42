"""Executors: where evaluations run. One interface, two implementations:

* `LocalExecutor` (the embedded default): every evaluation already runs in its own sandboxed children, so
  it is a thread pool whose threads only drive children (they wait on pipes, not on the GIL). Cancelling
  a running evaluation's future kills its children (`LocalFuture`), so its thread is free within moments.
* `RayExecutor` (`engine.evaluator.ray_executor`, the `scale` extra): each evaluation is a Ray task
  with declared resources; the task calls the same `EvaluationRequest.run()`, so the sandbox, the checks
  and the typed result are exactly the local ones.

`benchmark.services.get_executor` picks one from the settings (ACCELOPT_RAY_ADDRESS set or not); Ray is
imported only then.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from engine.evaluator.result import EvaluationResult
from engine.evaluator.sandbox.process import Cancellation, Limits
from engine.platforms.registry import DEFAULT_BACKEND, DEFAULT_PLATFORM, get_definition, load_part

BusyReporter = Callable[[str, float], contextlib.AbstractContextManager[None]]


def _no_report(what: str, allowance_s: float) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


_report_busy: BusyReporter = _no_report


def report_busy_with(reporter: BusyReporter | None) -> None:
    """What a pool thread enters while it holds an evaluation: (what it is, how long it may last). The
    server's watchdog installs its own (accelopt_site/watchdog.py), so a worker that never lets go is
    logged; the engine itself knows no watchdog. None: report nothing."""
    global _report_busy
    _report_busy = reporter or _no_report


def source_digest(source: str) -> str:
    """SHA-256 of a source text, as `Kernel.sha256` stores it."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def evaluation_key(kernel_sha256: str, reference_sha256: str, platform: str, backend: str) -> str:
    """Kernel and reference digests, platform and backend: what makes an evaluation row unique for a stored
    problem (apart from the backend version), so the queue page can match a cluster's task to its row."""
    return f"{kernel_sha256[:16]}:{reference_sha256[:8]}:{platform}:{backend}"


def evaluate(kernel_source: str, reference_source: str, *, platform: str = DEFAULT_PLATFORM,
             **options: Any) -> EvaluationResult:
    """Evaluate a kernel source against a reference file on `platform`, by the `evaluate` part its kernel
    language registers (the shared `engine.evaluator.reference_pipeline.evaluate`, whose keyword options it takes:
    backend, peak_counts, seeds, kernel_name, limits, tolerance, distributions). ValueError for an unknown
    platform or a language whose problems are not reference files (Triton's: `TritonEvaluationRequest`)."""
    language = get_definition(platform).language
    return load_part(language, "evaluate")(kernel_source, reference_source, platform=platform, **options)


@dataclass(frozen=True)
class EvaluationRequest:
    """Everything `evaluate()` takes, as one picklable value (Ray ships it to a worker as is): a kernel of a
    platform whose problems are reference files."""

    kernel_source: str
    reference_source: str
    platform: str = DEFAULT_PLATFORM
    backend: str = DEFAULT_BACKEND
    peak_counts: Mapping[str, float] | Sequence[float] | None = None
    seeds: Sequence[int] | None = None
    kernel_name: str | None = None
    limits: Limits = field(default_factory=Limits)
    tolerance: float | None = None
    distributions: Sequence[str] | None = None

    @property
    def key(self) -> str:
        """Names the evaluation across processes (the Ray queue board): see `evaluation_key`."""
        return evaluation_key(source_digest(self.kernel_source), source_digest(self.reference_source),
                              self.platform, self.backend)

    def run(self) -> EvaluationResult:
        return evaluate(
            self.kernel_source, self.reference_source, platform=self.platform, backend=self.backend,
            peak_counts=self.peak_counts, seeds=self.seeds, kernel_name=self.kernel_name, limits=self.limits,
            tolerance=self.tolerance, distributions=self.distributions,
        )


class Executor:
    """submit() returns a Future of an EvaluationResult; the future never fails for a kernel's sake.

    `future.cancel()` withdraws an evaluation until its result is in: one still queued never starts, one
    already running is stopped (Ray kills the task's worker; locally its sandbox children are killed).
    """

    kind = "abstract"

    def submit(self, request: EvaluationRequest) -> Future[EvaluationResult]:
        raise NotImplementedError

    def map(self, requests: Iterable[EvaluationRequest]) -> Iterator[EvaluationResult]:
        """Results in request order."""
        futures = [self.submit(r) for r in requests]
        for future in futures:
            yield future.result()

    def shutdown(self, wait: bool = True) -> None:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """What /healthz says about this executor (JSON-able)."""
        return {"kind": self.kind}

    def cuda_unavailable(self) -> str | None:
        """Why a cuda evaluation cannot run where this executor runs evaluations (None: it can). Here: this
        host's GPUs; `RayExecutor` answers for its cluster."""
        return local_cuda_unavailable()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


def local_cuda_unavailable() -> str | None:
    """Why this host cannot run a cuda evaluation: it has no NVIDIA GPU's device nodes."""
    if not glob.glob("/dev/nvidia[0-9]*"):
        return "this host has no NVIDIA GPU (/dev/nvidia*)"
    return None


class LocalExecutor(Executor):
    kind = "local"

    def __init__(self, max_workers: int = 2) -> None:
        if max_workers < 1:
            raise ValueError(f"LocalExecutor needs at least 1 worker, got {max_workers}")
        self.max_workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="accelopt-eval")
        self._live: weakref.WeakSet[LocalFuture] = weakref.WeakSet()
        # At exit, before concurrent.futures joins the pool's threads (which would first run everything still
        # queued: a SIGTERM'd server then lived on for as long as its queue took), stop what runs and drop the
        # rest. concurrent.futures registers its own join through this same hook; ours, later, runs first.
        threading._register_atexit(_stop_at_exit, weakref.ref(self))

    def submit(self, request: EvaluationRequest) -> Future[EvaluationResult]:
        future = LocalFuture()
        self._live.add(future)

        def work() -> None:
            if future.done():  # withdrawn while it waited for a thread
                return
            future.started()
            try:
                with future.cancellation.active(), _report_busy(_describe(request), _allowance_s(request)):
                    result = request.run()
            except BaseException as error:  # as ThreadPoolExecutor's own work items do
                _settle(future, error=error)
            else:
                _settle(future, result)

        slot = self._pool.submit(work)
        # A pool shut down with cancel_futures drops work that never started: its future reads cancelled.
        slot.add_done_callback(lambda slot: future.cancel() if slot.cancelled() else None)
        return future

    def shutdown(self, wait: bool = True) -> None:
        """wait: finish everything submitted. Otherwise cancel it all, killing the running evaluations'
        sandbox children, so the pool's threads end within moments."""
        if not wait:
            for future in list(self._live):
                future.cancel()
        self._pool.shutdown(wait=wait, cancel_futures=not wait)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "workers": self.max_workers}


def _stop_at_exit(executor: weakref.ref[LocalExecutor]) -> None:
    if (alive := executor()) is not None:
        alive.shutdown(wait=False)


def _describe(request: Any) -> str:
    return f"evaluating {getattr(request, 'kernel_name', None) or 'a kernel'} on {request.platform}/{request.backend}"


def _allowance_s(request: Any) -> float:
    """How long an evaluation may hold a worker under its own limits: its children run side by side, each
    ended at wall_seconds, and an attempt may be repeated infrastructure_retries times. Longer is a stall."""
    limits = getattr(request, "limits", None)
    if limits is None:
        return 0.0
    return limits.wall_seconds * (limits.infrastructure_retries + 1)


class LocalFuture(Future):
    """A local evaluation's future, never marked running, so cancel() works until the result is in (like
    `RayFuture`): its callbacks see a cancelled future at once, and the sandbox children the evaluation
    started are killed, so the pool's thread finishes within moments instead of running the kernel to its end."""

    def __init__(self) -> None:
        super().__init__()
        self.cancellation = Cancellation()
        self._start_callbacks: list[Callable[[], None]] = []
        self._has_started = False

    def add_start_callback(self, callback: Callable[[], None]) -> None:
        """Call `callback` (in the pool's thread) when a thread takes the evaluation, at once if one has: until
        then it waits in the pool's queue, which is what the queue pages show."""
        with self._condition:
            if not self._has_started:
                self._start_callbacks.append(callback)
                return
        callback()

    def started(self) -> None:
        with self._condition:
            self._has_started = True
            callbacks, self._start_callbacks = self._start_callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a bookkeeping failure must not stop the evaluation
                logging.getLogger(__name__).exception("evaluation start callback failed")

    def cancel(self) -> bool:
        if not Future.cancel(self):
            return False
        self.cancellation.cancel()
        return True


def _settle(future: Future, result: EvaluationResult | None = None, *, error: BaseException | None = None) -> None:
    try:
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
    except InvalidStateError:  # cancelled meanwhile: the result is no longer wanted
        pass
