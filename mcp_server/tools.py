"""What each MCP tool does, as plain synchronous functions of (user, arguments) -> JSON-ready dict.

Each one is a thin layer over the service the REST API calls for the same thing: it authorizes as the API
endpoint does (the same role, the same visibility), calls the service, and shapes its answer for an agent.
The services' exceptions (Http404, PermissionDenied, ValidationError, ValueError) pass through; the server
(mcp_server/server.py) turns them into tool errors with the API's messages. Nothing here knows MCP.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from pydantic import Field

from accounts.roles import ENGINEER, has_role
from benchmark import services as benchmark
from benchmark.leaderboard import CASES, build_board
from benchmark.models import Evaluation, EvaluationStatus, Kernel, Problem
from campaigns import services as campaigns
from campaigns.reports import campaign_report
from engine.agents.prompting import format_breakdown
from engine.memory.lessons import kernel_operations, profile_bottleneck
from engine.platforms.registry import DEFAULT_PLATFORM
from mcp_server.records import visible_calls
from memory import services as memory
from memory.models import EntryStatus
from optimizer import services as optimizer
from optimizer.models import AgentKind, Run

MAX_LIST = 200
MAX_EVENTS = 200

# What an agent reads about each argument (the tools' input schemas).
ProblemRef = Annotated[str, Field(description="a problem's address such as silu:mini (suite/slug:case), or its id")]
OptionalProblem = Annotated[str, Field(description="a problem's address such as silu:mini, or its id (blank: none)")]
Source = Annotated[str, Field(description="the kernel's whole Python source")]
KernelId = Annotated[int, Field(description="a kernel's id, as evaluate_kernel returned it")]
PlatformName = Annotated[str, Field(description="trn1 or trn2 for NKI, h100 or h200 for Triton; blank: the "
                                                "problem's own")]


def require_engineer(user: Any, what: str) -> None:
    """The API's api_role(ENGINEER): a signed-in caller without the role is refused, saying what needs it."""
    if not has_role(user, ENGINEER):
        raise PermissionDenied(f"{what} needs the engineer role")


# --- problems -------------------------------------------------------------------------------------------


def _problem_summary(problem: Problem) -> dict[str, Any]:
    return {
        "address": problem.address,
        "title": problem.title,
        "family": problem.family,
        "language": problem.language,
        "platforms": [p.value for p in problem.platforms],
        "parameters": problem.parameters,
    }


def list_problems(
    user: Any, suite: Annotated[str, Field(description="nkibench, flashinfer, ... (blank: all)")] = "",
    case: Annotated[str, Field(description="mini (seconds to evaluate) or full (the published shape)")] = "",
) -> dict[str, Any]:
    problems = benchmark.find_problems(user, suite=suite, case=case)[:MAX_LIST]
    return {"problems": [_problem_summary(problem) for problem in problems]}


def _latency(evaluation: Evaluation | None) -> float | None:
    return evaluation.latency_ms if evaluation is not None else None


def describe_problem(user: Any, problem: ProblemRef) -> dict[str, Any]:
    found = benchmark.get_problem_by_reference(user, problem)
    baselines = {}
    if found.baseline_kernel_id:
        for platform in found.platforms:
            best = benchmark.best_of(benchmark.kernel_evaluations(found.baseline_kernel), platform.value)
            baselines[platform.value] = {"kernel_id": found.baseline_kernel_id, "latency_ms": _latency(best)}
    return {
        **_problem_summary(found),
        "description": found.description,
        "tolerance": found.tolerance,
        "shapes": found.parameters,
        "theoretical_peak_ms": benchmark.theoretical_peaks(found),
        "baselines": baselines,
        "reference_source": found.reference_source,
        "reference_resource": f"studio://problems/{found.address}/reference",
    }


# --- evaluating and explaining --------------------------------------------------------------------------


def verdict(evaluation: Evaluation) -> str:
    """One word an agent can branch on: pending, correct, or the failure kind."""
    if evaluation.status != EvaluationStatus.DONE:
        return "pending"
    if evaluation.error_kind:
        return str(evaluation.error_kind)
    return "correct" if evaluation.correct else "incorrect"


