"""What can be done to optimization runs: create, read, cancel, pause, resume, continue a run a budget
stopped, and read their events.

The web pages, the API and the management commands call these; the run worker (optimizer.worker)
does the driving. State changes are conditional UPDATEs on the status, so a request racing the worker
(cancel while it claims the run, say) never leaves a run in two states. A running run cannot be stopped
from here directly: the request is a flag the worker honours between two search steps.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Avg, Count, Q, QuerySet
from django.http import Http404
from django.utils import timezone

from accounts.roles import can_write_owned, is_engineer, visible_owned
from benchmark import services as benchmark_services
from benchmark.models import Backend, Evaluation, Kernel, Platform, Problem
from benchmark.platforms import get_definition
from benchmark.services import backend_version
from benchmark.services.evaluations import backend_unavailable
from memory.models import MemoryEntry
from memory.services import visible_entries
from optimizer import conf
from optimizer.events import events_after, record_events
from optimizer.models import (
    AgentCall,
    AgentKind,
    Candidate,
    Iteration,
    IterationStatus,
    Run,
    RunEvent,
    RunStatus,
)
from optimizer.search import SearchConfig
from optimizer.search.budget import BUDGET_FIELDS, Budget, launch_notes
from optimizer.search.state import reopen_stopped, stopped_mid_iteration

__all__ = [
    "can_launch_runs",
    "visible_runs",
    "find_runs",
    "get_run_for_user",
    "create_run",
    "cancel_run",
    "pause_run",
    "resume_run",
    "continue_run",
    "events_after",
]


# --- access -------------------------------------------------------------------------------------------


def can_launch_runs(user: Any) -> bool:
    return is_engineer(user)


def visible_runs(user: Any) -> QuerySet[Run]:
    """Public runs for everyone; private ones only for their owner (and admins)."""
    return visible_owned(user, Run.objects.select_related("problem", "owner"))


def can_write_run(user: Any, run: Run) -> bool:
    return can_write_owned(user, run)


def get_run_for_user(user: Any, pk: int, *, write: bool = False) -> Run:
    """The run if `user` may see it (404 otherwise, so private runs do not leak), and, with write=True,
    may also cancel/pause/resume it (403 otherwise)."""
    try:
        run = visible_runs(user).get(pk=pk)
    except Run.DoesNotExist:
        raise Http404(f"no run with id {pk}") from None
    if write and not can_write_run(user, run):
        raise PermissionDenied(f"only the owner of run {pk} can change it")
    return run


RUN_SCOPES = ("mine", "team", "public")


def run_scope(user: Any, requested: str = "") -> str:
    """The scope the runs list shows: the one asked for, else the signed-in user's own runs; anonymous
    visitors see the public ones whatever they ask for."""
    if user is None or not user.is_authenticated:
        return "public"
    return requested if requested in RUN_SCOPES else "mine"


def find_runs(user: Any, *, scope: str = "", status: str = "", problem: str = "", text: str = "") -> QuerySet[Run]:
    """The runs `user` may see, narrowed by what the runs list and GET /api/runs filter on.

    scope: "" (all visible), "mine", "team" (other people's) or "public"; mine and team are empty for
    anonymous callers. problem: a problem id or slug; text: a part of the problem's slug or title.
    """
    runs = visible_runs(user)
    signed_in = user is not None and user.is_authenticated
    if scope == "mine":
        runs = runs.filter(owner=user) if signed_in else runs.none()
    elif scope == "team":
        runs = runs.exclude(owner=user).filter(owner__isnull=False) if signed_in else runs.none()
    elif scope == "public":
        runs = runs.filter(is_public=True)
    elif scope:
        raise ValidationError(f"unknown scope {scope!r}; expected one of {', '.join(RUN_SCOPES)}")
    if status:
        if status not in RunStatus.values:
            raise ValidationError(f"unknown status {status!r}; expected one of {', '.join(RunStatus.values)}")
        runs = runs.filter(status=status)
    if problem:
        runs = runs.filter(problem_id=int(problem)) if problem.isdigit() else runs.filter(problem__slug=problem)
    if text:
        runs = runs.filter(Q(problem__slug__icontains=text) | Q(problem__title__icontains=text))
    return runs


# --- creating -----------------------------------------------------------------------------------------


# The one set of search defaults (issue 20): the run form, POST /api/runs and `manage.py optimize` all fill unset
# fields from here. AccelOpt's breadth per iteration, fewer iterations, so a first run finishes in minutes;
# SearchConfig's own defaults (the paper's 15 iterations, beam 6) are what a campaign asks for explicitly.
RUN_SEARCH_DEFAULTS: dict[str, int] = {
    "iterations": 4,
    "beam_width": 2,
    "plans_per_candidate": 4,
    "samples_per_plan": 1,
    "memory_size": SearchConfig.memory_size,
    "seed": 0,
}


def llm_unavailable(models: dict[str, str] | None = None) -> str | None:
    """Why the LLM agent cannot run with these models (None: it can): a role without an endpoint and model.
    The run form shows the agent disabled with this reason, and create_run refuses with it."""
    roles = conf.llm_roles(models)
    missing = [role for role in conf.ROLES if role not in roles]
    if not missing:
        return None
    return (f"the LLM agent needs a model for every role; none configured for {', '.join(missing)} "
            "(set ACCELOPT_LLM_BASE_URL and ACCELOPT_LLM_MODEL, or use the offline agent)")


def _search_config(params: dict[str, Any] | None) -> SearchConfig:
    try:
        return SearchConfig.from_dict({**RUN_SEARCH_DEFAULTS, **dict(params or {})})
    except (TypeError, ValueError) as error:
        raise ValidationError(f"invalid search parameters: {error}") from None


def create_run(
    user: Any,
    problem: Problem,
    *,
    start_kernel: Kernel | None = None,
    agent: str = AgentKind.OFFLINE,
    platform: str | None = None,
    backend: str | None = None,
    search: dict[str, Any] | None = None,
    models: dict[str, str] | None = None,
    is_public: bool = False,
    start_source: str | None = None,
    start_name: str = "",
    budget: dict[str, Any] | None = None,
) -> Run:
    """Queue a run: the one way a run is launched, from the run form, the API and `manage.py optimize`.

    The run starts from `start_kernel`, or from a new kernel with the source `start_source` (named
    `start_name`), or else from the problem's baseline. `search` holds SearchConfig fields (unset ones take
    AccelOpt-like defaults), `models` a model name per role overriding the configured one (LLM agent only),
    `budget` caps by BUDGET_FIELDS name (checked against the estimate: the notes go into the run's config).
    `user` None is a management command: the run has no owner.
    """
    if user is not None and user.is_authenticated and not can_launch_runs(user):
        raise PermissionDenied("only engineers can launch optimization runs")
    if agent not in AgentKind.values:
        raise ValidationError(f"unknown agent {agent!r}; expected one of {', '.join(AgentKind.values)}")
    # By default the problem's own platform (trn1 for NKI, a GPU for Triton) and that platform's backend.
    platform = platform or problem.default_platform
    if platform not in Platform.values:
        raise ValidationError(f"unknown platform {platform!r}; expected one of {', '.join(Platform.values)}")
    benchmark_services.check_platform_for(problem, platform)
    backend = backend or get_definition(platform).default_backend
    if backend not in Backend.values:
        raise ValidationError(f"unknown backend {backend!r}; expected one of {', '.join(Backend.values)}")
    if backend not in get_definition(platform).backends:
        supported = ", ".join(b.value for b in get_definition(platform).backends)
        raise ValidationError(f"backend {backend!r} does not evaluate {platform} kernels; expected one of {supported}")
    unavailable = backend_unavailable(backend, platform)  # e.g. the neuron backend with no Neuron device here
    if unavailable:
        raise ValidationError(unavailable)
    if start_source is not None:
        if start_kernel is not None:
            raise ValidationError("give the starting kernel or its source, not both")
        # Stored before the search and model checks below, as the run form always did: a run refused there
        # still leaves the new kernel with its author.
        start_kernel = _store_start_kernel(user, problem, start_source, platform, start_name)
    start_kernel = start_kernel or getattr(problem, "baseline_kernel", None)
    if start_kernel is None:
        raise ValidationError(f"problem {problem.address} has no baseline kernel; choose a starting kernel")
    if start_kernel.problem_id != problem.pk:
        raise ValidationError(
            f"kernel {start_kernel.pk} belongs to problem {start_kernel.problem.address}, not {problem.address}"
        )
    search = dict(search or {})
    if agent == AgentKind.OFFLINE:
        # The offline agent repairs nothing; a Fixer round would only record "unusable" replies.
        search.setdefault("fix_attempts", 0)
    if backend == Backend.TRITON_INTERPRETER:
        # The interpreter measures no latency: the search ranks by correctness (optimizer.search.unmeasured).
        search.setdefault("correctness_only", True)
    config = _search_config(search)
    caps = parse_budget(budget)
    role_models: dict[str, Any] = {}
    if agent == AgentKind.LLM:
        unavailable = llm_unavailable(models)
        if unavailable:
            raise ValidationError(unavailable)
        role_models = conf.public_role_settings(conf.llm_roles(models))
    with transaction.atomic():
        run = Run.objects.create(
            problem=problem,
            start_kernel=start_kernel,
            owner=user if user is not None and user.is_authenticated else None,
            is_public=is_public,
            agent=agent,
            platform=platform,
            backend=backend,
            config={"search": config.to_dict(), "models": role_models,
                    "budget_notes": check_budget(agent, search, models, caps)},
            **caps.to_dict(),
        )
        record_events(run.pk, [("run.queued", {"agent": agent, "platform": platform, "search": config.to_dict()})])
    return run


def parse_budget(budget: dict[str, Any] | None) -> Budget:
    """Budget caps from a form, the API or a command (None and "" are no cap), or a ValidationError."""
    try:
        return Budget.from_dict(budget)
    except ValueError as error:
        raise ValidationError(f"invalid budget: {error}") from None


def check_budget(agent: str, search: dict[str, Any] | None, models: dict[str, str] | None, budget: Budget) -> list[str]:
    """The budget against the run's upper-bound estimate: notes for the run form and the run (launch_notes)."""
    if budget.empty:
        return []
    search = dict(search or {})
    if agent == AgentKind.OFFLINE:
        search.setdefault("fix_attempts", 0)  # as create_run sets it: the offline agent repairs nothing
    config = _search_config(search)
    calls = max_agent_calls(search)
    kwargs: dict[str, Any] = {}
    if agent == AgentKind.LLM:
        estimate = estimate_llm_cost(search, models)
        prices = conf.price_table()
        unpriced = sorted({r["model"] for r in estimate["roles"].values() if r["model"] and r["model"] not in prices})
        kwargs = {"estimate_tokens": estimate["total_tokens"], "estimate_cost_usd": estimate["total_cost_usd"],
                  "unpriced_models": tuple(unpriced)}
    return launch_notes(budget, llm=agent == AgentKind.LLM,
                        max_evaluations=1 + calls["executor"] * (1 + config.fix_attempts), **kwargs)


def _store_start_kernel(user: Any, problem: Problem, source: str, platform: str, name: str) -> Kernel:
    """A new kernel to start from. A person's is an upload like any other (theirs, evaluated at once);
    a command's (no user) is only stored, and the run evaluates it."""
    if user is not None and user.is_authenticated:
        kernel, _, _ = benchmark_services.upload_kernel(
            user, kernel_source=source, platform=platform, problem=problem, kernel_name=name
        )
        return kernel
    kernel, _ = benchmark_services.create_kernel(problem, source, name=name)
    return kernel


def launchable_problems(user: Any) -> QuerySet[Problem]:
    """The problems the run form offers: those the user may see, in address order."""
    return benchmark_services.visible_problems(user).select_related("baseline_kernel").order_by("suite", "slug", "case")


def own_kernels(user: Any) -> QuerySet[Kernel]:
    """The kernels a user may choose to start a run from, besides a problem's baseline: their own."""
    if user is None or not user.is_authenticated:
        return Kernel.objects.none()
    return Kernel.objects.filter(author=user)


# --- lifecycle ----------------------------------------------------------------------------------------


def _reload(run: Run) -> Run:
    run.refresh_from_db()
    return run


def cancel_run(run: Run, user: Any = None) -> Run:
    """Stop a run for good. Queued or paused: at once. Running: the worker stops before its next step."""
    now = timezone.now()
    with transaction.atomic():
        stopped = Run.objects.filter(pk=run.pk, status__in=[RunStatus.QUEUED, RunStatus.PAUSED]).update(
            status=RunStatus.CANCELLED, cancel_requested=True, finished=now, claimed_by=""
        )
        if stopped:
            record_events(run.pk, [("run.cancelled", {"by": _who(user)})])
        else:
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(cancel_requested=True)
    return _reload(run)


def pause_run(run: Run, user: Any = None) -> Run:
    """Hold a run; resume_run() continues it from its last checkpoint."""
    with transaction.atomic():
        held = Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.PAUSED, pause_requested=False
        )
        if held:
            record_events(run.pk, [("run.paused", {"by": _who(user), "iteration": run.current_iteration})])
        else:
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(pause_requested=True)
    return _reload(run)


