"""The evaluation lifecycle: the cache of (kernel, platform, backend, version) rows, the executor that runs
them in the background, saving a result onto its row, and evaluating a source without storing anything.

An evaluation's life: `request_evaluation` gets or creates the row. A finished row is returned as is,
except an infrastructure error (ours), which runs again. Otherwise the row is marked queued (`queued`: its place
in line, `benchmark.services.queue`) and, once the transaction commits, handed to the process-wide executor,
which marks it running when a worker takes it; the future's callback saves the result
(`save_result`). Tests and `wait=True` callers run it in the calling thread instead (`run_evaluation_now`);
the kernel still runs in the sandbox's child processes either way.

`engine.evaluator` loads its modules on first use, so numpy and the pipeline are imported with the
first evaluation, not when a web process starts. Long because requesting, saving and cancelling share one
registry of the futures in flight (`_in_flight`); split, each part would reach into another's state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import CancelledError, Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db import close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone

from benchmark import conf
from benchmark.models import Evaluation, EvaluationStatus, Kernel, Problem
from benchmark.services.queue import PENDING, check_evaluation_quota
from benchmark.services.solutions import solution_document
from engine import evaluator as pipeline
from engine.evaluator.executors import local_cuda_unavailable
from engine.evaluator.result import ErrorKind
from engine.platforms.registry import (
    BACKENDS,
    DEFAULT_PLATFORM,
    FLASHINFER_FORMAT,
    TESTING,
    Backend,
    Platform,
    get_definition,
    load_part,
    load_reference,
)

if TYPE_CHECKING:
    from engine.evaluator import EvaluationResult, Limits

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# What an evaluation runs with


def backend_version(backend: str) -> str:
    """The version an evaluation is cached under: for the simulator, simulator + performance-model versions."""
    try:
        return pipeline.get_backend(backend).version()
    except ValueError as error:
        raise ValidationError(str(error)) from None


def limits_for(problem: Problem) -> Limits:
    """Sandbox limits by the problem's size, the bytes its inputs and outputs move (`Problem.hbm_bytes`):
    seconds and a few GiB for the mini shapes, more for the full ones."""
    return _limits(_is_large(problem.hbm_bytes))


def reference_limits(reference_source: str) -> Limits:
    """Sandbox limits for a reference file of no stored problem, by its measured size (`reference_size`)."""
    return _limits(_is_large(reference_size(reference_source)))


def reference_size(reference_source: str) -> int | None:
    """The bytes a reference's inputs and outputs take, measured by running it once in the sandbox (about a
    second for a full-size NKIBench reference); None if it could not run there.

    It runs with the large memory limit, so a full-size reference fits, and the small time limit, so an
    upload waits seconds, not the large limit's half hour. A reference that cannot finish in them is
    unknown, and so evaluated with the large limits.
    """
    limits = pipeline.Limits(wall_seconds=float(conf.timeout_seconds(False)), cpu_seconds=conf.timeout_seconds(False),
                             memory_bytes=conf.memory_bytes(True))
    return pipeline.reference_io_bytes(reference_source, limits)


def _is_large(io_bytes: int | None) -> bool:
    # Unknown (a reference that could not be measured, a problem stored without counts): the large limits
    # fail no honest kernel for want of memory or time, where the small ones would fail a full-size one.
    return io_bytes is None or io_bytes > conf.LARGE_PROBLEM_HBM_BYTES


def _limits(large: bool) -> Limits:
    seconds = conf.timeout_seconds(large)
    return pipeline.Limits(wall_seconds=float(seconds), cpu_seconds=seconds, memory_bytes=conf.memory_bytes(large))


def request_for(evaluation: Evaluation) -> Any:
    """What the executor runs for this evaluation, by how its platform's problems are stored (the registry's
    `problem_format`): a FlashInfer-Bench definition's request, or the reference pipeline's."""
    if get_definition(evaluation.platform).problem_format == FLASHINFER_FORMAT:
        return flashinfer_request_for(evaluation.kernel, evaluation.platform, evaluation.backend)
    return pipeline.EvaluationRequest(**evaluation_request_for(evaluation))


def flashinfer_request_for(kernel: Kernel, platform: str, backend: str, seeds: Sequence[int] | None = None) -> Any:
    """The evaluation of a kernel of a problem stored as a FlashInfer-Bench definition: its solution against the
    definition and workloads, as the request class the platform's language registers (`flashinfer_request`:
    Triton's is `engine.platforms.triton.request.TritonEvaluationRequest`, which picks the workloads a backend
    runs)."""
    problem = kernel.problem
    request = load_part(get_definition(platform).language, "flashinfer_request")
    return request(
        solution=solution_document(kernel), definition=problem.definition, workloads=tuple(problem.workloads),
        platform=platform, backend=backend, seeds=list(seeds) if seeds is not None else None,
        limits=limits_for(problem),
    )


def evaluation_request_for(evaluation: Evaluation) -> dict[str, Any]:
    """The keyword arguments of `engine.evaluator.evaluate` for this evaluation."""
    kernel, problem = evaluation.kernel, evaluation.kernel.problem
    return _evaluate_kwargs(
        kernel.source,
        problem.reference_source,
        platform=evaluation.platform,
        backend=evaluation.backend,
        peak_counts=problem.peak_counts,
        tolerance=problem.tolerance,
        limits=limits_for(problem),
    )


def _evaluate_kwargs(
    kernel_source: str,
    reference_source: str,
    *,
    platform: str,
    backend: str,
    peak_counts: tuple[int, int, int] | None,
    tolerance: float | None,
    limits: Limits | None = None,
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "kernel_source": kernel_source,
        "reference_source": reference_source,
        "platform": platform,
        "backend": backend,
        "peak_counts": peak_counts,
        "tolerance": tolerance,
    }
    if limits is not None:
        kwargs["limits"] = limits
    return kwargs


# --------------------------------------------------------------------------------------------------
# The executor, and the evaluations this process has handed to it


@dataclass
class _InFlight:
    """Evaluations this process has handed to the executor and not yet saved."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    futures: dict[int, Future] = field(default_factory=dict)


