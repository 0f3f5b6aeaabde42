"""HTML pages of the optimizer app: the run form, the live run page and its fragments, the runs list.

The run page's live part comes over the websocket (`optimizer.consumers`, fragments rendered from
`optimizer/partials/event.html`); the state panel and the chart are fragments the page re-fetches when
the stream says they changed, so they are always rendered from the database by the same views. Views
parse, authorize, call `optimizer.services` and render; the chart's figure comes from `optimizer.display`.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from accounts.roles import ENGINEER, require_role
from benchmark.diffing import changed_line_count, side_by_side
from benchmark.models import Kernel
from benchmark.provenance import evaluation_provenance
from benchmark.services import visible_kernels
from engine.search.budget import BUDGET_FIELDS
from engine.search.budget import progress as budget_progress
from optimizer import services, tree
from optimizer.display import run_chart_html
from optimizer.forms import BASELINE, UPLOAD, RunFilterForm, RunForm
from optimizer.models import AgentKind, Candidate, Run
from optimizer.run_links import run_links

RUNS_PER_PAGE = 50


# --- runs list ----------------------------------------------------------------------------------------


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    user = request.user
    form = RunFilterForm(request.GET or None)
    form.is_valid()
    data = getattr(form, "cleaned_data", {}) or {}
    scope = services.run_scope(user, data.get("scope") or "")
    runs = services.find_runs(user, scope=scope, status=data.get("status") or "", text=data.get("problem") or "")
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()  # the pager keeps the scope and the filters
    query.pop("page", None)
    query["scope"] = scope
    return render(request, "optimizer/run_list.html", {
        "form": form,
        "scope": scope,
        "query": query.urlencode(),
        "scopes": RunFilterForm.SCOPES if user.is_authenticated else (("public", "Public"),),
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
    problems = services.launchable_problems(request.user)
    if request.method == "POST":
        form = RunForm(request.POST, user=request.user, problems=problems)
        if form.is_valid():
            try:
                run = services.create_run(request.user, **form.run_arguments())
            except ValidationError as error:
                form.add_error(None, error)
            else:
                # Not "is queued": the message stays on the page while the run starts, pauses and ends; the
                # status panel below follows it live.
                messages.success(request, f"Run {run.pk} launched. Its status below updates live.")
                return redirect(run.get_absolute_url())
    else:
        initial: dict[str, Any] = {"start": BASELINE}
        if request.GET.get("problem", "").isdigit():
            initial["problem"] = problems.filter(pk=int(request.GET["problem"])).first()
        if request.GET.get("kernel", "").isdigit():
            kernel = services.own_kernels(request.user).filter(pk=int(request.GET["kernel"])).first()
            if kernel is not None:
                initial.update(problem=kernel.problem, start=str(kernel.pk))
            else:  # "Optimize this kernel" on someone else's kernel: start from a copy of its source
                theirs = visible_kernels(request.user).filter(pk=int(request.GET["kernel"]), problem__in=problems).first()
                if theirs is not None:
                    initial.update(problem=theirs.problem, start=UPLOAD, source=theirs.source)
        form = RunForm(initial=initial, user=request.user, problems=problems)
    return render(request, "optimizer/run_form.html", {
        "form": form, "has_problems": problems.exists(), "estimate": _estimate(form),
    })


@require_role(ENGINEER)
@require_GET
def run_estimate(request: HttpRequest) -> HttpResponse:
    """The LLM cost estimate under the run form, re-rendered by htmx as the parameters change."""
    form = RunForm(request.GET, user=request.user, problems=services.launchable_problems(request.user))
    form.is_valid()  # the estimate reads whatever numbers are valid so far
    return render(request, "optimizer/partials/estimate.html", {
        "estimate": _estimate(form), "agent": form.cleaned_data.get("agent"),
    })


def _estimate(form: RunForm) -> dict[str, Any] | None:
    """The LLM cost estimate for a form's valid fields (None for the offline agent or a form not yet bound).

    The form page renders it too, so a form shown again with its errors keeps the estimate of an LLM run.
    """
    data = getattr(form, "cleaned_data", None) or {}
    search = {name: data[name] for name in RunForm.SEARCH_FIELDS if data.get(name) not in (None, "")}
    agent = data.get("agent") or AgentKind.OFFLINE
    try:
        budget = services.parse_budget({name: data.get(name) for name in RunForm.BUDGET_FIELDS})
        notes = services.check_budget(agent, search, form.role_models(), budget) if data else []
        if agent != AgentKind.LLM:
            return {"budget_notes": notes} if notes else None
        return {**services.estimate_llm_cost(search, form.role_models()), "budget_notes": notes}
    except ValidationError:
        return None


# --- the run page -------------------------------------------------------------------------------------


def _state_context(request: HttpRequest, run: Run) -> dict[str, Any]:
    iteration, beam = services.current_beam(run)
    # A budget-stopped run that cannot go on (a campaign's) says why, where the continue form would be.
    refusal = services.continue_refusal(run) if run.status == "stopped" else None
    return {
        "run": run,
        "search": run.config.get("search", {}),
        "beam": beam,
        "iteration": iteration,
        "can_write": services.can_write_run(request.user, run),
        "budget_rows": budget_progress(run.budget, run.usage),
        "savings": services.evaluation_savings(run),
        "continue_rows": _continue_rows(run) if run.status == "stopped" and not refusal else [],
        "continue_refusal": refusal if run.stopped_by_budget else None,
    }


def _continue_rows(run: Run, posted: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The "continue with more budget" form's fields: each cap prefilled with the old one (or what was posted,
    when the form comes back with an error), and what the run has spent of it."""
    usage = run.usage
    rows = []
    for name, (label, unit) in BUDGET_FIELDS.items():
        old = getattr(run, name)
        text = posted[name] if posted is not None else ("" if old is None else f"{old:g}")
        rows.append({"name": name, "label": label, "unit": unit, "text": text, "spent": usage.used(name)})
    return rows


