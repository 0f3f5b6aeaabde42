"""Kernels and the problems users bring: storing a source (one row per problem and sha256), a user's own
reference file as a private problem, and an engineer's upload, which stores the kernel and starts its
evaluation.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils.text import slugify

from benchmark import conf
from benchmark.models import (
    CUSTOM_SUITE,
    DEFAULT_LANGUAGE,
    Evaluation,
    Kernel,
    KernelOrigin,
    Problem,
    Visibility,
)
from benchmark.services.access import can_create_kernels, shareable_kernels
from benchmark.services.evaluations import check_platform_for, request_evaluation
from benchmark.services.queue import check_evaluation_quota
from benchmark.services.solutions import TRITON_ENTRY_POINT
from benchmark.sizes import human_bytes
from engine.evaluator.sandbox.process import Limits
from engine.evaluator.sizing import ReferenceCheck
from engine.evaluator.sizing import check_reference as run_reference_check
from engine.evaluator.static_check import MAX_SOURCE_BYTES
from engine.platforms.registry import (
    FLASHINFER_FORMAT,
    REFERENCE_FORMAT,
    get_definition,
    platforms_storing,
)


def kernel_source_limit() -> int:
    """The static check's source-size limit; an upload over it is refused before it is stored."""
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
    rewrite_of: Kernel | None = None,
) -> tuple[Kernel, bool]:
    """Store a kernel for a problem, or return the existing one with the same source (created=False).

    Existing means one that everyone who will see this kernel may see (shareable_kernels): a source identical to
    another person's private run's kernel gets a row of its own (its `scope`: "run:<id>" for a run, "upload"
    otherwise), with none of that row's evaluations or provenance.

    The source is stored even if it does not parse: the evaluation is what tells the author what is wrong.
    `rewrite_of` (a Triton kernel whose entry file `source` rewrites; by default `parent`): the new kernel
    keeps its entry point and, for a multi-file solution, its other files, which a rewrite leaves unchanged.
    """
    if not isinstance(source, str):
        raise ValidationError("the kernel source must be text")
    if "\x00" in source:
        raise ValidationError("the kernel source contains NUL bytes; upload a Python text file")
    size = len(source.encode("utf-8"))
    limit = kernel_source_limit()
    if size > limit:
        raise ValidationError(
            f"the kernel source is {human_bytes(size)}; the limit is {human_bytes(limit)}"
        )
    if not source.strip():
        raise ValidationError("the kernel source is empty")
    sha = source_sha256(source)
    entry_point, solution_meta = _rewritten_solution(problem, rewrite_of or parent)
    defaults = {
        "source": source,
        "origin": origin,
        "author": author if author is not None and author.is_authenticated else None,
        "parent": parent,
        "run_id": run_id,
        "name": name[:200],
        # A Triton kernel (an upload) is one file whose `run` is the entry point; a rewrite keeps its original's.
        "entry_point": entry_point,
        "solution_meta": solution_meta,
    }
    shareable = shareable_kernels(problem, run_id)
    existing = shareable.filter(sha256=sha).order_by("pk").first()
    if existing is not None:
        return existing, False
    # The first row of the source, else (the first is someone's private work) one of our own, which is always
    # shareable: an upload row has no run, a run's row is its own. get_or_create settles a race for either.
    for scope in ("", f"run:{run_id}" if run_id else "upload"):
        kernel, created = Kernel.objects.get_or_create(problem=problem, sha256=sha, scope=scope, defaults=defaults)
        if created or shareable.filter(pk=kernel.pk).exists():
            break
    return kernel, created


def _rewritten_solution(problem: Problem, original: Kernel | None) -> tuple[str, dict[str, Any]]:
    """The entry point and the solution files beside the entry file that a rewrite of `original` keeps."""
    if get_definition(problem.default_platform).problem_format != FLASHINFER_FORMAT:  # one source file, no entry point
        return "", {}
    if original is None or not original.entry_point:  # none, or a bare Kernel(pk=...) with nothing loaded
        return TRITON_ENTRY_POINT, {}
    meta = original.solution_meta or {}
    kept = {key: meta[key] for key in ("path", "sources", "order") if key in meta}
    return original.entry_point, kept