def evaluation_summary(evaluation: Evaluation) -> dict[str, Any]:
    breakdown = evaluation.breakdown
    data: dict[str, Any] = {
        "evaluation_id": evaluation.pk,
        "kernel_id": evaluation.kernel_id,
        "platform": evaluation.platform,
        "backend": evaluation.backend,
        "verdict": verdict(evaluation),
        "correct": evaluation.correct,
        "latency_ms": evaluation.latency_ms,
        "peak_fraction": evaluation.peak_fraction,
        "simulated": evaluation.is_simulated,
        "bound": (breakdown or {}).get("bound"),
        "breakdown": format_breakdown(breakdown, evaluation.kernel.problem.language) if breakdown else "",
        "ranked": evaluation.is_rankable,
    }
    if evaluation.error_kind:
        data["error"] = {
            "kind": str(evaluation.error_kind),
            "label": evaluation.get_error_kind_display(),
            "message": evaluation.error_message,
            "line": evaluation.error_line,
            "detail": (evaluation.result or {}).get("error_detail") or "",
        }
    return data


def evaluate_kernel(
    user: Any, source: Source, problem: OptionalProblem = "",
    reference_source: Annotated[str, Field(description="instead of a problem: your own reference in NKIBench's "
                                                       "format (a private problem of yours)")] = "",
    name: Annotated[str, Field(description="a name for the kernel")] = "", platform: PlatformName = "",
) -> dict[str, Any]:
    require_engineer(user, "evaluating a kernel")
    if bool(problem) == bool(reference_source):
        raise ValueError("give either 'problem' (an address such as silu:mini) or 'reference_source'")
    target = benchmark.get_problem_by_reference(user, problem) if problem else None
    kernel, created, evaluation = benchmark.upload_kernel(
        user, kernel_source=source, kernel_name=name, platform=platform or None, problem=target,
        reference_source=reference_source or None, evaluate=True, wait=True,
    )
    return {"kernel_id": kernel.pk, "problem": kernel.problem.address, "created": created,
            **evaluation_summary(evaluation)}


def _kernel_evaluation(user: Any, kernel_id: int, platform: str) -> tuple[Kernel, Evaluation]:
    kernel = benchmark.get_kernel_for_user(user, kernel_id)
    evaluations = benchmark.kernel_evaluations(kernel)
    platform = platform or kernel.problem.default_platform
    chosen = benchmark.preferred_evaluation([e for e in evaluations if e.platform == platform])
    if chosen is None:
        raise Http404(f"kernel {kernel_id} has no evaluation on {platform}; evaluate it first")
    return kernel, chosen


def explain_kernel(user: Any, kernel_id: KernelId, platform: PlatformName = "") -> dict[str, Any]:
    kernel, evaluation = _kernel_evaluation(user, kernel_id, platform)
    summary = evaluation_summary(evaluation)
    profile = evaluation.profile if isinstance(evaluation.profile, dict) else {}
    if evaluation.error_kind:
        why = (f"{evaluation.get_error_kind_display()}"
               f"{f' at line {evaluation.error_line}' if evaluation.error_line else ''}: {evaluation.error_message}")
    elif evaluation.breakdown:
        why = evaluation.breakdown.get("verdict", "")
    else:
        why = "measured on hardware: no model breakdown explains a measured number" if not evaluation.is_simulated \
            else "this result has no breakdown (it predates the explanation)"
    return {
        **summary,
        "problem": kernel.problem.address,
        "explanation": why,
        "bottleneck": profile_bottleneck(profile),
        "profile": profile,
    }


# --- the optimization memory ----------------------------------------------------------------------------


def _lesson(entry: Any, *, with_kernels: bool) -> dict[str, Any]:
    data = {"id": entry.pk, "title": entry.title, "summary": entry.summary, "speedup": entry.speedup,
            "polarity": entry.polarity, "status": entry.status, "family": entry.family, "language": entry.language,
            "problem": entry.problem.address if entry.problem_id else None}
    if with_kernels:
        data["slow_kernel"], data["fast_kernel"] = entry.slow_kernel, entry.fast_kernel
    return data


