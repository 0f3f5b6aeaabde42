"""What the benchmark app does: problems from suites, kernels, and cached, sandboxed evaluations.

Views, the ninja API and the management commands all call these functions; none of them does the work
itself. The evaluation runs through `benchmark.evaluation` (a sandboxed child process per kernel); in the
embedded mode a module-level local executor runs it in the background and a future callback saves the
result, so a web request never waits for a simulation.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import close_old_connections, transaction
from django.db.models import Prefetch, Q, QuerySet
from django.http import Http404
from django.utils import timezone
from django.utils.text import slugify

from accounts.roles import is_engineer
from benchmark import conf
from benchmark.models import (
    DEFAULT_CASE,
    DEFAULT_SUITE,
    Backend,
    ErrorKind,
    Evaluation,
    EvaluationStatus,
    Kernel,
    KernelOrigin,
    Platform,
    Problem,
    Visibility,
)

logger = logging.getLogger(__name__)

# Suites and imports whose problems are the user's own (a reference they uploaded) live here.
CUSTOM_SUITE = "custom"
IMPORTED_SUITE = "imported"


# --------------------------------------------------------------------------------------------------
# Roles and access


def can_create_kernels(user: Any) -> bool:
    """Engineers (and the roles above them) upload kernels; anonymous visitors only read."""
    return is_engineer(user)


def visible_problems(user: Any) -> QuerySet[Problem]:
    """Public problems, plus the private ones (uploaded references) the user owns."""
    problems = Problem.objects.all()
    if user is not None and user.is_authenticated:
        if user.is_superuser:
            return problems
        return problems.filter(Q(visibility=Visibility.PUBLIC) | Q(owner=user))
    return problems.filter(visibility=Visibility.PUBLIC)


def get_problem_for_user(user: Any, pk: int) -> Problem:
    try:
        return visible_problems(user).get(pk=pk)
    except Problem.DoesNotExist:
        raise Http404(f"no problem with id {pk}") from None


def visible_kernels(user: Any) -> QuerySet[Kernel]:
    return Kernel.objects.filter(problem__in=visible_problems(user))


def get_kernel_for_user(user: Any, pk: int, *, write: bool = False) -> Kernel:
    try:
        kernel = visible_kernels(user).select_related("problem", "author", "parent").get(pk=pk)
    except Kernel.DoesNotExist:
        raise Http404(f"no kernel with id {pk}") from None
    if write and not can_create_kernels(user):
        raise PermissionDenied("only engineers can upload kernels or request evaluations")
    return kernel


def get_evaluation_for_user(user: Any, pk: int) -> Evaluation:
    try:
        return (
            Evaluation.objects.select_related("kernel", "kernel__problem")
            .filter(kernel__problem__in=visible_problems(user))
            .get(pk=pk)
        )
    except Evaluation.DoesNotExist:
        raise Http404(f"no evaluation with id {pk}") from None


# --------------------------------------------------------------------------------------------------
# Problem addresses: [SUITE/]SLUG[:CASE]


def parse_problem_address(address: str) -> tuple[str, str, str]:
    """`silu` -> (nkibench, silu, mini); `silu:full`; `imported/silu:1`."""
    text = address.strip()
    if not text:
        raise ValueError("empty problem address; expected [SUITE/]SLUG[:CASE], e.g. silu:mini")
    suite, _, rest = text.rpartition("/")
    slug, _, case = rest.partition(":")
    if not slug:
        raise ValueError(f"problem address {address!r} has no slug; expected [SUITE/]SLUG[:CASE]")
    return suite or DEFAULT_SUITE, slug, case or DEFAULT_CASE


def get_problem_by_address(address: str, user: Any = None, *, require_visible: bool = True) -> Problem:
    suite, slug, case = parse_problem_address(address)
    problems = visible_problems(user) if require_visible else Problem.objects.all()
    try:
        return problems.get(suite=suite, slug=slug, case=case)
    except Problem.DoesNotExist:
        known = sorted(
            Problem.objects.filter(suite=suite, slug=slug).values_list("case", flat=True)
        )
        hint = f"; cases of {slug}: {', '.join(known)}" if known else ""
        if not Problem.objects.filter(suite=suite).exists():
            hint = f"; suite {suite!r} is not loaded (python manage.py load_suite {suite})"
        raise Http404(f"no problem {suite}/{slug}:{case}{hint}") from None


# --------------------------------------------------------------------------------------------------
# Kernels


def kernel_source_limit() -> int:
    """The static check's source-size limit; an upload over it is refused before it is stored."""
    from benchmark.evaluation.static_check import MAX_SOURCE_BYTES

    return MAX_SOURCE_BYTES