# How a user's reference gets peak counts when the upload gives none (issue 20): a lower bound that is honest.
COUNTED_METHOD = (
    "counted from the reference: HBM bytes are its inputs and outputs, measured by running it in the sandbox; "
    "FLOPs are not counted (0), so the peak is the HBM roofline and the peak fraction a lower bound"
)
GIVEN_METHOD = "given on the upload"


def check_reference(reference_source: str) -> ReferenceCheck:
    """A user's reference run once in the evaluation sandbox (engine.evaluator.sizing.check_reference): with
    the large memory limit, so a full-size one fits, and the small time limit, so an upload waits seconds."""
    seconds = conf.timeout_seconds(False)
    return run_reference_check(reference_source, Limits(wall_seconds=float(seconds), cpu_seconds=seconds,
                                                        memory_bytes=conf.memory_bytes(True)))


def _refuse_broken_reference(checked: ReferenceCheck) -> None:
    if checked.error:
        where = f"line {checked.line} of the reference: " if checked.line else "the reference: "
        raise ValidationError(f"your reference file is broken, so no problem was made from it. {where}{checked.error}")


def create_custom_problem(
    user: Any, reference_source: str, *, name: str = "", peak_counts: tuple[int, int, int] | None = None,
    checked: ReferenceCheck | None = None, language: str = DEFAULT_LANGUAGE,
) -> Problem:
    """A private problem from a user's own reference file (NKIBench's reference format), for kernels in `language`
    (one whose platforms store their problems as reference files).

    When it is created its size is measured by running the reference once in the sandbox (`hbm_bytes`:
    the bytes of its inputs and outputs), so its evaluations get the limits of its size. Its peak counts
    are `peak_counts` (vector FLOPs, matmul FLOPs, HBM bytes) when the upload gives them, else counted:
    the measured bytes and no FLOPs, the HBM roofline (`peak_counts_method` says which). The same run checks
    it: a reference that does not import, raises, or returns no numeric arrays (or not the OUTPUT_SHAPES it
    declares) is refused with its error and line, and nothing is stored. `checked`: that run, if the caller made it.
    """
    if not reference_source.strip():
        raise ValidationError("the reference file is empty")
    slug = _custom_slug(user, reference_source, name)
    if checked is None and not Problem.objects.filter(suite=CUSTOM_SUITE, slug=slug, case="custom").exists():
        # Checked before anything is stored: a broken reference is its author's to fix, refused with its error
        # and line, and leaves no private problem behind (issue 32). Outside any transaction: it takes seconds.
        checked = check_reference(reference_source)
        _refuse_broken_reference(checked)
    problem, created = Problem.objects.get_or_create(
        suite=CUSTOM_SUITE,
        slug=slug,
        case="custom",
        defaults={
            "title": Path(name).stem if name else "Uploaded reference",
            "reference_source": reference_source,
            "language": language,
            "visibility": Visibility.PRIVATE,
            "owner": user if user is not None and user.is_authenticated else None,
        },
    )
    if peak_counts is not None:
        problem.vector_flops, problem.matmul_flops, problem.hbm_bytes = (int(count) for count in peak_counts)
        problem.peak_counts_method = GIVEN_METHOD
        problem.save(update_fields=["vector_flops", "matmul_flops", "hbm_bytes", "peak_counts_method"])
    elif created:
        problem.hbm_bytes = (checked or check_reference(reference_source)).io_bytes
        if problem.hbm_bytes:
            problem.vector_flops = problem.matmul_flops = 0
            problem.peak_counts_method = COUNTED_METHOD
        problem.save(update_fields=["vector_flops", "matmul_flops", "hbm_bytes", "peak_counts_method"])
    return problem