def resume_run(run: Run, user: Any = None) -> Run:
    """Queue a paused run again (a pause still pending on a running run is withdrawn)."""
    with transaction.atomic():
        queued = Run.objects.filter(pk=run.pk, status=RunStatus.PAUSED).update(
            status=RunStatus.QUEUED, pause_requested=False, claimed_by=""
        )
        if queued:
            record_events(run.pk, [("run.resumed", {"by": _who(user), "iteration": run.current_iteration})])
        else:
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(pause_requested=False)
    return _reload(run)


def continue_refusal(run: Run) -> str | None:
    """Why `run` cannot be continued with more budget (None: it can); the run page offers the form only then."""
    if run.status != RunStatus.STOPPED or not run.checkpoint:
        return (f"run {run.pk} is {run.get_status_display().lower()}, not stopped by a budget: "
                "only a run a budget stopped can be continued with more")
    # By the reverse name only: the optimizer does not import campaigns (the app above it).
    if Run.objects.filter(pk=run.pk, campaign_entry__isnull=False).exists():
        return (f"run {run.pk} belongs to a campaign: its budget is a share of the campaign's, "
                "so it cannot be continued on its own")
    return None


def continue_run(run: Run, user: Any = None, budget: dict[str, Any] | None = None) -> Run:
    """Queue a run a budget stopped again, with new caps (`budget` by BUDGET_FIELDS name; blank is no cap).

    The search goes on from its checkpoint where it stopped (search.state.reopen_stopped): same kernels, beam
    and memory, nothing evaluated twice, and what it spent so far still counts, so each cap must be above it.
    A campaign's run is refused: its caps are its share of the campaign's budget."""
    refusal = continue_refusal(run)
    if refusal:
        raise ValidationError(refusal)
    caps, usage = parse_budget(budget), run.usage
    for name, (label, unit) in BUDGET_FIELDS.items():
        limit = getattr(caps, name)
        if limit is not None and limit <= usage.used(name):
            raise ValidationError(f"invalid budget: {name} ({label}) must be above what the run already spent "
                                  f"({usage.used(name):g} {unit}); leave it empty for no cap")
    checkpoint = reopen_stopped(run.checkpoint)
    with transaction.atomic():
        if not Run.objects.filter(pk=run.pk, status=RunStatus.STOPPED).update(
            status=RunStatus.QUEUED, checkpoint=checkpoint, stopped_by_budget="", error_message="", finished=None,
            claimed_by="", cancel_requested=False, pause_requested=False, **caps.to_dict(),
        ):
            raise ValidationError(f"run {run.pk} changed meanwhile; reload it and try again")
        if stopped_mid_iteration(checkpoint):  # the stopped iteration is open again: it chooses its beam anew
            Iteration.objects.filter(run=run, index=checkpoint["iteration"]).update(
                status=IterationStatus.RUNNING, finished=None, next_beam_kernel_ids=[])
        spent = {name: usage.used(name) for name in BUDGET_FIELDS}
        record_events(run.pk, [("run.continued", {
            "by": _who(user), "iteration": run.current_iteration, "stopped_by": run.stopped_by_budget,
            "budget": caps.to_dict(), "spent": spent,
            "message": f"with more budget from iteration {run.current_iteration}, phase {checkpoint['phase']}",
        })])
    return _reload(run)


