"""The benchmark app's part of the API; accelopt_site/api.py mounts this router under /api/.

Anyone may read public problems, kernels and evaluations; creating kernels and requesting evaluations
needs the engineer role. Each endpoint parses, authorizes, calls one service and serializes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest
from ninja import Router, Schema, Status
from ninja.errors import HttpError

from accounts.auth import api_optional_auth, api_role
from accounts.roles import ENGINEER
from benchmark import services
from benchmark.models import Backend, Evaluation, Kernel, Platform, Problem

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
    baseline_kernel_id: int | None
    theoretical_peak_ms: dict[str, float | None]
    url: str


class ProblemDetailOut(ProblemOut):
    reference_source: str


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
    provenance: dict[str, Any]
    wall_time_s: float | None
    attempts: int
    created: datetime
    finished: datetime | None
    url: str


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
    evaluations: list[EvaluationOut]
    url: str


class KernelCreated(Schema):
    created: bool  # False when the same source already existed for the problem
    kernel: KernelOut
    evaluation: EvaluationOut | None


class KernelIn(Schema):
    problem: str | None = None  # an id or an address, e.g. "silu:mini"
    reference_source: str | None = None  # instead of a problem: your own NKIBench-format reference
    source: str
    name: str = ""
    platform: str = Platform.TRN1.value
    evaluate: bool = True
    wait: bool = False  # block until the evaluation has finished


class EvaluationIn(Schema):
    platform: str = Platform.TRN1.value
    backend: str = Backend.SIMULATOR.value
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
        "baseline_kernel_id": problem.baseline_kernel_id,
        "theoretical_peak_ms": services.theoretical_peaks(problem),
        "url": _absolute(request, problem.get_absolute_url()),
    }
    if detail:
        data["reference_source"] = problem.reference_source
    return data


def _evaluation_out(request: HttpRequest, evaluation: Evaluation) -> dict[str, Any]:
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
        "provenance": evaluation.provenance,
        "wall_time_s": evaluation.wall_time_s,
        "attempts": evaluation.attempts,
        "created": evaluation.created,
        "finished": evaluation.finished,
        "url": _absolute(request, evaluation.get_absolute_url()),
    }


def _kernel_out(request: HttpRequest, kernel: Kernel) -> dict[str, Any]:
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
        "evaluations": [_evaluation_out(request, e) for e in kernel.evaluations.order_by("-created", "-id")],
        "url": _absolute(request, kernel.get_absolute_url()),
    }


def _problem_for(request: HttpRequest, reference: str) -> Problem:
    """A problem by id ("12") or address ("silu", "silu:full", "imported/silu:1")."""
    try:
        if reference.isdigit():
            return services.get_problem_for_user(request.auth, int(reference))
        return services.get_problem_by_address(reference, request.auth)
    except ValueError as error:
        raise HttpError(400, str(error)) from None
    except Http404 as error:
        raise HttpError(404, str(error)) from None


def _bad_request(error: ValidationError) -> HttpError:
    return HttpError(400, " ".join(error.messages))


@router.get("/problems", auth=api_optional_auth, response=list[ProblemOut], summary="List problems")
def list_problems(request: HttpRequest, suite: str = "", case: str = "") -> list[dict[str, Any]]:
    problems = services.visible_problems(request.auth)
    if suite:
        problems = problems.filter(suite=suite)
    if case:
        problems = problems.filter(case=case)
    return [_problem_out(request, problem) for problem in problems]


@router.get(
    "/problems/{path:reference}",
    auth=api_optional_auth,
    response={200: ProblemDetailOut, 400: ErrorOut, 404: ErrorOut},
    summary="Read a problem (by id or address such as silu:mini)",
)
def read_problem(request: HttpRequest, reference: str) -> dict[str, Any]:
    return _problem_out(request, _problem_for(request, reference), detail=True)


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
    problem = _problem_for(request, payload.problem) if payload.problem is not None else None
    try:
        if problem is None:
            problem = services.create_custom_problem(request.auth, payload.reference_source or "")
        kernel, created = services.create_kernel(
            problem, payload.source, author=request.auth, name=payload.name
        )
        evaluation = None
        if payload.evaluate:
            evaluation = services.request_evaluation(
                kernel, payload.platform, user=request.auth, wait=payload.wait
            )
    except ValidationError as error:
        raise _bad_request(error) from None
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
    try:
        kernel = services.get_kernel_for_user(request.auth, kernel_id)
    except Http404 as error:
        raise HttpError(404, str(error)) from None
    return _kernel_out(request, kernel)


@router.post(
    "/kernels/{int:kernel_id}/evaluations",
    auth=api_role(ENGINEER),
    response={200: EvaluationOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Request an evaluation (the cached one when it exists)",
)
def request_evaluation(request: HttpRequest, kernel_id: int, payload: EvaluationIn) -> dict[str, Any]:
    try:
        kernel = services.get_kernel_for_user(request.auth, kernel_id, write=True)
        evaluation = services.request_evaluation(
            kernel, payload.platform, payload.backend, user=request.auth, wait=payload.wait
        )
    except Http404 as error:
        raise HttpError(404, str(error)) from None
    except PermissionDenied as error:
        raise HttpError(403, str(error)) from None
    except ValidationError as error:
        raise _bad_request(error) from None
    return _evaluation_out(request, evaluation)


@router.get(
    "/evaluations/{int:evaluation_id}",
    auth=api_optional_auth,
    response={200: EvaluationOut, 404: ErrorOut},
    summary="Read an evaluation",
)
def read_evaluation(request: HttpRequest, evaluation_id: int) -> dict[str, Any]:
    try:
        evaluation = services.get_evaluation_for_user(request.auth, evaluation_id)
    except Http404 as error:
        raise HttpError(404, str(error)) from None
    return _evaluation_out(request, evaluation)