@require_GET
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = services.get_run_with_kernels(request.user, pk)
    memory_entries, memory_count = services.run_memory(request.user, run)
    context = _state_context(request, run)
    context.update(
        models=run.config.get("models", {}),
        chart=run_chart_html(services.chart_points(run)),
        lineage=list(reversed(services.run_lineage(run))) if run.is_finished else [],
        memory_entries=memory_entries,
        memory_count=memory_count,
        evaluation_versions=services.evaluation_versions(run),
        ws_url=f"/ws/runs/{run.pk}/?format=html&after=0",
        run_links=run_links(run, request.user),  # e.g. its campaign (apps above the optimizer register them)
    )
    return render(request, "optimizer/run_detail.html", context)


@require_GET
def run_memory(request: HttpRequest, pk: int) -> HttpResponse:
    """The memory panel, re-fetched when a memory.added event arrives."""
    run = services.get_run_for_user(request.user, pk)
    memory_entries, memory_count = services.run_memory(request.user, run)
    return render(request, "optimizer/partials/run_memory.html",
                  {"run": run, "memory_entries": memory_entries, "memory_count": memory_count})


@never_cache
@require_GET
def run_queue(request: HttpRequest, pk: int) -> JsonResponse:
    """Where the run's kernels waiting for their evaluation stand, as JSON by kernel sha (?sha=..., those the
    page shows as waiting): {"state": "queued"|"running", "ahead": n, "elapsed_s": s}. The page polls it while
    any kernel waits, so a wait reads "queued (n ahead)" and its time grows instead of a frozen "written"."""
    run = services.get_run_for_user(request.user, pk)
    places = services.run_queue(run, request.GET.getlist("sha"))
    return JsonResponse({"finished": run.is_finished,
                         "kernels": {sha: place.as_dict() for sha, place in places.items()}})


@require_GET
def run_state(request: HttpRequest, pk: int) -> HttpResponse:
    run = services.get_run_for_user(request.user, pk)
    return render(request, "optimizer/partials/run_state.html", _state_context(request, run))