def _who(user: Any) -> str:
    return user.get_username() if user is not None and user.is_authenticated else ""


def event_page(run: Run, after: int = 0, limit: int = 100) -> tuple[list[RunEvent], int | None]:
    """One page of events after seq `after`, and the seq to ask for next (None when there is no more)."""
    events = events_after(run, after, limit=limit + 1)
    more = len(events) > limit
    events = events[:limit]
    return events, (events[-1].seq if more else None)


# --- what the run pages need --------------------------------------------------------------------------


def lineage(kernel: Kernel | None, stop_at: Kernel | None = None, limit: int = 200) -> list[Kernel]:
    """`kernel`, its parent, its parent's parent, ... up to `stop_at` (included) or a kernel with none."""
    chain: list[Kernel] = []
    seen: set[int] = set()
    while kernel is not None and kernel.pk not in seen and len(chain) < limit:
        chain.append(kernel)
        seen.add(kernel.pk)
        if stop_at is not None and kernel.pk == stop_at.pk:
            break
        kernel = kernel.parent
    return chain


def run_lineage(run: Run) -> list[Kernel]:
    """The best kernel back to the starting one, newest first (empty before the first evaluation)."""
    return lineage(run.best_kernel, stop_at=run.start_kernel)


def get_run_with_kernels(user: Any, pk: int) -> Run:
    """get_run_for_user, with the starting and best kernels the run page shows read in the same query."""
    run = get_run_for_user(user, pk)
    return Run.objects.select_related("problem", "owner", "start_kernel", "best_kernel").get(pk=run.pk)


