"""Launching a run: `create_run` (the run form, POST /api/runs and `manage.py optimize`), its budget checks,
and what the run form offers (problems, the user's kernels, whether the LLM agent can run)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet

from accounts import quotas
from benchmark import services as benchmark_services
from benchmark.models import Backend, Kernel, Platform, Problem, Visibility
from benchmark.services.evaluations import backend_unavailable
from engine.platforms.nki.generations import CURRENT, LEGACY, kernel_generation
from engine.platforms.registry import CORRECTNESS_ONLY, NKI, get_backend_definition, get_definition
from engine.search.budget import Budget, launch_notes
from optimizer import conf
from optimizer.events import record_events
from optimizer.models import (
    AgentKind,
    Run,
    RunStatus,
)
from optimizer.services.access import can_launch_runs
from optimizer.services.defaults import search_config
from optimizer.services.estimates import estimate_llm_cost, max_agent_calls


def llm_unavailable(models: dict[str, str] | None = None) -> str | None:
    """Why the LLM agent cannot run with these models (None: it can): a role without an endpoint and model.
    The run form shows the agent disabled with this reason, and create_run refuses with it."""
    roles = conf.llm_roles(models)
    missing = [role for role in conf.ROLES if role not in roles]
    if not missing:
        return None
    return (f"the LLM agent needs a model for every role; none configured for {', '.join(missing)} "
            "(set ACCELOPT_LLM_BASE_URL and ACCELOPT_LLM_MODEL, or use the offline agent)")



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
    quota: bool = True,
    current_generation: bool = False,
) -> Run:
    """Queue a run: the one way a run is launched, from the run form, the API and `manage.py optimize`.

    The run starts from `start_kernel`, or from a new kernel with the source `start_source` (named
    `start_name`), or else from the problem's baseline. `search` holds SearchConfig fields (unset ones take
    AccelOpt-like defaults), `models` a model name per role overriding the configured one (LLM agent only),
    `budget` caps by BUDGET_FIELDS name (checked against the estimate: the notes go into the run's config).
    `search["mini_first"]` (default on) takes effect only where the problem has a mini case.
    `current_generation` (NKI): the run returns kernels in NKI 0.6 (the nki package) even from a legacy
    neuronxcc.nki start: the prompts say so, the offline agent migrates the kernel first, and a legacy reply is
    migrated mechanically or is unusable (engine.agents.imports.in_target_generation).
    `user` None is a management command: the run has no owner. `quota`: whether the owner's runs quota
    applies (a campaign's runs are bounded by its own max_concurrent_runs instead).
    """
    if user is not None and user.is_authenticated and not can_launch_runs(user):
        raise PermissionDenied("only engineers can launch optimization runs")
    if quota:
        check_run_quota(user)
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
        supported = ", ".join(get_definition(platform).backends)
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
    if is_public:
        check_public_start(problem, start_kernel)
    if current_generation:
        check_current_generation(problem)
        start_kernel = _start_in_current_generation(user, start_kernel, agent)
    search = dict(search or {})
    if agent == AgentKind.OFFLINE:
        # The offline agent repairs nothing; a Fixer round would only record "unusable" replies.
        search.setdefault("fix_attempts", 0)
    if get_backend_definition(backend).latency == CORRECTNESS_ONLY:
        # A backend with no latency (Triton's interpreter): the search ranks by correctness (engine.search.unmeasured).
        search.setdefault("correctness_only", True)
    # Candidates are checked on the problem's mini shapes first where it has them (engine.search.cascade),
    # unless the launcher turned it off; the config records what the run does, so a resumed run does the same.
    search["mini_first"] = (bool(search.get("mini_first", True))
                            and benchmark_services.mini_sibling(problem) is not None)
    config = search_config(search)
    caps = parse_budget(budget)
    role_models: dict[str, Any] = {}
    if agent == AgentKind.LLM:
        unavailable = llm_unavailable(models)
        if unavailable:
            raise ValidationError(unavailable)
        role_models = conf.public_role_settings(conf.llm_roles(models))
    with transaction.atomic():
        if quota:  # again, now that no other launch of theirs is half done (checked above before storing anything)
            check_run_quota(user, hold=True)
        run = Run.objects.create(
            problem=problem,
            start_kernel=start_kernel,
            owner=user if user is not None and user.is_authenticated else None,
            is_public=is_public,
            agent=agent,
            platform=platform,
            backend=backend,
            config={"search": config.to_dict(), "models": role_models,
                    "budget_notes": check_budget(agent, search, models, caps),
                    **({"nki_generation": CURRENT} if current_generation else {})},
            **caps.to_dict(),
        )
        record_events(run.pk, [("run.queued", {"agent": agent, "platform": platform, "search": config.to_dict()})])
    return run


def check_public_start(problem: Problem, start_kernel: Kernel | None) -> None:
    """A public run shows everyone its problem's reference (in its prompts) and its starting kernel (its diff and
    transcript pages): refused unless both are already everyone's to see, so a run never publishes a private
    problem or the code a private run wrote."""
    if problem.visibility != Visibility.PUBLIC:
        raise ValidationError(f"{problem.address} is a private problem (its owner's own reference): a run on it "
                              "cannot be public; launch it private")
    if start_kernel is not None and not benchmark_services.visible_kernels(None).filter(pk=start_kernel.pk).exists():
        raise ValidationError(f"kernel {start_kernel.pk} was written by a private run: a public run starting from "
                              "it would show it to everyone; launch this run private, or start from another kernel")


def check_current_generation(problem: Problem) -> None:
    """A ValidationError naming `problem` unless it can return kernels in the current NKI generation (an NKI
    problem): the one check of the option, for a run and for each problem of a campaign."""
    if problem.language != NKI:
        raise ValidationError(f"returning kernels in the current NKI generation is an option of NKI problems; "
                              f"{problem.address} is a {problem.language} problem")


def runs_in_flight(user: Any) -> QuerySet[Run]:
    """The runs `user` owns that are queued or running: what the runs quota counts (a campaign's too)."""
    return Run.objects.filter(owner=user, status__in=[RunStatus.QUEUED, RunStatus.RUNNING])


def check_run_quota(user: Any, *, exclude: int | None = None, hold: bool = False) -> None:
    """QuotaExceeded (a ValidationError naming the limit) if one more run queued would take `user` past
    ACCELOPT_QUOTA_RUNS_IN_FLIGHT; nothing for commands (no user).

    `hold`, inside the transaction that then queues the run: first wait for any other such transaction of theirs
    to end (their user row's lock on PostgreSQL; SQLite's IMMEDIATE transactions hold the whole database), so
    this count sees the run it queued and two launches at once cannot both take the last place."""
    if user is None or not user.is_authenticated:
        return
    if hold and quotas.limit(quotas.RUNS_IN_FLIGHT):
        list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))
    runs = runs_in_flight(user)
    if exclude is not None:
        runs = runs.exclude(pk=exclude)
    quotas.check(quotas.RUNS_IN_FLIGHT, runs.count())


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
    config = search_config(search)
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


def _start_in_current_generation(user: Any, kernel: Kernel, agent: str) -> Kernel:
    """The kernel a run returning NKI 0.6 kernels starts from: a legacy start's mechanical migration (a new
    kernel, its parent the legacy one), so that every kernel of the run, its best too, is in NKI 0.6. One that
    cannot be migrated: the LLM agents start from it and are told to rewrite it; the offline agent, which writes
    nothing by hand, cannot, and the run is refused naming the construct."""
    if kernel_generation(kernel.source) != LEGACY:
        return kernel
    try:
        return benchmark_services.migrate_kernel(user, kernel, evaluate=False).kernel
    except ValidationError as error:
        if agent == AgentKind.OFFLINE:
            raise ValidationError(f"the offline agent cannot return NKI 0.6 kernels from this start: "
                                  f"{' '.join(error.messages)}") from error
        return kernel


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
