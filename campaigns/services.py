"""What can be done to campaigns: create (the form, the API and `manage.py campaign`), read, cancel.

A campaign is one configuration over many problems. create_campaign validates everything once, up front
(problems, agent, platform, search parameters, models, budgets), stores the campaign and one entry per
problem, and asks the scheduler (campaigns.scheduler) to launch the first runs; runs themselves are
ordinary optimizer runs made by `optimizer.services.create_run`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404

from accounts import quotas
from accounts.roles import can_write_owned, is_engineer, visible_owned
from benchmark import services as benchmark_services
from benchmark.models import DEFAULT_BACKEND, DEFAULT_PLATFORM, Backend, Platform, Problem
from campaigns.models import Campaign, CampaignEntry, CampaignStatus
from campaigns.scheduler import advance, stop_campaign
from engine.search import SearchConfig
from engine.search.budget import Budget, launch_notes
from optimizer import conf as optimizer_conf
from optimizer.models import AgentKind, Run
from optimizer.run_links import RunLink
from optimizer.services import (
    check_current_generation,
    check_public_start,
    estimate_llm_cost,
    max_agent_calls,
)

__all__ = [
    "ACCELOPT_DEFAULTS",
    "can_launch_campaigns",
    "visible_campaigns",
    "get_campaign_for_user",
    "can_write_campaign",
    "resolve_problems",
    "create_campaign",
    "cancel_campaign",
]

# AccelOpt's published NKIBench configuration: experiments/full_complete_local/create_folders.py in the
# AccelOpt repository sets ITERS=15, BREADTH=12 (plans per kernel), TOPK_CANDIDATES=6 (beam), NUM_SAMPLES=2,
# MAX_THRESHOLD=1.04 / MIN_THRESHOLD=1.15 (positive speedup / negative slowdown), TOPK=8 (rewrites kept per
# iteration) and EXP_N=16 (memory entries). SearchConfig's defaults are these; a campaign starts from them.
ACCELOPT_DEFAULTS: dict[str, Any] = {
    "iterations": 15,
    "beam_width": 6,
    "plans_per_candidate": 12,
    "samples_per_plan": 2,
    "rewrites_per_iteration": 8,
    "memory_size": 16,
    "positive_speedup": 1.04,
    "negative_slowdown": 1.15,
}

MAX_PROBLEMS = 200


# --- access -------------------------------------------------------------------------------------------


def can_launch_campaigns(user: Any) -> bool:
    return is_engineer(user)


def visible_campaigns(user: Any) -> QuerySet[Campaign]:
    """Public campaigns for everyone; private ones for their owner (and admins)."""
    return visible_owned(user, Campaign.objects.select_related("owner"))


def can_write_campaign(user: Any, campaign: Campaign) -> bool:
    return can_write_owned(user, campaign)


def get_campaign_for_user(user: Any, pk: int, *, write: bool = False) -> Campaign:
    """The campaign if `user` may see it (404 otherwise), and with write=True may cancel it (403 otherwise)."""
    try:
        campaign = visible_campaigns(user).get(pk=pk)
    except Campaign.DoesNotExist:
        raise Http404(f"no campaign with id {pk}") from None
    if write and not can_write_campaign(user, campaign):
        raise PermissionDenied(f"only the owner of campaign {pk} can change it")
    return campaign


def campaign_link_for_run(run: Run, user: Any) -> RunLink | None:
    """The campaign that launched `run`, if `user` may see it: the run page links to it (registered with
    optimizer.run_links in CampaignsConfig.ready; one query)."""
    campaign = visible_campaigns(user).filter(entries__run_id=run.pk).first()
    if campaign is None:
        return None
    return RunLink(label="Part of campaign", text=campaign.title, url=campaign.get_absolute_url())


# --- creating -----------------------------------------------------------------------------------------


def resolve_problems(
    user: Any, *, suite: str = "", problems: Sequence[str | Problem] = (), case: str = ""
) -> list[Problem]:
    """The problems a campaign covers: every problem of `suite` in `case` (mini when not given), or the listed
    ones (addresses such as "silu", "silu:full", ids, or Problem rows; `case` applies to those that name none).
    A problem without a baseline kernel is refused here, naming it, rather than failing later as a run."""
    if suite and problems:
        raise ValidationError("give a suite or a list of problems, not both")
    if not suite and not problems:
        raise ValidationError("choose a suite or at least one problem")
    found: list[Problem] = []
    if suite:
        chosen = benchmark_services.find_problems(user, suite=suite, case=case or "mini").order_by("slug")
        found = list(chosen.select_related("baseline_kernel"))
        if not found:
            raise ValidationError(f"suite {suite!r} has no {case or 'mini'} problems you may see")
    for item in problems:
        if isinstance(item, Problem):
            found.append(item)
            continue
        reference = str(item).strip()
        if not reference:
            continue
        if case and not reference.isdigit() and ":" not in reference:
            reference = f"{reference}:{case}"
        try:
            found.append(benchmark_services.get_problem_by_reference(user, reference))
        except ValueError as error:
            raise ValidationError(str(error)) from None
    unique: list[Problem] = []
    for problem in found:
        if problem.pk not in {p.pk for p in unique}:
            unique.append(problem)
    if len(unique) > MAX_PROBLEMS:
        raise ValidationError(f"a campaign covers at most {MAX_PROBLEMS} problems, not {len(unique)}")
    missing = [p.address for p in unique if p.baseline_kernel_id is None]
    if missing:
        raise ValidationError(f"no baseline kernel to start from for {', '.join(missing)}")
    return unique


def _budgets(budgets: dict[str, Any] | None) -> dict[str, Any]:
    """The campaign's caps by BUDGET_FIELDS name, checked by the optimizer's own Budget (None: no cap)."""
    try:
        return Budget.from_dict(budgets).to_dict()
    except ValueError as error:
        raise ValidationError(str(error)) from None


def budget_notes(agent: str, search: dict[str, Any], models: dict[str, str], budget: Budget, runs: int) -> list[str]:
    """The campaign's budgets against its upper-bound estimate: one run's (optimizer.services) times the number of
    problems, in the optimizer's words (launch_notes)."""
    if budget.empty:
        return []
    calls = max_agent_calls(search)
    kwargs: dict[str, Any] = {}
    if agent == AgentKind.LLM:
        estimate = estimate_llm_cost(search, models)
        prices = optimizer_conf.price_table()
        kwargs = {"estimate_tokens": runs * estimate["total_tokens"],
                  "estimate_cost_usd": runs * estimate["total_cost_usd"],
                  "unpriced_models": tuple(sorted({r["model"] for r in estimate["roles"].values()
                                                   if r["model"] and r["model"] not in prices}))}
    evaluations = runs * (1 + calls["executor"] * (1 + search.get("fix_attempts", 0)))
    return launch_notes(budget, llm=agent == AgentKind.LLM, max_evaluations=evaluations, **kwargs)


