"""HTML pages of the benchmark app: problems, kernels, upload, and the evaluation fragment htmx polls.

Views parse, authorize, call one service and render; the work lives in `benchmark.services`.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.roles import CURATOR, ENGINEER, require_role
from benchmark import review, services
from benchmark.display import (
    breakdown_view,
    correctness_rows,
    is_correctness_only,
    nki_generation_view,
    problem_rows,
    profile_rows,
    profile_tables,
    timeline_figure_html,
)
from benchmark.forms import FlashInferImportForm, KernelUploadForm
from benchmark.models import ErrorKind, Evaluation, Kernel, KernelOrigin, Platform, Review
from benchmark.provenance import evaluation_provenance, generated_by, generating_runs
from benchmark.services.ranking import generated_groups
from engine.platforms.registry import DEFAULT_PLATFORM, FLASHINFER_FORMAT, PREDICTED, platforms_storing

KERNELS_PER_PAGE = 50


@require_GET
def problem_list(request: HttpRequest) -> HttpResponse:
    """One row per problem, one cell per case (mini first), each with its baseline's result on trn1."""
    problems = services.problems_with_baselines(request.user, DEFAULT_PLATFORM)
    return render(
        request,
        "benchmark/problem_list.html",
        {"rows": problem_rows(problems), "can_upload": services.can_create_kernels(request.user)},
    )


@require_GET
def problem_detail(request: HttpRequest, pk: int) -> HttpResponse:
    problem = services.get_problem_for_user(request.user, pk)
    return render(
        request,
        "benchmark/problem_detail.html",
        {
            "problem": problem,
            "peaks": services.theoretical_peaks(problem),
            "other_cases": services.other_cases(request.user, problem),
            "kernel_rows": services.problem_kernel_rows(problem, request.user),
            "platforms": [p.value for p in problem.platforms],  # problem_kernel_rows' columns
            "can_upload": services.can_create_kernels(request.user),
        },
    )