_in_flight = _InFlight()
_executor_lock = threading.Lock()
_executor: Any = None


def get_executor() -> Any:
    """The process-wide evaluation executor: the local pool, or Ray when ACCELOPT_RAY_ADDRESS is set."""
    global _executor
    with _executor_lock:
        if _executor is None and conf.ray_address():
            # Ray (the `scale` extra) is imported only when a cluster is configured
            from engine.evaluator.ray_executor import RayExecutor

            _executor = RayExecutor(conf.ray_address(), resources=conf.ray_resources(),
                                    max_retries=conf.ray_max_retries())
        elif _executor is None:
            _executor = pipeline.LocalExecutor(max_workers=conf.evaluation_workers())
        return _executor


def set_executor(executor: Any) -> Any:
    """Swap the executor (a Ray executor, or a test double); returns the previous one."""
    global _executor
    with _executor_lock:
        previous, _executor = _executor, executor
    return previous


# --------------------------------------------------------------------------------------------------
# Requesting, running and saving


def request_evaluation(
    kernel: Kernel,
    platform: str = DEFAULT_PLATFORM,
    backend: str | None = None,
    *,
    user: Any = None,
    wait: bool = False,
    abandoned_before: datetime | None = None,
) -> Evaluation:
    """Return the cached evaluation for (kernel, platform, backend, version), or start one.

    Without a backend, the platform's default one. A finished evaluation is returned as it is, except an
    infrastructure error (our fault), which is run again. A pending one is returned as it is while this
    process is running it; one left pending by a process that died is started again once it is older than
    ACCELOPT_EVALUATION_STALE_AFTER_S, or at once if it started before `abandoned_before` (a caller that
    knows the process which started it died: the run worker that took over a crashed worker's run).
    """
    backend = _check_platform_and_backend(platform, backend)
    check_platform_for(kernel.problem, platform)
    version = backend_version(backend)
    unavailable = backend_unavailable(backend, platform)
    if unavailable:
        # A stored result still answers; a new one cannot run here, so nothing is queued to fail later.
        cached = Evaluation.objects.filter(kernel=kernel, platform=platform, backend=backend, backend_version=version,
                                           status=EvaluationStatus.DONE).first()
        if cached is None or _needs_run(cached):
            raise ValidationError(unavailable)
        return cached
    evaluation, created = Evaluation.objects.get_or_create(
        kernel=kernel,
        platform=platform,
        backend=backend,
        backend_version=version,
        defaults={"requested_by": user if user is not None and user.is_authenticated else None},
    )
    if not created and not _needs_run(evaluation, abandoned_before):
        if wait:
            wait_for_evaluations([evaluation])
            evaluation.refresh_from_db()
        return evaluation
    try:
        # Only a person's request counts (a run's evaluations are bounded by the runs quota), and only one
        # that queues work: a cached result above never does.
        check_evaluation_quota(user, exclude=evaluation.pk)
    except ValidationError:
        if created:
            evaluation.delete()
        raise
    if not created:
        _reset(evaluation)
    if wait or conf.evaluations_inline():
        return run_evaluation_now(evaluation)
    _submit(evaluation)
    return evaluation