def search_parameters(search: dict[str, Any] | None, *, agent: str, memory: bool = True) -> dict[str, Any]:
    """The search parameters every run of the campaign gets: AccelOpt's published defaults, then `search`.
    memory=False shows the Planner no entries and writes none (the paper's no-memory ablation)."""
    params = {**ACCELOPT_DEFAULTS, **dict(search or {})}
    if not memory:
        params.update(memory_size=0, rewrites_per_iteration=0)
    if agent == AgentKind.OFFLINE:
        params.setdefault("fix_attempts", 0)  # the offline agent repairs nothing (as optimizer.create_run)
    # Asked of every run; each run's launch keeps it only where its problem has a mini case (create_run).
    params.setdefault("mini_first", True)
    try:
        return SearchConfig.from_dict(params).to_dict()
    except (TypeError, ValueError) as error:
        raise ValidationError(f"invalid search parameters: {error}") from None


def create_campaign(
    user: Any,
    *,
    suite: str = "",
    problems: Sequence[str | Problem] = (),
    case: str = "",
    name: str = "",
    agent: str = AgentKind.OFFLINE,
    platform: str = DEFAULT_PLATFORM,
    backend: str = DEFAULT_BACKEND,
    search: dict[str, Any] | None = None,
    models: dict[str, str] | None = None,
    memory: bool = True,
    budgets: dict[str, Any] | None = None,
    max_concurrent_runs: int | None = None,
    is_public: bool = False,
    current_generation: bool = False,
) -> Campaign:
    """Store a campaign and launch its first runs: the one path for the form, the API and the command.

    `search` holds SearchConfig fields over AccelOpt's defaults (ACCELOPT_DEFAULTS), `models` a model per role
    (LLM agent), `budgets` any of max_tokens, max_cost_usd, max_wall_time_s, max_evaluations for the
    whole campaign. `max_concurrent_runs` bounds the campaign's runs queued or running at once (default: the
    worker's concurrency). `current_generation` (NKI problems only): every run returns kernels in NKI 0.6, as
    optimizer.services.create_run does it. `user` None is a management command: the campaign has no owner.
    """
    if user is not None and user.is_authenticated and not is_engineer(user):
        raise PermissionDenied("only engineers can launch campaigns")
    if agent not in AgentKind.values:
        raise ValidationError(f"unknown agent {agent!r}; expected one of {', '.join(AgentKind.values)}")
    if platform not in Platform.values:
        raise ValidationError(f"unknown platform {platform!r}; expected one of {', '.join(Platform.values)}")
    if backend not in Backend.values:
        raise ValidationError(f"unknown backend {backend!r}; expected one of {', '.join(Backend.values)}")
    chosen = resolve_problems(user, suite=suite, problems=problems, case=case)
    for problem in chosen:  # one platform for all: every problem must be in a language it runs
        benchmark_services.check_platform_for(problem, platform)
        if current_generation:
            check_current_generation(problem)
        if is_public:  # its runs will be public: none may show a private problem or a private run's code
            check_public_start(problem, problem.baseline_kernel)
    params = search_parameters(search, agent=agent, memory=memory)
    role_models = {role: model for role, model in (models or {}).items() if model}
    unknown_roles = sorted(set(role_models) - set(optimizer_conf.ROLES))
    if unknown_roles:
        raise ValidationError(f"unknown roles {unknown_roles}; expected {list(optimizer_conf.ROLES)}")
    if agent == AgentKind.LLM:
        roles = optimizer_conf.llm_roles(role_models)
        missing = [role for role in optimizer_conf.ROLES if role not in roles]
        if missing:
            raise ValidationError(
                f"the LLM agent needs a model for every role; none configured for {', '.join(missing)}"
            )
    caps = _budgets(budgets)
    notes = budget_notes(agent, params, role_models, Budget(**caps), len(chosen))
    concurrency = max_concurrent_runs or optimizer_conf.worker_settings().concurrency
    if concurrency < 1:
        raise ValidationError(f"max_concurrent_runs must be >= 1, got {concurrency}")
    most = quotas.limit(quotas.RUNS_IN_FLIGHT)
    if most and concurrency > most:
        if max_concurrent_runs:
            raise ValidationError(f"max_concurrent_runs is {concurrency}, over the limit of {most} runs queued or "
                                  f"running per person ({quotas.RUNS_IN_FLIGHT})")
        concurrency = most  # the worker's default concurrency, cut to what one person may run
    with transaction.atomic():
        campaign = Campaign.objects.create(
            name=name[:200],
            owner=user if user is not None and user.is_authenticated else None,
            is_public=is_public,
            platform=platform,
            backend=backend,
            agent=agent,
            suite=suite,
            case=case,
            config={"search": params, "models": role_models, "memory": memory, "budget_notes": notes,
                    **({"current_generation": True} if current_generation else {})},
            max_concurrent_runs=concurrency,
            **caps,
        )
        CampaignEntry.objects.bulk_create(
            [CampaignEntry(campaign=campaign, problem=problem, position=i) for i, problem in enumerate(chosen)]
        )
    advance(campaign.pk)
    campaign.refresh_from_db()
    return campaign


# --- lifecycle ----------------------------------------------------------------------------------------


def cancel_campaign(campaign: Campaign, user: Any = None) -> Campaign:
    """Stop a campaign: problems not yet launched are skipped, and its runs are cancelled (a running one stops
    before its next step, keeping what it found)."""
    stop_campaign(campaign.pk, CampaignStatus.CANCELLED,
                  f"cancelled by {user.get_username()}" if user is not None and user.is_authenticated else "cancelled")
    campaign.refresh_from_db()
    return campaign
