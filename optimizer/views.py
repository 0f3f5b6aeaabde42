"""HTML pages of the optimizer app: the run form, the live run page and its fragments, the runs list.

The run page's live part comes over the websocket (`optimizer.consumers`, fragments rendered from
`optimizer/partials/event.html`); the state panel and the chart are fragments the page re-fetches when
the stream says they changed, so they are always rendered from the database by the same views.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.roles import ENGINEER, require_role
from benchmark import services as benchmark_services
from benchmark.diffing import changed_line_count, side_by_side
from benchmark.models import Kernel
from benchmark.provenance import evaluation_provenance
from memory.services import visible_entries
from optimizer import services
from optimizer.forms import BASELINE, UPLOAD, RunFilterForm, RunForm
from optimizer.models import AgentKind, Candidate, Iteration, Run

RUNS_PER_PAGE = 50


# --- runs list ----------------------------------------------------------------------------------------


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    user = request.user
    form = RunFilterForm(request.GET or None)
    form.is_valid()
    data = getattr(form, "cleaned_data", {}) or {}
    signed_in = user.is_authenticated
    scope = data.get("scope") or ("mine" if signed_in else "public")
    runs = services.visible_runs(user)
    if scope == "mine" and signed_in:
        runs = runs.filter(owner=user)
    elif scope == "team" and signed_in:
        runs = runs.exclude(owner=user).filter(owner__isnull=False)
    else:
        scope = "public"
        runs = runs.filter(is_public=True)
    if data.get("problem"):
        runs = runs.filter(Q(problem__slug__icontains=data["problem"]) | Q(problem__title__icontains=data["problem"]))
    if data.get("status"):
        runs = runs.filter(status=data["status"])
    page = Paginator(runs.select_related("problem", "owner"), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()  # the pager keeps the scope and the filters
    query.pop("page", None)
    query["scope"] = scope
    return render(request, "optimizer/run_list.html", {
        "form": form,
        "scope": scope,
        "query": query.urlencode(),
        "scopes": RunFilterForm.SCOPES if signed_in else (("public", "Public"),),
        "page": page,
        "can_launch": services.can_launch_runs(user),
        "filtered": bool(data.get("problem") or data.get("status")),
    })


@require_GET
def run_badge(request: HttpRequest, pk: int) -> HttpResponse:
    """One run's status badge; unfinished badges re-fetch themselves (the runs list's live status)."""
    return render(request, "optimizer/partials/run_badge.html", {"run": services.get_run_for_user(request.user, pk)})


# --- launching ----------------------------------------------------------------------------------------


@require_role(ENGINEER)
@require_http_methods(["GET", "POST"])
def run_create(request: HttpRequest) -> HttpResponse:
    problems = benchmark_services.visible_problems(request.user).select_related("baseline_kernel").order_by(
        "suite", "slug", "case"
    )
    if request.method == "POST":
        form = RunForm(request.POST, user=request.user, problems=problems)
        if form.is_valid():
            try:
                run = _launch(request, form)
            except ValidationError as error:
                form.add_error(None, error)
            else:
                messages.success(request, f"Run {run.pk} is queued; it starts as soon as a worker is free.")
                return redirect(run.get_absolute_url())
    else:
        initial: dict[str, Any] = {"start": BASELINE}
        if request.GET.get("problem", "").isdigit():
            initial["problem"] = problems.filter(pk=int(request.GET["problem"])).first()
        if request.GET.get("kernel", "").isdigit():
            kernel = Kernel.objects.filter(pk=int(request.GET["kernel"]), author=request.user).first()
            if kernel is not None:
                initial.update(problem=kernel.problem, start=str(kernel.pk))
        form = RunForm(initial=initial, user=request.user, problems=problems)
    return render(request, "optimizer/run_form.html", {
        "form": form, "has_problems": problems.exists(), "estimate": _estimate(form),
    })


def _launch(request: HttpRequest, form: RunForm) -> Run:
    data = form.cleaned_data
    start_kernel = data["start_kernel"]
    if data["start"] == UPLOAD:
        start_kernel, _, _ = benchmark_services.upload_kernel(
            request.user, kernel_source=data["source"], platform=data["platform"], problem=data["problem"],
            kernel_name="uploaded from the run form",
        )
    models = form.role_models() if data["agent"] == AgentKind.LLM else None
    return services.create_run(
        request.user,
        data["problem"],
        start_kernel=start_kernel,
        agent=data["agent"],
        platform=data["platform"],
        backend=data["backend"],
        search=form.search_params(),
        models=models,
        is_public=data["is_public"],
    )


@require_role(ENGINEER)
@require_GET
def run_estimate(request: HttpRequest) -> HttpResponse:
    """The LLM cost estimate under the run form, re-rendered by htmx as the parameters change."""
    form = RunForm(request.GET, user=request.user, problems=benchmark_services.visible_problems(request.user))
    form.is_valid()  # the estimate reads whatever numbers are valid so far
    return render(request, "optimizer/partials/estimate.html", {
        "estimate": _estimate(form), "agent": form.cleaned_data.get("agent"),
    })


def _estimate(form: RunForm) -> dict[str, Any] | None:
    """The LLM cost estimate for a form's valid fields (None for the offline agent or a form not yet bound).

    The form page renders it too, so a form shown again with its errors keeps the estimate of an LLM run.
    """
    data = getattr(form, "cleaned_data", None) or {}
    if data.get("agent") != AgentKind.LLM:
        return None
    search = {name: data[name] for name in RunForm.SEARCH_FIELDS if data.get(name) is not None}
    try:
        return services.estimate_llm_cost(search, form.role_models())
    except ValidationError:
        return None


# --- the run page -------------------------------------------------------------------------------------


def _state_context(request: HttpRequest, run: Run) -> dict[str, Any]:
    iteration = run.iterations.order_by("-index").first()
    beam_ids: list[int] = []
    if iteration is not None:
        beam_ids = list(iteration.next_beam_kernel_ids or iteration.beam_kernel_ids or [])
    latencies = dict(
        Candidate.objects.filter(iteration__run=run, kernel_id__in=beam_ids, latency_ms__isnull=False)
        .values_list("kernel_id", "latency_ms")
    )
    if run.start_latency_ms is not None:
        latencies.setdefault(run.start_kernel_id, run.start_latency_ms)
    kernels = Kernel.objects.in_bulk(beam_ids)
    beam = [
        {"kernel": kernels[pk], "latency_ms": latencies.get(pk),
         "speedup": (run.start_latency_ms / latencies[pk]) if run.start_latency_ms and latencies.get(pk) else None}
        for pk in beam_ids if pk in kernels
    ]
    return {
        "run": run,
        "search": run.config.get("search", {}),
        "beam": beam,
        "iteration": iteration,
        "can_write": services.can_write_run(request.user, run),
    }


@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = services.get_run_for_user(request.user, pk)
    run = Run.objects.select_related("problem", "owner", "start_kernel", "best_kernel").get(pk=run.pk)
    context = _state_context(request, run)
    context.update(
        models=run.config.get("models", {}),
        chart=_chart_html(run),
        lineage=list(reversed(services.run_lineage(run))) if run.is_finished else [],
        memory_entries=list(visible_entries(request.user).filter(source_run_id=run.pk).order_by("-speedup")[:50]),
        memory_count=_memory_count(run),
        evaluation_versions=services.evaluation_versions(run),
        ws_url=f"/ws/runs/{run.pk}/?format=html&after=0",
    )
    return render(request, "optimizer/run_detail.html", context)


def _memory_count(run: Run) -> int:
    from memory.models import MemoryEntry

    return MemoryEntry.objects.filter(source_run_id=run.pk).count()


@require_GET
def run_state(request: HttpRequest, pk: int) -> HttpResponse:
    run = services.get_run_for_user(request.user, pk)
    return render(request, "optimizer/partials/run_state.html", _state_context(request, run))


@require_GET
def run_chart(request: HttpRequest, pk: int) -> HttpResponse:
    run = services.get_run_for_user(request.user, pk)
    return render(request, "optimizer/partials/run_chart.html", {"run": run, "chart": _chart_html(run)})


def chart_points(run: Run) -> list[dict[str, Any]]:
    """Best latency and peak fraction after each finished iteration (iteration 0: the starting kernel)."""
    points = []
    if run.start_latency_ms is not None:
        points.append({"iteration": 0, "latency_ms": run.start_latency_ms, "peak_fraction": None})
    for index, latency, peak in (
        Iteration.objects.filter(run=run, finished__isnull=False).order_by("index")
        .values_list("index", "best_latency_ms", "best_peak_fraction")
    ):
        points.append({"iteration": index, "latency_ms": latency, "peak_fraction": peak})
    return points


def _chart_html(run: Run) -> str:
    points = chart_points(run)
    if len(points) < 2:
        return ""
    import plotly.graph_objects as go

    xs = [p["iteration"] for p in points]
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=xs, y=[p["latency_ms"] for p in points], name="best latency (ms)",
                                mode="lines+markers"))
    figure.add_trace(go.Scatter(x=xs, y=[None if p["peak_fraction"] is None else 100 * p["peak_fraction"]
                                         for p in points],
                                name="peak fraction (%)", mode="lines+markers", yaxis="y2"))
    figure.update_layout(
        height=300, margin={"l": 60, "r": 60, "t": 10, "b": 40},
        xaxis={"title": "iteration", "dtick": 1},
        yaxis={"title": "best latency (ms)", "rangemode": "tozero"},
        yaxis2={"title": "peak fraction (%)", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25},
    )
    # A fresh div id per render: htmx re-applies the attributes of an element whose id survives a swap,
    # which would strip the classes Plotly adds when it draws (and so its layout CSS).
    return figure.to_html(include_plotlyjs=False, full_html=False, config={"displaylogo": False, "responsive": True})


@require_GET
def iteration_fragment(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """A finished iteration from the database: its plans, kernels, evaluations and speedups.

    The stream builds the section live; once the iteration finishes the page swaps in this version,
    which also knows what the stream cannot say (speedups over the parent, kernels that repeated an
    already evaluated source and so got no evaluation event of their own).
    """
    run = services.get_run_for_user(request.user, pk)
    iteration = Iteration.objects.filter(run=run, index=index).first()
    if iteration is None:
        raise Http404(f"run {pk} has no iteration {index}")
    plans: dict[str, dict[str, Any]] = {}
    for candidate in iteration.candidates.select_related("parent_kernel").order_by("plan_index", "sample_index", "id"):
        plan_key = candidate.key.rsplit(".", 1)[0]
        plan = plans.setdefault(plan_key, {"key": plan_key, "text": candidate.plan, "parent": candidate.parent_kernel,
                                           "candidates": []})
        plan["candidates"].append(candidate)
    return render(request, "optimizer/partials/iteration.html", {
        "run": run, "iteration": iteration, "plans": list(plans.values()),
        "evaluation_versions": services.evaluation_versions(run, iteration=index),
    })


@require_POST
def run_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    actions = {"cancel": services.cancel_run, "pause": services.pause_run, "resume": services.resume_run}
    if action not in actions:
        raise Http404(f"no run action {action!r}")
    run = services.get_run_for_user(request.user, pk, write=True)
    run = actions[action](run, request.user)
    if request.htmx:
        return render(request, "optimizer/partials/run_state.html", _state_context(request, run))
    messages.info(request, f"Run {run.pk}: {action} requested.")
    return redirect(run.get_absolute_url())


# --- candidates and diffs -----------------------------------------------------------------------------


@require_GET
def candidate_detail(request: HttpRequest, pk: int, key: str) -> HttpResponse:
    run = services.get_run_for_user(request.user, pk)
    candidate = (
        Candidate.objects.filter(iteration__run=run, key=key)
        .select_related("iteration", "kernel", "parent_kernel", "evaluation", "evaluation__kernel").first()
    )
    if candidate is None:
        raise Http404(f"run {pk} has no candidate {key!r} (yet)")
    return _diff_page(request, run, candidate.kernel, candidate.parent_kernel, candidate=candidate)


@require_GET
def kernel_diff(request: HttpRequest, pk: int, kernel_pk: int) -> HttpResponse:
    """Any kernel of the run (one it wrote, or its starting kernel) against its parent."""
    run = services.get_run_for_user(request.user, pk)
    kernel = Kernel.objects.filter(pk=kernel_pk).select_related("parent").first()
    if kernel is None or (kernel.run_id != run.pk and kernel.pk != run.start_kernel_id):
        raise Http404(f"kernel {kernel_pk} was not written by run {pk}")
    candidate = (
        Candidate.objects.filter(iteration__run=run, kernel=kernel)
        .select_related("iteration", "evaluation", "evaluation__kernel").first()
    )
    return _diff_page(request, run, kernel, kernel.parent, candidate=candidate)


def _diff_page(
    request: HttpRequest, run: Run, kernel: Kernel | None, parent: Kernel | None, *, candidate: Candidate | None
) -> HttpResponse:
    rows = side_by_side(parent.source if parent else "", kernel.source if kernel else "")
    evaluation = candidate.evaluation if candidate is not None else None
    return render(request, "optimizer/kernel_diff.html", {
        "run": run, "kernel": kernel, "parent": parent, "candidate": candidate,
        "rows": rows, "changed": changed_line_count(rows),
        # Where the candidate's number comes from: backend and versions, and the agent call and model.
        "provenance": evaluation_provenance(evaluation) if evaluation is not None else None,
    })