def current_beam(run: Run) -> tuple[Iteration | None, list[dict[str, Any]]]:
    """The latest iteration and its beam (the kernels the next iteration starts from, else the ones this
    one started from), each with its latency and speedup over the starting kernel where known."""
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
    return iteration, beam


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


def run_memory(user: Any, run: Run, limit: int = 50) -> tuple[list[MemoryEntry], int]:
    """The memory entries a run wrote that `user` may read (largest speedup first, at most `limit`), and
    how many it wrote in all: the count is shown to everyone, the entries only to memory readers."""
    entries = list(visible_entries(user).filter(source_run_id=run.pk).order_by("-speedup")[:limit])
    return entries, MemoryEntry.objects.filter(source_run_id=run.pk).count()


def iteration_plans(run: Run, index: int) -> tuple[Iteration, list[dict[str, Any]]]:
    """One iteration of a run and its plans in order, each with its text, parent kernel and candidates."""
    iteration = Iteration.objects.filter(run=run, index=index).first()
    if iteration is None:
        raise Http404(f"run {run.pk} has no iteration {index}")
    plans: dict[str, dict[str, Any]] = {}
    for candidate in iteration.candidates.select_related("parent_kernel").order_by("plan_index", "sample_index", "id"):
        plan_key = candidate.key.rsplit(".", 1)[0]
        plan = plans.setdefault(plan_key, {"key": plan_key, "text": candidate.plan, "parent": candidate.parent_kernel,
                                           "candidates": []})
        plan["candidates"].append(candidate)
    return iteration, list(plans.values())