def _check_platform_and_backend(platform: str, backend: str | None) -> str:
    """The backend to use (the platform's default when None); ValidationError for what cannot be evaluated."""
    if platform not in Platform.values:
        raise ValidationError(f"unknown platform {platform!r}; expected one of {', '.join(Platform.values)}")
    definition = get_definition(platform)
    if backend is None:
        backend = definition.default_backend
    if backend not in Backend.values:
        raise ValidationError(f"unknown backend {backend!r}; expected one of {', '.join(Backend.values)}")
    if backend not in definition.backends:
        supported = ", ".join(definition.backends)
        raise ValidationError(f"backend {backend!r} does not evaluate {platform} kernels; expected one of {supported}")
    return backend


def backend_unavailable(backend: str, platform: str) -> str | None:
    """Why `backend` cannot evaluate `platform` kernels on this server (None: it can), from what its registry
    definition says it needs: Python packages (asked here unless a Ray cluster runs the evaluations), an NVIDIA
    GPU where evaluations run (this host's device nodes with the local executor, a node declaring Ray `GPU`
    resources on a cluster), its own checks of this host (the neuron backend: device, compiler, profiler).
    Pages show it disabled with this reason, and requests are refused with it."""
    definition = BACKENDS.get(backend)
    if definition is None:
        return None
    if definition.packages and not conf.ray_address():
        # Refused with the install command before anything is queued; on a Ray cluster the node that runs the
        # evaluation decides (the evaluation says so there).
        missing = load_reference(definition.packages)()
        if missing:
            return missing
    if definition.needs_gpu:
        return _gpu_unavailable(backend)
    if definition.host_check:
        return load_reference(definition.host_check)(platform)
    return None


def platform_unavailable(platform: str) -> str | None:
    """Why no backend can evaluate `platform` kernels here (None: at least one can), in the words of its default
    backend's refusal. The forms show such a platform disabled with this reason."""
    definition = get_definition(platform)
    reasons = {b: backend_unavailable(b, platform) for b in definition.backends if b.definition.latency != TESTING}
    if not reasons or not all(reasons.values()):
        return None
    return reasons.get(definition.default_backend) or next(iter(reasons.values()))


@dataclass(frozen=True)
class BackendOption:
    """A backend a kernel page offers for evaluating a problem's kernels."""

    value: str
    label: str
    default: bool  # the problem's default platform's default backend: chosen unless the user picks another
    unavailable: str | None  # why it cannot run on this server (`backend_unavailable`); None: it can


def backend_options(problem: Problem) -> list[BackendOption]:
    """The backends of the problem's platforms (pipeline-test ones left out), each with why it cannot run here,
    judged on the problem's default platform."""
    platform, default = problem.default_platform, problem.default_backend
    return [
        BackendOption(backend.value, backend.definition.label, backend == default,
                      backend_unavailable(backend.value, platform))
        for backend in problem.backends if backend.definition.latency != TESTING
    ]


def _gpu_unavailable(backend: str) -> str | None:
    try:
        executor = get_executor()
    except Exception as error:  # noqa: BLE001 - e.g. the Ray cluster cannot be reached: say so, refuse
        return f"the {backend} backend cannot run: the Ray cluster at {conf.ray_address()} cannot be reached ({error})"

    ask = getattr(executor, "cuda_unavailable", None)  # a test double may not say: then this host decides
    reason = ask() if ask is not None else local_cuda_unavailable()
    if reason is None:
        return None
    where = "on the cluster" if getattr(executor, "kind", "local") == "ray" else "here"
    return f"the {backend} backend cannot run {where}: {reason}"