def source_sha256(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def create_kernel(
    problem: Problem,
    source: str,
    *,
    origin: str = KernelOrigin.UPLOADED,
    author: Any = None,
    parent: Kernel | None = None,
    run_id: int | None = None,
    name: str = "",
) -> tuple[Kernel, bool]:
    """Store a kernel for a problem, or return the existing one with the same source (created=False).

    The source is stored even if it does not parse: the evaluation is what tells the author what is wrong.
    """
    if not isinstance(source, str):
        raise ValidationError("the kernel source must be text")
    if "\x00" in source:
        raise ValidationError("the kernel source contains NUL bytes; upload a Python text file")
    size = len(source.encode("utf-8"))
    limit = kernel_source_limit()
    if size > limit:
        raise ValidationError(
            f"the kernel source is {size / 1024:.1f} KiB; the limit is {limit // 1024} KiB"
        )
    if not source.strip():
        raise ValidationError("the kernel source is empty")
    sha = source_sha256(source)
    kernel, created = Kernel.objects.get_or_create(
        problem=problem,
        sha256=sha,
        defaults={
            "source": source,
            "origin": origin,
            "author": author if author is not None and author.is_authenticated else None,
            "parent": parent,
            "run_id": run_id,
            "name": name[:200],
        },
    )
    return kernel, created


def create_custom_problem(user: Any, reference_source: str, *, name: str = "") -> Problem:
    """A private problem from a user's own reference file (NKIBench's reference format).

    No FLOP or byte counts are known for it, so its kernels get a latency but no peak fraction.
    """
    if not reference_source.strip():
        raise ValidationError("the reference file is empty")
    sha = source_sha256(reference_source)
    base = slugify(Path(name).stem if name else "") or "reference"
    problem, _ = Problem.objects.get_or_create(
        suite=CUSTOM_SUITE,
        slug=f"{base[:80]}-{sha[:8]}",
        case="custom",
        defaults={
            "title": Path(name).stem if name else "Uploaded reference",
            "reference_source": reference_source,
            "visibility": Visibility.PRIVATE,
            "owner": user if user is not None and user.is_authenticated else None,
        },
    )
    return problem


def upload_kernel(
    user: Any,
    *,
    kernel_source: str,
    platform: str = Platform.TRN1,
    problem: Problem | None = None,
    reference_source: str | None = None,
    kernel_name: str = "",
    reference_name: str = "",
) -> tuple[Kernel, bool, Evaluation]:
    """An engineer's upload: store the kernel (under their own reference if given) and start its evaluation."""
    if not can_create_kernels(user):
        raise PermissionDenied("only engineers can upload kernels")
    if problem is None:
        if reference_source is None:
            raise ValidationError("choose a problem, or upload your own reference file")
        problem = create_custom_problem(user, reference_source, name=reference_name)
    kernel, created = create_kernel(problem, kernel_source, origin=KernelOrigin.UPLOADED, author=user, name=kernel_name)
    evaluation = request_evaluation(kernel, platform, user=user)
    return kernel, created, evaluation


# --------------------------------------------------------------------------------------------------
# Evaluations


def backend_version(backend: str) -> str:
    """The version an evaluation is cached under: for the simulator, simulator + performance-model versions."""
    from benchmark.evaluation.backends import get_backend

    try:
        return get_backend(backend).version()
    except ValueError as error:
        raise ValidationError(str(error)) from None


@dataclass
class _InFlight:
    """Evaluations this process has handed to the executor and not yet saved."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    futures: dict[int, Future] = field(default_factory=dict)


_in_flight = _InFlight()
_executor_lock = threading.Lock()
_executor: Any = None


def get_executor() -> Any:
    """The process-wide evaluation executor (a local process pool unless configured otherwise)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            from benchmark.evaluation import executors

            _executor = executors.LocalExecutor(max_workers=conf.evaluation_workers())
        return _executor


def set_executor(executor: Any) -> Any:
    """Swap the executor (a Ray executor, or a test double); returns the previous one."""
    global _executor
    with _executor_lock:
        previous, _executor = _executor, executor
    return previous


def _evaluations_run_inline() -> bool:
    return conf.evaluations_inline()


def _stale_after() -> timedelta:
    return timedelta(seconds=conf.stale_after_seconds())


def _limits(large: bool) -> Any:
    from benchmark.evaluation import Limits

    seconds = conf.timeout_seconds(large)
    return Limits(wall_seconds=float(seconds), cpu_seconds=seconds, memory_bytes=conf.memory_bytes(large))


def limits_for(problem: Problem) -> Any:
    """Sandbox limits by problem size: seconds and a few GiB for mini shapes, more for the full ones."""
    large = (problem.hbm_bytes or 0) > conf.LARGE_PROBLEM_HBM_BYTES or (
        problem.hbm_bytes is None and problem.case not in (DEFAULT_CASE, "custom")
    )
    return _limits(large)


def request_evaluation(
    kernel: Kernel,
    platform: str = Platform.TRN1,
    backend: str = Backend.SIMULATOR,
    *,
    user: Any = None,
    wait: bool = False,
    abandoned_before: datetime | None = None,
) -> Evaluation:
    """Return the cached evaluation for (kernel, platform, backend, version), or start one.

    A finished evaluation is returned as it is, except an infrastructure error (our fault), which is run
    again. A pending one is returned as it is while this process is running it; one left pending by a
    process that died is started again once it is older than ACCELOPT_EVALUATION_STALE_AFTER_S, or at
    once if it started before `abandoned_before` (a caller that knows the process which started it died:
    the run worker that took over a crashed worker's run).
    """
    if platform not in Platform.values:
        raise ValidationError(f"unknown platform {platform!r}; expected one of {', '.join(Platform.values)}")
    if backend not in Backend.values:
        raise ValidationError(f"unknown backend {backend!r}; expected one of {', '.join(Backend.values)}")
    version = backend_version(backend)
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
    if not created:
        _reset(evaluation)
    if wait or _evaluations_run_inline():
        return run_evaluation_now(evaluation)
    _submit(evaluation)
    return evaluation


def _needs_run(evaluation: Evaluation, abandoned_before: datetime | None = None) -> bool:
    if evaluation.status == EvaluationStatus.DONE:
        return evaluation.error_kind == ErrorKind.INFRASTRUCTURE_ERROR
    with _in_flight.lock:
        if evaluation.pk in _in_flight.futures:
            return False
    since = evaluation.started or evaluation.created
    if since is None or (abandoned_before is not None and since < abandoned_before):
        return True
    return timezone.now() - since > _stale_after()


def _reset(evaluation: Evaluation) -> None:
    evaluation.status = EvaluationStatus.QUEUED
    evaluation.started = None
    evaluation.finished = None
    evaluation.save(update_fields=["status", "started", "finished"])


def evaluation_request_for(evaluation: Evaluation) -> dict[str, Any]:
    """The keyword arguments of `benchmark.evaluation.evaluate` for this evaluation."""
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
    limits: Any = None,
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


def run_evaluation_now(evaluation: Evaluation) -> Evaluation:
    """Run one evaluation in the calling thread (the sandbox is still a child process) and save it."""
    from benchmark import evaluation as pipeline

    _mark_running(evaluation)
    try:
        result = pipeline.evaluate(**evaluation_request_for(evaluation))
    except Exception as exc:  # our own pipeline failed: record it as ours, to be retried
        logger.exception("evaluation %s failed inside the pipeline", evaluation.pk)
        result = _infrastructure_failure(exc)
    return save_result(evaluation.pk, result) or evaluation


def _mark_running(evaluation: Evaluation) -> None:
    evaluation.status = EvaluationStatus.RUNNING
    evaluation.started = timezone.now()
    evaluation.attempts += 1
    evaluation.save(update_fields=["status", "started", "attempts"])


def _submit(evaluation: Evaluation) -> None:
    from benchmark import evaluation as pipeline

    executor = get_executor()
    request_type = getattr(pipeline, "EvaluationRequest", None)
    kwargs = evaluation_request_for(evaluation)
    request = request_type(**kwargs) if request_type is not None else kwargs
    # "running" from the moment the executor has it: a pool gives no start signal back to this process.
    _mark_running(evaluation)
    evaluation_id = evaluation.pk

    def submit() -> None:
        future = executor.submit(request)
        with _in_flight.lock:
            _in_flight.futures[evaluation_id] = future
        future.add_done_callback(lambda done: _save_future(evaluation_id, done))

    # The callback saves from another thread: it must find the committed row, not a pending transaction.
    transaction.on_commit(submit)


def _save_future(evaluation_id: int, future: Future) -> None:
    """Future callback (an executor thread): save the result, or record the failure as ours."""
    try:
        try:
            result = future.result()
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


def _as_dict(result: Any) -> dict[str, Any]:
    if isinstance(result, dict):
        return result
    return result.to_dict()


def save_result(evaluation_id: int, result: Any) -> Evaluation | None:
    """Copy an EvaluationResult (or its dict) onto the evaluation row; None if the row is gone."""
    from benchmark.review import hold_for_suspicion  # review builds on this module

    data = _as_dict(result)
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
        hold_for_suspicion(evaluation)  # a suspicious result waits for a curator (benchmark.review)
        evaluation.save()
    return evaluation


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


def evaluate_source(
    kernel_source: str,
    *,
    problem: Problem | None = None,
    reference_source: str | None = None,
    platform: str = Platform.TRN1,
    backend: str = Backend.SIMULATOR,
    seeds: Sequence[int] | None = None,
) -> Any:
    """Evaluate a kernel without storing anything (the `evaluate` command): an EvaluationResult.

    `seeds` repeats an earlier evaluation's inputs (its recorded seeds); by default fresh ones are drawn.
    """
    from benchmark import evaluation as pipeline

    if problem is None and reference_source is None:
        raise ValueError("evaluate_source needs a problem or a reference source")
    kwargs = _evaluate_kwargs(
        kernel_source,
        problem.reference_source if problem is not None else reference_source,
        platform=platform,
        backend=backend,
        peak_counts=problem.peak_counts if problem is not None else None,
        tolerance=problem.tolerance if problem is not None else None,
        limits=limits_for(problem) if problem is not None else _limits(large=False),
    )
    if seeds is not None:
        kwargs["seeds"] = list(seeds)
    return pipeline.evaluate(**kwargs)


def best_evaluation(
    problem: Problem, platform: str = Platform.TRN1, backend: str = Backend.SIMULATOR
) -> Evaluation | None:
    """The fastest rankable evaluation (correct, not held for review) of the problem's kernels under the
    current backend version."""
    return (
        Evaluation.objects.rankable()
        .filter(kernel__problem=problem, platform=platform, backend=backend, backend_version=backend_version(backend))
        .select_related("kernel")
        .order_by("latency_ms", "id")
        .first()
    )


def best_of(evaluations: Iterable[Evaluation], platform: str) -> Evaluation | None:
    """The fastest rankable evaluation (correct, not held for review) among already-fetched ones (no query)."""
    candidates = [e for e in evaluations if e.platform == platform and e.is_rankable]
    return min(candidates, key=lambda e: (e.latency_ms, e.pk), default=None)


def preferred_evaluation(evaluations: Sequence[Evaluation]) -> Evaluation | None:
    """Which evaluation a kernel page opens on: the newest under the current backend version, else the newest."""
    current = {backend: backend_version(backend) for backend in {e.backend for e in evaluations}}
    for evaluation in evaluations:
        if evaluation.backend_version == current[evaluation.backend]:
            return evaluation
    return evaluations[0] if evaluations else None


def evaluation_is_stale(evaluation: Evaluation) -> bool:
    """Pending, not run by this process, and older than the stale limit: its worker is gone."""
    return evaluation.is_pending and _needs_run(evaluation)


def kernel_row_sort_key(row: dict[str, Any]) -> tuple[float, int]:
    """Problem pages list kernels fastest first on trn1; unevaluated and failing ones after."""
    best = row["best"].get(Platform.TRN1)
    return (best.latency_ms if best is not None else float("inf"), -row["kernel"].pk)


def theoretical_peaks(problem: Problem) -> dict[str, float | None]:
    """Theoretical peak latency (ms) per platform, or None where the problem has no peak counts."""
    from benchmark.perf.peak import theoretical_peak_ms

    peaks: dict[str, float | None] = {}
    for platform in Platform.values:
        if not problem.has_peak_counts:
            peaks[platform] = None
            continue
        peaks[platform] = theoretical_peak_ms(
            platform,
            vector_flops=problem.vector_flops,
            matmul_flops=problem.matmul_flops,
            hbm_bytes=problem.hbm_bytes,
        )
    return peaks


def current_evaluations(platform: str | None = None, backend: str = Backend.SIMULATOR) -> QuerySet[Evaluation]:
    """Evaluations under the current backend version (what pages show by default)."""
    evaluations = Evaluation.objects.filter(backend=backend, backend_version=backend_version(backend))
    if platform is not None:
        evaluations = evaluations.filter(platform=platform)
    return evaluations


def problems_with_baselines(user: Any, platform: str = Platform.TRN1) -> QuerySet[Problem]:
    """Visible problems with their baseline kernel and its current evaluations (three queries)."""
    return (
        visible_problems(user)
        .select_related("baseline_kernel")
        .prefetch_related(
            Prefetch(
                "baseline_kernel__evaluations",
                queryset=current_evaluations(platform),
                to_attr="current_evaluations",
            )
        )
    )


# --------------------------------------------------------------------------------------------------
# Suites and imports


@dataclass
class LoadSummary:
    suite: str
    problems_created: int = 0
    problems_updated: int = 0
    kernels_created: int = 0
    evaluations: list[Evaluation] = field(default_factory=list)

    @property
    def problems(self) -> int:
        return self.problems_created + self.problems_updated


def _spec_fields(spec: Any, case: str) -> dict[str, Any]:
    counts = spec.peak_counts(case)  # PeakCounts, or None when the suite does not know them
    return {
        "family": spec.family,
        "title": spec.title,
        "description": spec.description,
        "parameters": dict(spec.cases[case]),
        "reference_source": spec.reference_source(case),
        "vector_flops": counts.vector_flops if counts else None,
        "matmul_flops": counts.matmul_flops if counts else None,
        "hbm_bytes": counts.hbm_bytes if counts else None,
        "tolerance": spec.tolerance,
        "visibility": Visibility.PUBLIC,
    }


def load_suite(
    name: str,
    *,
    evaluate_cases: Sequence[str] = (DEFAULT_CASE,),
    platforms: Sequence[str] = (Platform.TRN1,),
    wait: bool = True,
) -> LoadSummary:
    """Create or update a suite's problems and baseline kernels, then evaluate the baselines.

    Idempotent: a second run changes nothing and finds the evaluations in the cache.
    """
    from benchmark import suites

    suite = suites.load_suite(name)
    summary = LoadSummary(suite=name)
    to_evaluate: list[Kernel] = []
    for spec in suite.problems:
        for case in spec.cases:
            with transaction.atomic():
                problem, created = Problem.objects.update_or_create(
                    suite=name, slug=spec.slug, case=case, defaults=_spec_fields(spec, case)
                )
                kernel, kernel_created = create_kernel(
                    problem, spec.baseline_for(case), origin=KernelOrigin.BASELINE, name=f"{spec.slug} baseline"
                )
                if problem.baseline_kernel_id != kernel.pk:
                    problem.baseline_kernel = kernel
                    problem.save(update_fields=["baseline_kernel"])
            summary.problems_created += created
            summary.problems_updated += not created
            summary.kernels_created += kernel_created
            if case in evaluate_cases:
                to_evaluate.append(kernel)
    for kernel in to_evaluate:
        for platform in platforms:
            summary.evaluations.append(request_evaluation(kernel, platform))
    if wait:
        wait_for_evaluations(summary.evaluations)
        for evaluation in summary.evaluations:
            evaluation.refresh_from_db()
    return summary


@dataclass
class ImportSummary:
    suite: str
    problems: list[Problem] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    kernels_created: int = 0

    @property
    def kernels_existing(self) -> int:
        return len(self.kernels) - self.kernels_created


def import_nkibench(path: str | Path, *, suite: str = IMPORTED_SUITE, user: Any = None) -> ImportSummary:
    """Import a directory in AccelOpt's public NKIBench layout (summary.json, reference/, kernels/).

    Each (problem, case) becomes a public problem of `suite` with its own reference file (their references
    reshape inputs for their kernels, so their kernels only run against them), and each case's kernel an
    imported kernel of it. Peak counts come with the spec when the slug is one of our NKIBench problems.
    Idempotent, like load_suite.
    """
    from benchmark.suites import read_nkibench_dir

    if suite == DEFAULT_SUITE:
        raise ValidationError(f"import into a suite of its own, not the built-in {DEFAULT_SUITE!r}")
    specs = read_nkibench_dir(Path(path))
    summary = ImportSummary(suite=suite)
    for spec in specs:
        for case in spec.cases:
            with transaction.atomic():
                problem, _ = Problem.objects.update_or_create(
                    suite=suite, slug=spec.slug, case=case, defaults=_spec_fields(spec, case)
                )
                kernel, created = create_kernel(
                    problem, spec.baseline_for(case), origin=KernelOrigin.IMPORTED, author=user,
                    name=f"{spec.slug} case {case} (imported)",
                )
                if problem.baseline_kernel_id is None:
                    problem.baseline_kernel = kernel  # the directory's kernel is the reference point here
                    problem.save(update_fields=["baseline_kernel"])
            summary.problems.append(problem)
            summary.kernels.append(kernel)
            summary.kernels_created += created
    return summary