def upload_kernel(
    user: Any,
    *,
    kernel_source: str,
    platform: str | None = None,
    problem: Problem | None = None,
    reference_source: str | None = None,
    kernel_name: str = "",
    reference_name: str = "",
    evaluate: bool = True,
    wait: bool = False,
    peak_counts: tuple[int, int, int] | None = None,
) -> tuple[Kernel, bool, Evaluation | None]:
    """An engineer's upload: store the kernel (under their own reference if given) and start its evaluation.

    The one path for the upload page, POST /api/kernels and a kernel pasted into the run form. The API may
    skip the evaluation (`evaluate=False`, then the evaluation is None) or wait for its result (`wait`).

    Without a platform, the problem's default one (trn1 for NKI, the first GPU for Triton). A platform of
    another kernel language than the problem's is refused before anything is stored. The source is
    checked by its language's evaluation in the sandbox, never here: no NKI check runs on Triton code.
    """
    if not can_create_kernels(user):
        raise PermissionDenied("only engineers can upload kernels")
    if evaluate:
        check_evaluation_quota(user)  # before anything is stored: a refused upload leaves nothing behind
    if problem is None:
        if reference_source is None:
            raise ValidationError("choose a problem, or upload your own reference file")
        # The problem's language is its platform's (NKI's without one), which must store its problems as reference
        # files; a FlashInfer-Bench platform's problems are imported definitions.
        storing = platforms_storing(REFERENCE_FORMAT)
        if platform is not None and platform not in storing:
            raise ValidationError(
                f"a reference file in NKIBench's format is a problem for {', '.join(storing)}, not for {platform}; "
                f"for {', '.join(platforms_storing(FLASHINFER_FORMAT))}, import a FlashInfer-Bench definition "
                "(manage.py import_flashinfer or /problems/import-flashinfer/)"
            )
        language = get_definition(platform).language if platform is not None else DEFAULT_LANGUAGE
        new_problem = not _custom_problem_exists(user, reference_source, reference_name)
        checked = check_reference(reference_source) if new_problem else None
        if checked is not None:
            _refuse_broken_reference(checked)
        # The problem and its kernel together: a kernel refused here (empty, too big) leaves no problem behind.
        with transaction.atomic():
            problem = create_custom_problem(user, reference_source, name=reference_name, peak_counts=peak_counts,
                                            checked=checked, language=language)
            platform = platform or problem.default_platform
            check_platform_for(problem, platform)
            kernel, created = create_kernel(problem, kernel_source, origin=KernelOrigin.UPLOADED, author=user,
                                            name=kernel_name)
        try:
            evaluation = request_evaluation(kernel, platform, user=user, wait=wait) if evaluate else None
        except ValidationError:
            if new_problem:  # refused before anything was queued (e.g. the backend cannot run here): undo it all
                problem.delete()
            raise
        return kernel, created, evaluation
    platform = platform or problem.default_platform
    check_platform_for(problem, platform)
    kernel, created = create_kernel(problem, kernel_source, origin=KernelOrigin.UPLOADED, author=user, name=kernel_name)
    evaluation = request_evaluation(kernel, platform, user=user, wait=wait) if evaluate else None
    return kernel, created, evaluation


def _custom_slug(user: Any, reference_source: str, name: str) -> str:
    """The slug of a user's own reference: its name and digest, plus the user's id when another user already
    holds that slug, so one person's upload never lands on (or changes) someone else's private problem."""
    base = slugify(Path(name).stem if name else "") or "reference"
    slug = f"{base[:80]}-{source_sha256(reference_source)[:8]}"
    holder = Problem.objects.filter(suite=CUSTOM_SUITE, slug=slug, case="custom").values_list("owner_id", flat=True)
    user_id = user.pk if user is not None and user.is_authenticated else None
    if holder and holder[0] != user_id:
        return f"{base[:70]}-{source_sha256(reference_source)[:8]}-u{user_id or 0}"
    return slug


def _custom_problem_exists(user: Any, reference_source: str, name: str) -> bool:
    slug = _custom_slug(user, reference_source, name)
    return Problem.objects.filter(suite=CUSTOM_SUITE, slug=slug, case="custom").exists()