def search_memory(
    user: Any, problem: OptionalProblem = "",
    kernel_id: Annotated[int | None, Field(description="rank for this kernel: its calls and its bottleneck")] = None,
    text: Annotated[str, Field(description="instead: lessons whose title, summary or kernels contain it")] = "",
    limit: Annotated[int, Field(description="at most this many lessons (1-50)")] = 8,
) -> dict[str, Any]:
    require_engineer(user, "reading the optimization memory")
    limit = max(1, min(limit, 50))
    if text:  # the memory browser's search
        entries = memory.filter_entries(memory.visible_entries(user), text=text).filter(
            status__in=[EntryStatus.ACTIVE, EntryStatus.PINNED])[:limit]
        return {"ranked_by": "text", "lessons": [_lesson(e, with_kernels=True) for e in entries]}
    kernel = benchmark.get_kernel_for_user(user, kernel_id) if kernel_id is not None else None
    target = kernel.problem if kernel is not None else (benchmark.get_problem_by_reference(user, problem)
                                                        if problem else None)
    if target is None:
        raise ValueError("give a 'problem', a 'kernel_id' or a 'text' to search for")
    operations: frozenset[str] = frozenset()
    bottleneck = ""
    if kernel is not None:  # ranked for this kernel as the Planner's memory is: its calls and its bottleneck
        operations = kernel_operations(kernel.source)
        evaluation = benchmark.preferred_evaluation(benchmark.kernel_evaluations(kernel))
        bottleneck = profile_bottleneck(evaluation.profile if evaluation is not None else None)
    entries = memory.select_entries(problem=target, family=target.family, limit=limit, operations=operations,
                                    bottleneck=bottleneck, among=memory.visible_entries(user))
    return {"ranked_by": "planner", "problem": target.address,
            "lessons": [_lesson(e, with_kernels=True) for e in entries]}


def propose_lesson(
    user: Any, title: Annotated[str, Field(description="what the rewrite does, in a line")],
    slow_kernel: Annotated[str, Field(description="the kernel before the rewrite")],
    fast_kernel: Annotated[str, Field(description="the kernel after it")],
    speedup: Annotated[float, Field(gt=0, description="slow latency over fast latency, as you measured it")],
    summary: Annotated[str, Field(description="why it helps, for the next engineer or agent")] = "",
    problem: OptionalProblem = "",
    polarity: Annotated[str, Field(description="positive (it made the kernel faster) or negative")] = "positive",
) -> dict[str, Any]:
    require_engineer(user, "proposing a lesson")
    target = benchmark.get_problem_by_reference(user, problem) if problem else None
    entry = memory.propose_entry(user, title=title, summary=summary, slow_kernel=slow_kernel, fast_kernel=fast_kernel,
                                 speedup=speedup, polarity=polarity, problem=target, source_label="proposed over MCP")
    return {**_lesson(entry, with_kernels=False),
            "note": "filed for the curators' review; no Planner sees it until a curator accepts it"}


# --- runs and campaigns ---------------------------------------------------------------------------------


def _run_summary(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.pk, "problem": run.problem.address, "status": run.status, "agent": run.agent,
        "platform": run.platform, "iteration": run.current_iteration, "start_latency_ms": run.start_latency_ms,
        "best_latency_ms": run.best_latency_ms, "best_speedup": run.best_speedup,
        "best_kernel_id": run.best_kernel_id, "error": run.error_message, "last_event_seq": run.next_event_seq - 1,
    }


def launch_run(
    user: Any, problem: ProblemRef,
    start_kernel_id: Annotated[int | None, Field(description="the kernel to start from (default: the baseline)")]
    = None,
    agent: Annotated[str, Field(description="offline (known rewrites) or llm (the site's LLM endpoint)")]
    = AgentKind.OFFLINE,
    platform: PlatformName = "",
    search: Annotated[dict[str, Any] | None, Field(description="SearchConfig fields: iterations, beam_width, ...")]
    = None,
    budget: Annotated[dict[str, float | None] | None, Field(
        description="caps: max_tokens, max_cost_usd, max_wall_time_s, max_evaluations")] = None,
    is_public: bool = False,
    current_generation: Annotated[bool, Field(description="NKI: return kernels in NKI 0.6 (the nki package) even "
                                                          "from a legacy neuronxcc.nki start")] = False,
) -> dict[str, Any]:
    require_engineer(user, "launching a run")
    target = benchmark.get_problem_by_reference(user, problem)
    start = benchmark.get_kernel_for_user(user, start_kernel_id) if start_kernel_id is not None else None
    run = optimizer.create_run(user, target, start_kernel=start, agent=agent, platform=platform or None,
                               search=search or {}, budget=budget or {}, is_public=is_public,
                               current_generation=current_generation)
    return _run_summary(optimizer.get_run_for_user(user, run.pk))