def check_platform_for(problem: Problem, platform: str) -> None:
    """ValidationError unless `platform` runs the problem's kernel language (an NKI problem on trn1/trn2, a
    Triton one on a GPU), naming the platforms that do."""
    try:
        language = get_definition(platform).language
    except ValueError as error:
        raise ValidationError(str(error)) from None
    if language != problem.language:
        fitting = ", ".join(problem.platforms) or "none"
        raise ValidationError(
            f"problem {problem.address} is a {problem.language} problem and {platform} runs {language} kernels; "
            f"choose one of its platforms: {fitting}"
        )


def _needs_run(evaluation: Evaluation, abandoned_before: datetime | None = None) -> bool:
    if evaluation.status == EvaluationStatus.DONE:
        # A result against an older reference or other parameters is no result for the problem as it is now.
        return evaluation.error_kind == ErrorKind.INFRASTRUCTURE_ERROR or evaluation.is_stale
    with _in_flight.lock:
        if evaluation.pk in _in_flight.futures:
            return False
    since = evaluation.started or evaluation.queued or evaluation.created
    if since is None or (abandoned_before is not None and since < abandoned_before):
        return True
    return timezone.now() - since > timedelta(seconds=conf.stale_after_seconds())


def finished_result(evaluation: Evaluation) -> bool:
    """A finished result that answers for its kernel now: not ours to retry (an infrastructure error), not
    measured against another reference than the problem's current one."""
    return evaluation.status == EvaluationStatus.DONE and not _needs_run(evaluation)


def _reset(evaluation: Evaluation) -> None:
    evaluation.status = EvaluationStatus.QUEUED
    evaluation.started = None
    evaluation.finished = None
    evaluation.save(update_fields=["status", "started", "finished"])


def run_evaluation_now(evaluation: Evaluation) -> Evaluation:
    """Run one evaluation in the calling thread (the sandbox is still a child process) and save it."""
    _mark_running(evaluation)
    try:
        if get_definition(evaluation.platform).problem_format == FLASHINFER_FORMAT:
            result = flashinfer_request_for(evaluation.kernel, evaluation.platform, evaluation.backend).run()
        else:  # through engine.evaluator.evaluate, which tests stand in for
            result = pipeline.evaluate(**evaluation_request_for(evaluation))
    except Exception as exc:  # our own pipeline failed: record it as ours, to be retried
        logger.exception("evaluation %s failed inside the pipeline", evaluation.pk)
        result = _infrastructure_failure(exc)
    return save_result(evaluation.pk, result) or evaluation


def _mark_running(evaluation: Evaluation) -> None:
    evaluation.status = EvaluationStatus.RUNNING
    evaluation.started = timezone.now()
    evaluation.attempts += 1
    # The reference this run is measured against: evaluation_request_for reads the same problem row.
    evaluation.reference_digest = evaluation.kernel.problem.reference_digest
    evaluation.save(update_fields=["status", "started", "attempts", "reference_digest"])


def _mark_queued(evaluation: Evaluation) -> None:
    """Handed to the executor: queued (its place in line: `queued`) until a worker starts it (`_mark_started`)."""
    evaluation.status = EvaluationStatus.QUEUED
    evaluation.queued = timezone.now()
    evaluation.started = None
    evaluation.attempts += 1
    evaluation.reference_digest = evaluation.kernel.problem.reference_digest
    evaluation.save(update_fields=["status", "queued", "started", "attempts", "reference_digest"])


def _mark_started(evaluation_id: int) -> None:
    """The executor started the evaluation: running from now."""
    try:
        Evaluation.objects.filter(pk=evaluation_id, status=EvaluationStatus.QUEUED).update(
            status=EvaluationStatus.RUNNING, started=timezone.now())
    except Exception:  # the page shows it queued a while longer; the result is saved all the same
        logger.exception("evaluation %s: could not mark it running", evaluation_id)


def _started_in_worker(evaluation_id: int) -> None:
    """A pool thread took the evaluation. It then waits minutes on the sandbox: give back its connection."""
    try:
        _mark_started(evaluation_id)
    finally:
        close_old_connections()