@require_GET
def problem_solution(request: HttpRequest, pk: int) -> HttpResponse:
    """Our best kernel for a Triton problem as a FlashInfer-Bench solution JSON (a download)."""
    problem = services.get_problem_for_user(request.user, pk)
    try:
        solution = services.export_solution(problem, user=request.user)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect(problem)
    response = JsonResponse(solution, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="{solution["name"]}.json"'
    return response


@require_role(ENGINEER)
@require_http_methods(["GET", "POST"])
def flashinfer_import(request: HttpRequest) -> HttpResponse:
    """FlashInfer-Bench definitions, workloads and solutions in, as Triton problems and kernels."""
    form = FlashInferImportForm(request.POST or None, request.FILES or None)
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            summary = services.import_flashinfer(
                services.flashinfer_items_from_texts(form.cleaned_data["files"]),
                platform=form.cleaned_data["platform"], user=request.user, evaluate=form.cleaned_data["evaluate"],
            )
        except ValidationError as error:
            form.add_error(None, error)
        except PermissionDenied as error:  # someone else's problem, or a built-in suite: said on the form
            form.add_error(None, str(error))
            status = 403
        else:
            messages.success(request, f"Imported {summary}.")
            if len(summary.problems) == 1:
                return redirect(summary.problems[0])
            return redirect("benchmark:problems")
    # Warned of before anything is queued: the first platform it imports for, when it cannot evaluate here.
    import_platform = next(iter(platforms_storing(FLASHINFER_FORMAT)), None)
    return render(request, "benchmark/flashinfer_import.html", {"form": form, "import_platform": import_platform},
                  status=status)


@require_GET
def kernel_list(request: HttpRequest) -> HttpResponse:
    origin = request.GET.get("origin", "")
    problem_filter = request.GET.get("problem", "")
    kernels = services.find_kernels(
        request.user, origin=origin, problem_id=int(problem_filter) if problem_filter.isdigit() else None,
        mine=bool(request.GET.get("mine")),
    )
    run_filter = request.GET.get("run", "")
    groups: list[dict[str, Any]] = []
    if run_filter.isdigit():
        kernels = kernels.filter(run_id=int(run_filter))
    elif not origin:
        # Generated kernels, hundreds per run, would flood the list: one line per run, uploads stay visible.
        groups = generated_groups(kernels)
        runs = generating_runs(Kernel(run_id=group["run_id"]) for group in groups)
        for group in groups:
            group["run"] = runs.get(group["run_id"])
        kernels = kernels.exclude(origin=KernelOrigin.GENERATED)
    page = Paginator(kernels, KERNELS_PER_PAGE).get_page(request.GET.get("page"))
    rows = [
        {"kernel": kernel, "latest": {e.platform: e for e in reversed(kernel.current_evaluations)}}
        for kernel in page.object_list
    ]
    return render(
        request,
        "benchmark/kernel_list.html",
        {
            "page": page,
            "rows": rows,
            "groups": groups,
            "run_filter": run_filter,
            "origin": origin,
            "origins": KernelOrigin.choices,
            "can_upload": services.can_create_kernels(request.user),
            **_review_link(request),
        },
    )


def _review_link(request: HttpRequest) -> dict[str, Any]:
    """Curators see a link to the review queue with its length."""
    if not review.can_review(request.user):
        return {"can_review": False}
    return {"can_review": True, "held_count": review.held_evaluations(request.user).count()}


@require_role(ENGINEER)
@require_http_methods(["GET", "POST"])
def kernel_upload(request: HttpRequest) -> HttpResponse:
    problems = services.visible_problems(request.user)
    if request.method == "POST":
        form = KernelUploadForm(request.POST, request.FILES, problems=problems)
        if form.is_valid():
            try:
                kernel, created, evaluation = services.upload_kernel(
                    request.user,
                    kernel_source=form.cleaned_data["kernel_source"],
                    kernel_name=form.cleaned_data["kernel_name"],
                    platform=form.cleaned_data["platform"],
                    problem=form.cleaned_data.get("problem"),
                    reference_source=form.cleaned_data.get("reference_source"),
                    reference_name=form.cleaned_data.get("reference_name", ""),
                    peak_counts=form.cleaned_data.get("peak_counts"),
                )
            except ValidationError as error:
                form.add_error(None, error)
            else:
                if not created:
                    messages.info(request, "This exact source was already uploaded for this problem; showing it.")
                return redirect(f"{kernel.get_absolute_url()}?evaluation={evaluation.pk}")
    else:
        initial: dict[str, Any] = {}
        if request.GET.get("problem", "").isdigit():
            initial["problem"] = problems.filter(pk=int(request.GET["problem"])).first()
        if request.GET.get("platform") in Platform.values:
            initial["platform"] = request.GET["platform"]
        elif initial.get("problem") is not None:
            initial["platform"] = initial["problem"].default_platform  # a Triton problem's GPU
        form = KernelUploadForm(initial=initial, problems=problems)
    return render(request, "benchmark/kernel_upload.html", {"form": form})


@require_GET
def kernel_detail(request: HttpRequest, pk: int) -> HttpResponse:
    kernel = services.get_kernel_for_user(request.user, pk)
    evaluations = services.kernel_evaluations(kernel)
    generated = generated_by([kernel])
    selected = None
    if request.GET.get("evaluation", "").isdigit():
        selected = next((e for e in evaluations if e.pk == int(request.GET["evaluation"])), None)
    if selected is None:
        selected = services.preferred_evaluation(evaluations)
    return render(
        request,
        "benchmark/kernel_detail.html",
        {
            "kernel": kernel,
            "problem": kernel.problem,
            "evaluations": evaluations,
            "generated": generated.get(kernel.pk),
            "source_audience": services.source_audience(kernel),
            "generation": nki_generation_view(kernel),
            "migration": services.migration_of(kernel),
            **_evaluation_context(request, selected, generated),
            # A broken reference's line number is a line of the reference, not of this source.
            "source_error_line": selected.error_line
            if selected is not None and selected.error_kind != ErrorKind.INFRASTRUCTURE_ERROR
            else None,
            # The platforms of the problem's kernel language, and the backends they evaluate it with.
            "platforms": [(p.value, p.label) for p in kernel.problem.platforms],
            "backends": services.backend_options(kernel.problem) if services.can_create_kernels(request.user) else [],
            # What makes a cached result current: the model's version where the default backend predicts.
            "predicted": kernel.problem.default_backend.definition.latency == PREDICTED,
        },
    )


@require_role(ENGINEER)
@require_POST
def kernel_migrate(request: HttpRequest, pk: int) -> HttpResponse:
    """Migrate a legacy neuronxcc.nki kernel to NKI 0.6: a new kernel, evaluated like an upload."""
    kernel = services.get_kernel_for_user(request.user, pk, write=True)
    try:
        result = services.migrate_kernel(request.user, kernel, platform=request.POST.get("platform") or None)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect(kernel)
    if not result.created:
        messages.info(request, "This migrated source was already stored for this problem; showing it.")
    url = result.kernel.get_absolute_url()
    return redirect(f"{url}?evaluation={result.evaluation.pk}" if result.evaluation is not None else url)


def _evaluation_context(
    request: HttpRequest, evaluation: Evaluation | None, generated: dict[int, dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "evaluation": evaluation,
        "provenance": evaluation_provenance(evaluation, generated) if evaluation is not None else {},
        "can_review": review.can_review(request.user),
        "can_evaluate": services.can_create_kernels(request.user),
        "is_stale": evaluation is not None and services.evaluation_is_stale(evaluation),
        "timeline_html": timeline_figure_html(evaluation.timeline) if evaluation and not evaluation.is_pending else "",
        "breakdown": breakdown_view(evaluation.breakdown) if evaluation and not evaluation.is_pending else None,
        "profile_rows": profile_rows(evaluation) if evaluation else [],
        "profile_tables": profile_tables(evaluation) if evaluation else [],
        "correctness_only": evaluation is not None and is_correctness_only(evaluation),
        "correctness_rows": correctness_rows(evaluation) if evaluation else [],
    }


@require_GET
def evaluation_fragment(request: HttpRequest, pk: int) -> HttpResponse:
    """The evaluation panel; while it runs, htmx polls this every second and swaps in the result."""
    evaluation = services.get_evaluation_for_user(request.user, pk)
    return render(request, "benchmark/partials/evaluation.html", _evaluation_context(request, evaluation))


@require_role(ENGINEER)
@require_POST
def kernel_evaluate(request: HttpRequest, pk: int) -> HttpResponse:
    """Evaluate a kernel on a platform: the cached result if there is one, else a new run."""
    kernel = services.get_kernel_for_user(request.user, pk, write=True)
    try:
        evaluation = services.request_evaluation(
            kernel, request.POST.get("platform") or kernel.problem.default_platform, request.POST.get("backend") or None,
            user=request.user,
        )
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect(kernel)
    return redirect(f"{kernel.get_absolute_url()}?evaluation={evaluation.pk}")


@require_role(CURATOR)
@require_GET
def review_list(request: HttpRequest) -> HttpResponse:
    """Curators: results held for review (suspicious, or too large a speedup over the parent in a run)."""
    held = list(review.held_evaluations(request.user))
    generated = generated_by(evaluation.kernel for evaluation in held)
    return render(request, "benchmark/review_list.html", {
        "rows": [{"evaluation": e, "provenance": evaluation_provenance(e, generated)} for e in held],
        "decisions": review.recent_decisions(request.user),
    })


@require_role(CURATOR)
@require_POST
def evaluation_review(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    """Accept or reject a held result, then go back to the page the form was on (the queue by default)."""
    try:
        evaluation = review.decide(request.user, pk, decision, request.POST.get("note", ""))
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        verb = "accepted: it now counts" if decision == Review.ACCEPTED else "rejected: it never counts"
        messages.success(request, f"Evaluation {evaluation.pk} of {evaluation.kernel.display_name} {verb}.")
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure()):
        target = reverse("benchmark:reviews")
    return redirect(target)