def run_progress(
    user: Any, run_id: int,
    after: Annotated[int, Field(description="only events after this seq (the last_event_seq you saw)")] = 0,
) -> dict[str, Any]:
    run = optimizer.get_run_for_user(user, run_id)
    events, next_after = optimizer.event_page(run, max(0, after), MAX_EVENTS)
    return {**_run_summary(run),
            "events": [{"seq": e.seq, "kind": e.kind, "payload": e.payload} for e in events],
            "next_after": next_after}


def launch_campaign(
    user: Any,
    problems: Annotated[list[str] | None, Field(description="problem addresses, or give a suite instead")] = None,
    suite: str = "", case: Annotated[str, Field(description="mini or full")] = "", name: str = "",
    search: dict[str, Any] | None = None, budgets: dict[str, float] | None = None, is_public: bool = False,
    current_generation: Annotated[bool, Field(description="NKI problems: every run returns kernels in NKI 0.6 (the "
                                                          "nki package) even from a legacy neuronxcc.nki baseline")]
    = False,
) -> dict[str, Any]:
    require_engineer(user, "launching a campaign")
    campaign = campaigns.create_campaign(user, problems=problems or [], suite=suite, case=case, name=name,
                                         search=search or {}, budgets=budgets or {}, is_public=is_public,
                                         current_generation=current_generation)
    return campaign_progress(user, campaign.pk)


def campaign_progress(user: Any, campaign_id: int) -> dict[str, Any]:
    report = campaign_report(campaigns.get_campaign_for_user(user, campaign_id))
    keep = ("id", "name", "status", "stop_reason", "headline", "usage", "rows")
    return {key: report[key] for key in keep if key in report}


# --- the leaderboard ------------------------------------------------------------------------------------


def _cell(cell: Any) -> dict[str, Any] | None:
    if cell.best is None:
        return None
    return {"kernel_id": cell.best.kernel_id, "latency_ms": cell.best.latency_ms,
            "peak_fraction": cell.best.peak_fraction, "speedup": cell.speedup,
            "author": cell.best.kernel.author.get_username() if cell.best.kernel.author_id else None,
            "run_id": cell.best.kernel.run_id}


def leaderboard(
    user: Any, platform: Annotated[str, Field(description="trn1 or trn2")] = DEFAULT_PLATFORM,
    case: Annotated[str, Field(description="mini or full")] = "mini",
    problem: Annotated[str, Field(description="only this problem's row (an address such as silu:mini)")] = "",
) -> dict[str, Any]:
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; the boards are {', '.join(CASES)}")
    # The board the leaderboard page shows this user (the same function, ranking and visibility rules).
    board = build_board(platform, case, user=user)
    rows = [{"problem": row.problem.address, "simulated": _cell(row.simulated), "measured": _cell(row.measured)}
            for row in board.rows if not problem or row.problem.address == problem or row.problem.slug == problem]
    return {"platform": platform, "case": case, "simulator_version": board.simulator_version,
            "geomean_simulated_speedup": board.simulated_geomean_speedup, "rows": rows}


# --- NKI generations -----------------------------------------------------------------------------------


def migrate_legacy_kernel(user: Any, kernel_id: KernelId, platform: PlatformName = "") -> dict[str, Any]:
    require_engineer(user, "migrating a kernel")
    kernel = benchmark.get_kernel_for_user(user, kernel_id, write=True)
    # The kernel page's Migrate button and POST /api/kernels/{id}/migrate call the same service.
    result = benchmark.migrate_kernel(user, kernel, platform=platform or None, wait=True)
    answer: dict[str, Any] = {
        "kernel_id": result.kernel.pk, "migrated_from": kernel.pk, "created": result.created,
        "generation": result.kernel.nki_generation, "source": result.kernel.source,
        "changes": [{"line": c.line, "what": c.what, "guide": c.guide} for c in result.changes],
    }
    if result.evaluation is not None:
        answer.update(evaluation_summary(result.evaluation))
    return answer


# --- the caller's own record ----------------------------------------------------------------------------


def my_tool_calls(user: Any, limit: int = 20) -> dict[str, Any]:
    calls = visible_calls(user)[: max(1, min(limit, MAX_LIST))]
    return {"calls": [{"tool": c.tool, "user": c.user.get_username() if c.user_id else None, "ok": c.ok,
                       "duration_ms": round(c.duration_ms, 1), "arguments_sha256": c.arguments_sha256,
                       "transport": c.transport, "error": c.error, "at": c.created.isoformat()} for c in calls]}