def _submit(evaluation: Evaluation) -> None:
    executor = get_executor()
    request = request_for(evaluation)
    _mark_queued(evaluation)
    evaluation_id = evaluation.pk

    def submit() -> None:
        future = executor.submit(request)
        with _in_flight.lock:
            _in_flight.futures[evaluation_id] = future
        when_started = getattr(future, "add_start_callback", None)
        if when_started is not None:  # the local pool says when a thread takes it
            when_started(lambda: _started_in_worker(evaluation_id))
        else:  # Ray (its queue board says where it waits) and plain futures: running from the hand-over
            _mark_started(evaluation_id)
            evaluation.status, evaluation.started = EvaluationStatus.RUNNING, timezone.now()
        future.add_done_callback(lambda done: _save_future(evaluation_id, done))

    # The callback saves from another thread: it must find the committed row, not a pending transaction.
    transaction.on_commit(submit)


def _save_future(evaluation_id: int, future: Future) -> None:
    """Future callback (an executor thread): save the result, or record the failure as ours."""
    try:
        try:
            result = future.result()
        except CancelledError as withdrawn:
            # Withdrawn: by cancel_pending_evaluations, which stores why itself (kept), or by the executor's
            # shutdown as the server stops. A cancellation either way, run again by whoever asks next.
            if not Evaluation.objects.filter(pk=evaluation_id, status__in=PENDING).exists():
                return
            result = {**_infrastructure_failure(withdrawn), "error_message": CANCELLED_PREFIX + SHUTDOWN_REASON}
        except Exception as exc:  # the worker died or the executor broke: not the kernel's fault
            logger.warning("evaluation %s: executor failed: %s", evaluation_id, exc)
            result = _infrastructure_failure(exc)
        save_result(evaluation_id, result)
    except Exception:
        logger.exception("evaluation %s: could not save the result", evaluation_id)
    finally:
        with _in_flight.lock:
            _in_flight.futures.pop(evaluation_id, None)
        close_old_connections()


def _infrastructure_failure(exc: BaseException) -> dict[str, Any]:
    return {
        "status": "done",
        "compiled": None,
        "runnable": None,
        "correct": None,
        "error_kind": ErrorKind.INFRASTRUCTURE_ERROR.value,
        "error_message": f"the evaluation service failed ({type(exc).__name__}: {exc}); "
        "this is not the kernel's fault and it will be retried",
    }


def save_result(evaluation_id: int, result: EvaluationResult | dict[str, Any]) -> Evaluation | None:
    """Copy an EvaluationResult (or its dict) onto the evaluation row; None if the row is gone.

    A suspicious result is held for a curator as it is stored (the queue and the decisions: benchmark.review).
    """
    data = result if isinstance(result, dict) else result.to_dict()
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().filter(pk=evaluation_id).first()
        if evaluation is None:  # the kernel was deleted while it ran
            return None
        evaluation.status = EvaluationStatus.DONE
        evaluation.compiled = data.get("compiled")
        evaluation.runnable = data.get("runnable")
        evaluation.correct = data.get("correct")
        evaluation.error_kind = data.get("error_kind") or ""
        evaluation.error_message = data.get("error_message") or ""
        evaluation.error_line = data.get("error_line")
        evaluation.correctness = {
            key: data.get(key)
            for key in ("relative_l2_errors", "output_errors", "tolerance", "distributions")
            if data.get(key) is not None
        }
        evaluation.seeds = list(data.get("seeds") or [])
        evaluation.latency_ms = data.get("latency_ms")
        evaluation.peak_fraction = data.get("peak_fraction")
        evaluation.profile = data.get("profile") or {}
        evaluation.timeline = data.get("timeline") or {}
        evaluation.provenance = {
            key: data.get(key)
            for key in ("backend", "backend_version", "perf_model_version", "platform", "project_version", "seeds")
            if data.get(key) is not None
        }
        evaluation.result = {key: value for key, value in data.items() if key not in ("timeline",)}
        evaluation.wall_time_s = data.get("wall_time_s")
        evaluation.finished = timezone.now()
        # A row a curator already decided on keeps the decision when it is stored again.
        if evaluation.error_kind == ErrorKind.SUSPICIOUS and not evaluation.review:
            evaluation.hold(evaluation.error_message)
        evaluation.save()
    return evaluation


def cancel_evaluations(evaluations: Iterable[Evaluation]) -> int:
    """Withdraw these evaluations from this process's executor: queued ones never start, running ones stop
    (Ray kills the task; the local pool kills its sandbox children). Returns how many were withdrawn; each
    is saved as an infrastructure error by its callback, so a later request runs it again."""
    with _in_flight.lock:
        futures = [_in_flight.futures[e.pk] for e in evaluations if e.pk in _in_flight.futures]
    return sum(1 for future in futures if future.cancel())