def get_candidate(run: Run, key: str) -> Candidate:
    """A run's candidate by its key ("2.0.1.0"), with its kernel, parent and evaluation."""
    candidate = (
        Candidate.objects.filter(iteration__run=run, key=key)
        .select_related("iteration", "kernel", "parent_kernel", "evaluation", "evaluation__kernel").first()
    )
    if candidate is None:
        raise Http404(f"run {run.pk} has no candidate {key!r} (yet)")
    return candidate


def get_run_kernel(run: Run, kernel_pk: int) -> tuple[Kernel, Candidate | None]:
    """A kernel the run wrote, or its starting kernel, with the candidate that produced it (if any)."""
    kernel = Kernel.objects.filter(pk=kernel_pk).select_related("parent").first()
    if kernel is None or (kernel.run_id != run.pk and kernel.pk != run.start_kernel_id):
        raise Http404(f"kernel {kernel_pk} was not written by run {run.pk}")
    candidate = (
        Candidate.objects.filter(iteration__run=run, kernel=kernel)
        .select_related("iteration", "evaluation", "evaluation__kernel").first()
    )
    return kernel, candidate


# Tokens per call assumed for an estimate when no earlier LLM run has measured them (prompt, completion).
# Rough figures for our prompt templates with a mini kernel and a full memory; replaced by measurements
# as soon as the installation has made calls of that role.
ASSUMED_TOKENS_PER_CALL = {
    "planner": (6000, 1500),
    "executor": (7000, 3000),
    "fixer": (7500, 3000),
    "summarizer": (4000, 500),
}


