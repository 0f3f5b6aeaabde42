"""Agent transcripts and the leaderboard grid: reads over runs, candidates and agent calls.

A transcript is the chain of agent calls that produced one generated kernel: for each step from the run's
starting kernel to it, the Planner's plan, the Executor's kernel, the Fixer's repairs and the iteration's
Summarizer lesson, each call with its role, model, prompt, response, tokens, cost and latency. The grid is
one row per problem of a board and one column per (agent, models) pair, each cell the best visible run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.http import Http404

from benchmark.models import DEFAULT_SUITE, Kernel, Problem
from optimizer.models import AgentCall, AgentRole, Candidate, Run
from optimizer.services import lineage, visible_runs

ROLE_ORDER = {AgentRole.PLANNER: 0, AgentRole.EXECUTOR: 1, AgentRole.FIXER: 2, AgentRole.SUMMARIZER: 3}


@dataclass
class TranscriptStep:
    """One kernel of the chain: the candidate that wrote it and the calls behind it, in the order they ran."""

    kernel: Kernel
    candidate: Candidate | None
    calls: list[AgentCall] = field(default_factory=list)

    @property
    def cost_usd(self) -> float | None:
        costs = [call.cost_usd for call in self.calls]
        return None if any(cost is None for cost in costs) else sum(costs)


@dataclass
class Transcript:
    run: Run
    kernel: Kernel
    steps: list[TranscriptStep]

    @property
    def calls(self) -> list[AgentCall]:
        return [call for step in self.steps for call in step.calls]

    @property
    def tokens(self) -> int:
        return sum(call.prompt_tokens + call.completion_tokens for call in self.calls)

    @property
    def cost_usd(self) -> float | None:
        costs = [call.cost_usd for call in self.calls]
        return None if any(cost is None for cost in costs) else sum(costs)


def _planner_calls(candidate: Candidate, calls: list[AgentCall]) -> list[AgentCall]:
    # Planner calls belong to an iteration, not a candidate: keep the one whose reply holds this plan.
    planners = [c for c in calls if c.role == AgentRole.PLANNER and c.iteration_id == candidate.iteration_id]
    plan = candidate.plan.strip()[:80]
    matching = [c for c in planners if plan and plan in c.response]
    return matching or planners[:1]


def kernel_transcript(user: Any, run_id: int, kernel_id: int) -> Transcript:
    """The calls that led from the run's starting kernel to `kernel_id` (404 unless the run is visible to the
    user and the kernel is one the run wrote)."""
    try:
        run = visible_runs(user).select_related("start_kernel").get(pk=run_id)
    except Run.DoesNotExist:
        raise Http404(f"no run with id {run_id}") from None
    kernel = Kernel.objects.filter(pk=kernel_id).select_related("parent").first()
    if kernel is None or (kernel.run_id != run.pk and kernel.pk != run.start_kernel_id):
        raise Http404(f"run {run_id} wrote no kernel {kernel_id}")
    chain = [k for k in reversed(lineage(kernel, stop_at=run.start_kernel)) if k.pk != run.start_kernel_id]
    candidates = {
        c.kernel_id: c
        for c in Candidate.objects.filter(iteration__run=run, kernel_id__in=[k.pk for k in chain])
        .select_related("iteration").order_by("id")
    }
    calls = list(AgentCall.objects.filter(run=run).order_by("created", "id"))
    steps = []
    for step_kernel in chain:
        candidate = candidates.get(step_kernel.pk)
        chosen: list[AgentCall] = []
        if candidate is not None:
            chosen += _planner_calls(candidate, calls)
            chosen += [c for c in calls if c.candidate_id == candidate.pk and c.role != AgentRole.PLANNER]
            chosen += [c for c in calls if c.role == AgentRole.SUMMARIZER and c.iteration_id == candidate.iteration_id]
        chosen += [c for c in calls if c.kernel_id == step_kernel.pk and c not in chosen]
        chosen.sort(key=lambda c: (ROLE_ORDER.get(c.role, 9), c.created, c.pk))
        steps.append(TranscriptStep(kernel=step_kernel, candidate=candidate, calls=chosen))
    return Transcript(run=run, kernel=kernel, steps=steps)


# --- the grid -------------------------------------------------------------------------------------------


def run_column(run: Run) -> str:
    """A run's grid column: its agent and the models its roles used."""
    models = sorted({str(m.get("model", "")) for m in (run.config.get("models") or {}).values()
                     if isinstance(m, dict) and m.get("model")})
    return " · ".join([run.get_agent_display(), *models])


@dataclass
class GridCell:
    run: Run

    @property
    def speedup(self) -> float | None:
        if not self.run.best_latency_ms or not self.run.start_latency_ms:
            return None
        return self.run.start_latency_ms / self.run.best_latency_ms


@dataclass
class Grid:
    platform: str
    case: str
    columns: list[str]
    rows: list[tuple[Problem, list[GridCell | None]]]


def leaderboard_grid(user: Any, platform: str, case: str, *, suite: str = DEFAULT_SUITE) -> Grid:
    """Problem x (agent, models): per cell the visible run with the largest speedup over its starting kernel."""
    problems = list(Problem.objects.filter(suite=suite, case=case).order_by("slug"))
    runs = visible_runs(user).filter(problem__in=problems, platform=platform, best_latency_ms__isnull=False)
    best: dict[tuple[int, str], GridCell] = {}
    for run in runs.select_related("best_kernel"):
        cell, key = GridCell(run), (run.problem_id, run_column(run))
        current = best.get(key)
        if current is None or (cell.speedup or 0) > (current.speedup or 0):
            best[key] = cell
    columns = sorted({column for _, column in best})
    rows = [(problem, [best.get((problem.pk, column)) for column in columns]) for problem in problems]
    return Grid(platform=platform, case=case, columns=columns, rows=rows)