# How an evaluation stopped for good by `cancel_pending_evaluations` reads: an infrastructure error (so a later
# request runs it again) whose message starts so; the queue page lists the recent ones as cancelled.
CANCELLED_PREFIX = "cancelled: "
# The reason of an evaluation withdrawn by the executor itself: this process stopped while it was pending.
SHUTDOWN_REASON = "the server stopped before it finished"


def cancel_pending_evaluations(evaluations: Iterable[Evaluation], reason: str) -> list[int]:
    """Stop these evaluations now (a cancelled campaign's or run's): each still pending is withdrawn from this
    process's executor where it has it (`cancel_evaluations`) and stored at once as cancelled, an
    infrastructure error "cancelled: <reason>", so the queue page shows it cancelled instead of running until
    the stale rule (ACCELOPT_EVALUATION_STALE_AFTER_S). A result that still arrives (another process runs
    it, or it finished just then) replaces the cancellation. Returns the ids stored as cancelled."""
    pending = [e for e in evaluations if e.status in PENDING]
    if not pending:
        return []
    cancel_evaluations(pending)  # a withdrawn future's callback saves an infrastructure error: ours replaces it
    ids = [e.pk for e in pending]
    rows = Evaluation.objects.filter(pk__in=ids).filter(
        Q(status__in=[EvaluationStatus.QUEUED, EvaluationStatus.RUNNING]) | Q(error_kind=ErrorKind.INFRASTRUCTURE_ERROR))
    cancelled = list(rows.values_list("pk", flat=True))
    Evaluation.objects.filter(pk__in=cancelled).update(
        status=EvaluationStatus.DONE, error_kind=ErrorKind.INFRASTRUCTURE_ERROR, error_message=f"{CANCELLED_PREFIX}{reason}",
        finished=timezone.now())
    return cancelled


def wait_for_evaluations(evaluations: Iterable[Evaluation], timeout: float | None = None) -> None:
    """Block until this process's pending evaluations among these are saved, or `timeout` seconds pass.

    Returns early on timeout; the caller refreshes the rows to see which finished.
    """
    with _in_flight.lock:
        futures = [_in_flight.futures[e.pk] for e in evaluations if e.pk in _in_flight.futures]
    done, _ = wait_futures(futures, timeout=timeout)
    # The callback saves after its future completes; a done future has been saved once it leaves the registry.
    for future in done:
        while True:
            with _in_flight.lock:
                if all(pending is not future for pending in _in_flight.futures.values()):
                    break
            time.sleep(0.01)


def evaluation_is_stale(evaluation: Evaluation) -> bool:
    """Pending, not run by this process, and older than the stale limit: its worker is gone."""
    return evaluation.is_pending and _needs_run(evaluation)


# --------------------------------------------------------------------------------------------------
# Evaluating without storing


def evaluate_source(
    kernel_source: str,
    *,
    problem: Problem | None = None,
    reference_source: str | None = None,
    platform: str = DEFAULT_PLATFORM,
    backend: str | None = None,
    seeds: Sequence[int] | None = None,
) -> EvaluationResult:
    """Evaluate a kernel without storing anything (the `evaluate` command): an EvaluationResult.

    Without a backend, the platform's default one (an unknown platform is the pipeline's ValueError).

    `seeds` repeats an earlier evaluation's inputs (its recorded seeds); by default fresh ones are drawn.
    """
    if problem is None and reference_source is None:
        raise ValueError("evaluate_source needs a problem or a reference source")
    if problem is not None and get_definition(platform).problem_format == FLASHINFER_FORMAT:
        kernel = Kernel(problem=problem, source=kernel_source, sha256="0" * 64, entry_point="")
        return flashinfer_request_for(kernel, platform, backend or get_definition(platform).default_backend,
                                      seeds).run()
    kwargs = _evaluate_kwargs(
        kernel_source,
        problem.reference_source if problem is not None else reference_source,
        platform=platform,
        backend=backend if backend is not None else get_definition(platform).default_backend,
        peak_counts=problem.peak_counts if problem is not None else None,
        tolerance=problem.tolerance if problem is not None else None,
        limits=limits_for(problem) if problem is not None else reference_limits(reference_source),
    )
    if seeds is not None:
        kwargs["seeds"] = list(seeds)
    return pipeline.evaluate(**kwargs)
