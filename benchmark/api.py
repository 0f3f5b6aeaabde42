"""The benchmark app's part of the API; accelopt_site/api.py mounts this router under /api/.

Anyone may read public problems, kernels and evaluations; creating kernels and requesting evaluations
needs the engineer role, and the review queue (listing, accepting and rejecting held results) the curator
role. Each endpoint parses, authorizes, calls one service and serializes; the service's exceptions
(Http404, PermissionDenied, ValidationError, ValueError) become error answers in accelopt_site/api.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import File, Form, Router, Schema, Status
from ninja.errors import HttpError
from ninja.files import UploadedFile

from accounts.auth import api_optional_auth, api_role
from accounts.roles import CURATOR, ENGINEER
from benchmark import review, services
from benchmark.models import Evaluation, Kernel, Problem, Review
from benchmark.provenance import evaluation_provenance, generated_by
from benchmark.services.baselines import baseline_progress as progress
from benchmark.sizes import human_bytes

router = Router()


class ErrorOut(Schema):
    detail: str


class ProblemOut(Schema):
    id: int
    address: str
    suite: str
    slug: str
    case: str
    family: str
    title: str
    description: str
    parameters: dict[str, Any]
    vector_flops: int | None
    matmul_flops: int | None
    hbm_bytes: int | None
    tolerance: float | None
    visibility: str
    language: str  # the kernel language: "nki" or "triton"
    platforms: list[str]  # the platforms its kernels may be evaluated on
    baseline_kernel_id: int | None
    theoretical_peak_ms: dict[str, float | None]
    url: str


class ProblemDetailOut(ProblemOut):
    reference_source: str
    definition: dict[str, Any]  # a Triton problem's FlashInfer-Bench definition ({} for NKI)
    workloads: list[dict[str, Any]]  # and its workloads


class ReviewOut(Schema):
    state: str  # held, accepted or rejected
    reason: str  # why it was held
    held_at: datetime | None
    reviewed_by: str | None
    reviewed_at: datetime | None
    note: str


class EvaluationOut(Schema):
    id: int
    kernel_id: int
    platform: str
    backend: str
    backend_version: str
    status: str
    compiled: bool | None
    runnable: bool | None
    correct: bool | None
    error_kind: str | None
    error_message: str
    error_line: int | None
    error_detail: str
    correctness: dict[str, Any]
    seeds: list[int]
    latency_ms: float | None
    peak_fraction: float | None
    simulated: bool
    profile: dict[str, Any]
    timeline: dict[str, Any]
    breakdown: dict[str, Any] | None  # where the predicted time goes (docs/evaluation.md); None when measured
    provenance: dict[str, Any]
    ranked: bool  # counts on the leaderboard and problem pages: correct, and not held for review
    review: ReviewOut | None  # None unless the result was held for review
    wall_time_s: float | None
    attempts: int
    created: datetime
    finished: datetime | None
    url: str


class ReviewIn(Schema):
    note: str = ""


class KernelOut(Schema):
    id: int
    problem_id: int
    problem: str
    name: str
    sha256: str
    origin: str
    parent_id: int | None
    author: str | None
    run_id: int | None
    created: datetime
    source: str
    entry_point: str  # a Triton kernel's FlashInfer-Bench entry point ("main.py::run"); blank for NKI
    # An NKI kernel's generation: "legacy" (neuronxcc.nki, refused by Neuron SDK 2.28 and later) or "current"
    # (the nki package); null for Triton kernels and sources that import neither.
    nki_generation: str | None
    evaluations: list[EvaluationOut]
    url: str


class KernelCreated(Schema):
    created: bool  # False when the same source already existed for the problem
    kernel: KernelOut
    evaluation: EvaluationOut | None


class MigrationChangeOut(Schema):
    line: int  # in the legacy source
    what: str
    guide: str  # the section of AWS's NKI migration guide that asks for it


class KernelMigrated(Schema):
    created: bool  # False when this exact migrated source already existed for the problem
    kernel: KernelOut  # the NKI 0.6 kernel; its parent_id is the legacy one
    changes: list[MigrationChangeOut]
    evaluation: EvaluationOut | None


class MigrateIn(Schema):
    platform: str | None = None  # by default the problem's own
    evaluate: bool = True
    wait: bool = False  # block until the evaluation has finished


class KernelIn(Schema):
    problem: str | None = None  # an id or an address, e.g. "silu:mini"
    reference_source: str | None = None  # instead of a problem: your own NKIBench-format reference
    source: str
    name: str = ""
    platform: str | None = None  # by default the problem's own: trn1 for NKI, h100 for Triton
    evaluate: bool = True
    wait: bool = False  # block until the evaluation has finished


class EvaluationIn(Schema):
    platform: str | None = None  # by default the problem's own: trn1 for NKI, h100 for Triton
    backend: str | None = None  # by default the platform's own: simulator for NKI, triton-interpreter for Triton
    wait: bool = False


def _absolute(request: HttpRequest, path: str) -> str:
    return request.build_absolute_uri(path)


def _problem_out(request: HttpRequest, problem: Problem, *, detail: bool = False) -> dict[str, Any]:
    data = {
        "id": problem.pk,
        "address": problem.address,
        "suite": problem.suite,
        "slug": problem.slug,
        "case": problem.case,
        "family": problem.family,
        "title": problem.title,
        "description": problem.description,
        "parameters": problem.parameters,
        "vector_flops": problem.vector_flops,
        "matmul_flops": problem.matmul_flops,
        "hbm_bytes": problem.hbm_bytes,
        "tolerance": problem.tolerance,
        "visibility": problem.visibility,
        "language": problem.language,
        "platforms": [p.value for p in problem.platforms],
        "baseline_kernel_id": problem.baseline_kernel_id,
        "theoretical_peak_ms": services.theoretical_peaks(problem),
        "url": _absolute(request, problem.get_absolute_url()),
    }
    if detail:
        data["reference_source"] = problem.reference_source
        data["definition"] = problem.definition
        data["workloads"] = problem.workloads
    return data


def _review_out(evaluation: Evaluation) -> dict[str, Any] | None:
    if not evaluation.review:
        return None
    return {
        "state": evaluation.review,
        "reason": evaluation.held_reason,
        "held_at": evaluation.held_at,
        "reviewed_by": evaluation.reviewed_by.get_username() if evaluation.reviewed_by_id else None,
        "reviewed_at": evaluation.reviewed_at,
        "note": evaluation.review_note,
    }


def _provenance_out(
    request: HttpRequest, evaluation: Evaluation, generated: dict[int, dict[str, Any]] | None
) -> dict[str, Any]:
    data = evaluation_provenance(evaluation, generated)
    if data["generated_by"] and data["generated_by"].get("run_url"):
        data["generated_by"] = {**data["generated_by"], "run_url": _absolute(request, data["generated_by"]["run_url"])}
    return data


def _evaluation_out(
    request: HttpRequest, evaluation: Evaluation, generated: dict[int, dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "id": evaluation.pk,
        "kernel_id": evaluation.kernel_id,
        "platform": evaluation.platform,
        "backend": evaluation.backend,
        "backend_version": evaluation.backend_version,
        "status": evaluation.status,
        "compiled": evaluation.compiled,
        "runnable": evaluation.runnable,
        "correct": evaluation.correct,
        "error_kind": evaluation.error_kind or None,
        "error_message": evaluation.error_message,
        "error_line": evaluation.error_line,
        "error_detail": (evaluation.result or {}).get("error_detail") or "",
        "correctness": evaluation.correctness,
        "seeds": evaluation.seeds,
        "latency_ms": evaluation.latency_ms,
        "peak_fraction": evaluation.peak_fraction,
        "simulated": evaluation.is_simulated,
        "profile": evaluation.profile,
        "timeline": evaluation.timeline if isinstance(evaluation.timeline, dict) else {},
        "breakdown": evaluation.breakdown,
        "provenance": _provenance_out(request, evaluation, generated),
        "ranked": evaluation.is_rankable,
        "review": _review_out(evaluation),
        "wall_time_s": evaluation.wall_time_s,
        "attempts": evaluation.attempts,
        "created": evaluation.created,
        "finished": evaluation.finished,
        "url": _absolute(request, evaluation.get_absolute_url()),
    }


def _kernel_out(request: HttpRequest, kernel: Kernel) -> dict[str, Any]:
    generated = generated_by([kernel])
    evaluations = services.kernel_evaluations(kernel)
    return {
        "id": kernel.pk,
        "problem_id": kernel.problem_id,
        "problem": kernel.problem.address,
        "name": kernel.name,
        "sha256": kernel.sha256,
        "origin": kernel.origin,
        "parent_id": kernel.parent_id,
        "author": kernel.author.get_username() if kernel.author else None,
        "run_id": kernel.run_id,
        "created": kernel.created,
        "source": kernel.source,
        "entry_point": kernel.entry_point,
        "nki_generation": kernel.nki_generation,
        "evaluations": [_evaluation_out(request, e, generated) for e in evaluations],
        "url": _absolute(request, kernel.get_absolute_url()),
    }


@router.get("/problems", auth=api_optional_auth, response=list[ProblemOut], summary="List problems")
def list_problems(request: HttpRequest, suite: str = "", case: str = "") -> list[dict[str, Any]]:
    problems = services.find_problems(request.auth, suite=suite, case=case)
    return [_problem_out(request, problem) for problem in problems]


@router.get(
    "/problems/{path:reference}",
    auth=api_optional_auth,
    response={200: ProblemDetailOut, 400: ErrorOut, 404: ErrorOut},
    summary="Read a problem (by id or address such as silu:mini)",
)
def read_problem(request: HttpRequest, reference: str) -> dict[str, Any]:
    return _problem_out(request, services.get_problem_by_reference(request.auth, reference), detail=True)


@router.post(
    "/kernels",
    auth=api_role(ENGINEER),
    response={200: KernelCreated, 201: KernelCreated, 400: ErrorOut, 404: ErrorOut},
    summary="Create a kernel (and evaluate it)",
)
def create_kernel(request: HttpRequest, payload: KernelIn) -> Status:
    if (payload.problem is None) == (payload.reference_source is None):
        raise HttpError(
            400, "give either 'problem' (an id or address such as silu:mini) or 'reference_source'"
        )
    problem = None
    if payload.problem is not None:
        problem = services.get_problem_by_reference(request.auth, payload.problem)
    kernel, created, evaluation = services.upload_kernel(
        request.auth, kernel_source=payload.source, kernel_name=payload.name, platform=payload.platform,
        problem=problem, reference_source=payload.reference_source, evaluate=payload.evaluate, wait=payload.wait,
    )
    body = {
        "created": created,
        "kernel": _kernel_out(request, kernel),
        "evaluation": _evaluation_out(request, evaluation) if evaluation is not None else None,
    }
    return Status(201 if created else 200, body)


@router.get(
    "/kernels/{int:kernel_id}",
    auth=api_optional_auth,
    response={200: KernelOut, 404: ErrorOut},
    summary="Read a kernel with its evaluations",
)
def read_kernel(request: HttpRequest, kernel_id: int) -> dict[str, Any]:
    return _kernel_out(request, services.get_kernel_for_user(request.auth, kernel_id))


@router.post(
    "/kernels/{int:kernel_id}/evaluations",
    auth=api_role(ENGINEER),
    response={200: EvaluationOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Request an evaluation (the cached one when it exists)",
)
def request_evaluation(request: HttpRequest, kernel_id: int, payload: EvaluationIn) -> dict[str, Any]:
    kernel = services.get_kernel_for_user(request.auth, kernel_id, write=True)
    evaluation = services.request_evaluation(
        kernel, payload.platform or kernel.problem.default_platform, payload.backend, user=request.auth,
        wait=payload.wait,
    )
    return _evaluation_out(request, evaluation)


@router.post(
    "/kernels/{int:kernel_id}/migrate",
    auth=api_role(ENGINEER),
    response={200: KernelMigrated, 201: KernelMigrated, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Migrate a legacy neuronxcc.nki kernel to NKI 0.6 (a new kernel, evaluated like an upload)",
)
def migrate_kernel(request: HttpRequest, kernel_id: int, payload: MigrateIn) -> Status:
    kernel = services.get_kernel_for_user(request.auth, kernel_id, write=True)
    result = services.migrate_kernel(request.auth, kernel, platform=payload.platform, evaluate=payload.evaluate,
                                     wait=payload.wait)
    body = {
        "created": result.created,
        "kernel": _kernel_out(request, result.kernel),
        "changes": [{"line": c.line, "what": c.what, "guide": c.guide} for c in result.changes],
        "evaluation": _evaluation_out(request, result.evaluation) if result.evaluation is not None else None,
    }
    return Status(201 if result.created else 200, body)


@router.get(
    "/evaluations/{int:evaluation_id}",
    auth=api_optional_auth,
    response={200: EvaluationOut, 404: ErrorOut},
    summary="Read an evaluation",
)
def read_evaluation(request: HttpRequest, evaluation_id: int) -> dict[str, Any]:
    return _evaluation_out(request, services.get_evaluation_for_user(request.auth, evaluation_id))


@router.get(
    "/reviews",
    auth=api_role(CURATOR),
    response=list[EvaluationOut],
    summary="List results held for review (curators)",
)
def list_reviews(request: HttpRequest) -> list[dict[str, Any]]:
    held = list(review.held_evaluations(request.auth))
    generated = generated_by(evaluation.kernel for evaluation in held)
    return [_evaluation_out(request, evaluation, generated) for evaluation in held]


def _decide(request: HttpRequest, evaluation_id: int, decision: str, note: str) -> dict[str, Any]:
    evaluation = review.decide(request.auth, evaluation_id, decision, note)
    # The reviewable row itself: a private run's held result is the curator's to decide, not to browse.
    return _evaluation_out(request, review.get_reviewable_for_user(request.auth, evaluation.pk))


@router.post(
    "/evaluations/{int:evaluation_id}/accept",
    auth=api_role(CURATOR),
    response={200: EvaluationOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Accept a held result: it then counts on the leaderboard (curators)",
)
def accept_evaluation(request: HttpRequest, evaluation_id: int, payload: ReviewIn) -> dict[str, Any]:
    return _decide(request, evaluation_id, Review.ACCEPTED, payload.note)


@router.post(
    "/evaluations/{int:evaluation_id}/reject",
    auth=api_role(CURATOR),
    response={200: EvaluationOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Reject a held result: it never counts (curators)",
)
def reject_evaluation(request: HttpRequest, evaluation_id: int, payload: ReviewIn) -> dict[str, Any]:
    return _decide(request, evaluation_id, Review.REJECTED, payload.note)


class FlashInferImportIn(Schema):
    platform: str  # a GPU platform running Triton: h100 or h200
    definitions: list[dict[str, Any]] = []  # FlashInfer-Bench definition objects
    workloads: list[dict[str, Any]] = []  # workload objects (a .jsonl file's lines)
    solutions: list[dict[str, Any]] = []  # solution objects
    suite: str = "flashinfer"
    evaluate: bool = False  # evaluate every imported solution on the platform's default backend


class FlashInferImportOut(Schema):
    suite: str
    platform: str
    problems: list[ProblemOut]
    problems_created: int
    workloads_added: int
    kernel_ids: list[int]
    kernels_created: int
    evaluation_ids: list[int]


@router.post(
    "/flashinfer/import",
    auth=api_role(ENGINEER),
    response={200: FlashInferImportOut, 400: ErrorOut, 403: ErrorOut},
    summary="Import FlashInfer-Bench definitions, workloads and solutions as Triton problems and kernels",
)
def import_flashinfer(request: HttpRequest, payload: FlashInferImportIn) -> dict[str, Any]:
    items = services.flashinfer_items_from_payload(payload.model_dump())
    summary = services.import_flashinfer(items, platform=payload.platform, user=request.auth, suite=payload.suite,
                                         evaluate=payload.evaluate)
    return {
        "suite": summary.suite,
        "platform": summary.platform,
        "problems": [_problem_out(request, problem) for problem in summary.problems],
        "problems_created": summary.problems_created,
        "workloads_added": summary.workloads_added,
        "kernel_ids": [kernel.pk for kernel in summary.kernels],
        "kernels_created": summary.kernels_created,
        "evaluation_ids": [evaluation.pk for evaluation in summary.evaluations],
    }


@router.get(
    "/flashinfer/solutions/{path:reference}",
    auth=api_optional_auth,
    response={200: dict[str, Any], 400: ErrorOut, 404: ErrorOut},
    summary="Our best kernel for a Triton problem as a FlashInfer-Bench solution (by id or address)",
)
def export_solution(request: HttpRequest, reference: str) -> dict[str, Any]:
    return services.export_solution(services.get_problem_by_reference(request.auth, reference), user=request.auth)


class BaselineProgressOut(Schema):
    case: str
    platform: str
    total: int
    done: int
    correct: int
    failed: list[str]  # addresses of baselines that finished but are not correct
    running: int
    queued: int
    not_started: int
    complete: bool


@router.get(
    "/baselines", auth=api_optional_auth, response=list[BaselineProgressOut],
    summary="How far the background evaluation of the built-in suite's baselines has come, per case",
)
def baseline_progress(request: HttpRequest) -> list[dict[str, Any]]:
    return [progress(case).as_dict() for case in ("mini", "full")]


class ImportedKernelOut(Schema):
    file_name: str
    kernel_id: int
    problem: str
    created: bool
    evaluation_id: int | None
    url: str


@router.post(
    "/kernels/import", auth=api_role(ENGINEER),
    response={201: list[ImportedKernelOut], 400: ErrorOut, 404: ErrorOut, 413: ErrorOut, 429: ErrorOut},
    summary="Upload a folder of kernels at once (multipart: several `files`; optional `problem`, `platform`)",
)
def import_kernel_files(  # noqa: B008 - ninja's File/Form markers are meant as defaults
    request: HttpRequest, files: list[UploadedFile] = File(...), problem: str = Form(""),  # noqa: B008
    platform: str | None = Form(None), evaluate: bool = Form(True),  # noqa: B008
) -> Status:
    from benchmark.services.kernel_import import import_kernels  # the import path's own module

    target = services.get_problem_by_address(problem, request.auth) if problem else None
    limit = services.kernel_source_limit()
    # Each file's size is known from the upload (it streamed to disk): one over a kernel's limit is never read.
    big = [f"{f.name}: {human_bytes(f.size)}, over the {human_bytes(limit)} a kernel may be" for f in files
           if f.size is not None and f.size > limit]
    if big:
        raise HttpError(400, "nothing imported: " + "; ".join(big))
    imported = import_kernels(request.auth, [(f.name or "kernel.py", f.read()) for f in files], problem=target,
                              platform=platform, evaluate=evaluate)
    return Status(201, [{
        "file_name": item.file_name, "kernel_id": item.kernel.pk, "problem": item.kernel.problem.address,
        "created": item.created, "evaluation_id": item.evaluation.pk if item.evaluation else None,
        "url": item.kernel.get_absolute_url(),
    } for item in imported])