@require_GET
def run_chart(request: HttpRequest, pk: int) -> HttpResponse:
    run = services.get_run_for_user(request.user, pk)
    return render(request, "optimizer/partials/run_chart.html",
                  {"run": run, "chart": run_chart_html(services.chart_points(run))})


@require_GET
def iteration_fragment(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """A finished iteration from the database: its plans, kernels, evaluations and speedups.

    The stream builds the section live; once the iteration finishes the page swaps in this version,
    which also knows what the stream cannot say (speedups over the parent, kernels that repeated an
    already evaluated source and so got no evaluation event of their own).
    """
    run = services.get_run_for_user(request.user, pk)
    iteration, plans = services.iteration_plans(run, index)
    return render(request, "optimizer/partials/iteration.html", {
        "run": run, "iteration": iteration, "plans": plans,
        "evaluation_versions": services.evaluation_versions(run, iteration=index),
    })


@require_POST
def run_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    actions = {"cancel": services.cancel_run, "pause": services.pause_run, "resume": services.resume_run}
    if action not in actions:
        raise Http404(f"no run action {action!r}")
    run = services.get_run_for_user(request.user, pk, write=True)
    try:
        run = actions[action](run, request.user)
    except ValidationError as error:  # e.g. resuming past the runs quota: said on the reloaded page
        messages.error(request, f"Run {run.pk}: {' '.join(error.messages)}")
        return HttpResponseClientRefresh() if request.htmx else redirect(run.get_absolute_url())
    if request.htmx:
        return render(request, "optimizer/partials/run_state.html", _state_context(request, run))
    messages.info(request, f"Run {run.pk}: {action} requested.")
    return redirect(run.get_absolute_url())


@require_POST
def run_continue(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page's "continue with more budget" form: the four caps, blank for none."""
    run = services.get_run_for_user(request.user, pk, write=True)
    budget = {name: request.POST.get(name, "").strip() for name in BUDGET_FIELDS}
    try:
        run = services.continue_run(run, request.user, budget)
    except ValidationError as error:
        if request.htmx:
            return render(request, "optimizer/partials/run_state.html",
                          {**_state_context(request, run), "continue_error": " ".join(error.messages),
                           "continue_rows": [] if services.continue_refusal(run) else _continue_rows(run, budget)})
        messages.error(request, f"Run {run.pk}: {' '.join(error.messages)}")
        return redirect(run.get_absolute_url())
    if request.htmx:
        return render(request, "optimizer/partials/run_state.html", _state_context(request, run))
    messages.info(request, f"Run {run.pk}: continued with more budget.")
    return redirect(run.get_absolute_url())


# --- the search tree ----------------------------------------------------------------------------------


@require_GET
def run_tree(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's search tree (every kernel under its parent), loaded when the panel is opened."""
    run = services.get_run_for_user(request.user, pk)
    root, counts = tree.run_tree(run)
    return render(request, "optimizer/partials/tree.html", {
        "run": run, "root": root, "total": sum(counts.values()),
        "legend": [(outcome, label, counts[outcome]) for outcome, label in tree.OUTCOMES.items()],
    })


@require_GET
def tree_node(request: HttpRequest, pk: int, key: str) -> HttpResponse:
    """One node of the tree: plan, memory shown to the Planner, agent calls, evaluation, diff against its parent."""
    run = services.get_run_for_user(request.user, pk)
    return render(request, "optimizer/partials/tree_node_detail.html",
                  {"run": run, **tree.tree_node(request.user, run, key)})


# --- candidates and diffs -----------------------------------------------------------------------------


@require_GET
def candidate_detail(request: HttpRequest, pk: int, key: str) -> HttpResponse:
    run = services.get_run_for_user(request.user, pk)
    candidate = services.get_candidate(run, key)
    return _diff_page(request, run, candidate.kernel, candidate.parent_kernel, candidate=candidate)


@require_GET
def kernel_diff(request: HttpRequest, pk: int, kernel_pk: int) -> HttpResponse:
    """Any kernel of the run (one it wrote, or its starting kernel) against its parent."""
    run = services.get_run_for_user(request.user, pk)
    kernel, candidate = services.get_run_kernel(run, kernel_pk)
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