def evaluation_versions(run: Run, iteration: int | None = None) -> list[dict[str, str]]:
    """The backends and versions the run's kernels were evaluated with (the start kernel's, then the
    candidates'; one iteration's candidates only if `iteration` is given), distinct, so the run page says
    which simulator and performance model produced its numbers. Before any evaluation: the current version."""
    candidates = Candidate.objects.filter(iteration__run=run, evaluation__isnull=False)
    if iteration is not None:
        candidates = candidates.filter(iteration__index=iteration)
    evaluations = Evaluation.objects.filter(pk__in=candidates.values("evaluation_id"))
    if iteration is None:
        try:
            current = backend_version(run.backend)
        except ValidationError:  # a backend this host no longer knows
            current = ""
        evaluations = evaluations | Evaluation.objects.filter(
            kernel_id=run.start_kernel_id, platform=run.platform, backend=run.backend, backend_version=current
        )
    seen: list[dict[str, str]] = []
    for backend, version, perf in evaluations.order_by("backend", "backend_version").values_list(
        "backend", "backend_version", "provenance__perf_model_version"
    ).distinct():
        entry = {"backend": backend, "backend_version": version, "perf_model_version": perf or ""}
        if entry not in seen:
            seen.append(entry)
    if not seen and iteration is None and current:
        seen.append({"backend": run.backend, "backend_version": current, "perf_model_version": ""})
    return seen


def max_agent_calls(search: dict[str, Any] | None) -> dict[str, int]:
    """An upper bound on the model calls per role a run with these parameters makes (retries excluded)."""
    config = _search_config(search)
    beam_sizes = [1] + [config.beam_width] * (config.iterations - 1)  # iteration 1 starts from one kernel
    planner = sum(beam_sizes)
    executor = planner * config.plans_per_candidate * config.samples_per_plan
    return {
        "planner": planner,
        "executor": executor,
        "fixer": executor * config.fix_attempts,
        "summarizer": config.iterations * config.rewrites_per_iteration,
    }


def estimate_llm_cost(search: dict[str, Any] | None, models: dict[str, str] | None = None) -> dict[str, Any]:
    """Upper bound of an LLM run's tokens and cost, per role, for the run form.

    Tokens per call are the averages this installation measured for the role (AgentCall rows), or
    ASSUMED_TOKENS_PER_CALL where none exist; `measured` says which. Unknown models cost 0.
    """
    calls = max_agent_calls(search)
    roles = conf.llm_roles(models)
    prices = conf.price_table()
    measured = {
        row["role"]: row
        for row in AgentCall.objects.filter(error="").values("role").annotate(
            n=Count("id"), prompt=Avg("prompt_tokens"), completion=Avg("completion_tokens")
        )
    }
    per_role: dict[str, dict[str, Any]] = {}
    for role, count in calls.items():
        row = measured.get(role)
        prompt, completion = (row["prompt"], row["completion"]) if row else ASSUMED_TOKENS_PER_CALL[role]
        model = roles[role].model if role in roles else ""
        input_price, output_price = prices.get(model, (0.0, 0.0))
        per_role[role] = {
            "model": model,
            "max_calls": count,
            "prompt_tokens": round(count * prompt),
            "completion_tokens": round(count * completion),
            "cost_usd": count * (prompt * input_price + completion * output_price) / 1_000_000,
            "measured": row is not None,
        }
    return {
        "roles": per_role,
        "total_tokens": sum(r["prompt_tokens"] + r["completion_tokens"] for r in per_role.values()),
        "total_cost_usd": sum(r["cost_usd"] for r in per_role.values()),
    }
