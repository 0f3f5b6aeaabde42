"""The optimizer app's part of the API; accelopt_site/api.py mounts this router under /api/.

Runs: create (engineer), list and read (public ones for anyone, private ones for their owner), cancel,
pause, resume and continue with more budget (owner), and page through their events by seq (the same log the websocket streams).
Each endpoint parses, authorizes, calls one service and serializes; the services' exceptions become error
answers in accelopt_site/api.py.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Field, Router, Schema, Status
from pydantic import ConfigDict

from accounts.auth import api_optional_auth, api_role
from accounts.roles import ENGINEER
from benchmark import services as benchmark_services
from engine.search.budget import progress as budget_progress
from optimizer import services
from optimizer.models import AgentKind, Run, RunEvent

router = Router()

MAX_EVENT_PAGE = 1000
MAX_RUN_PAGE = 200


class ErrorOut(Schema):
    detail: str


class RunIn(Schema):
    # An unknown field (say `iterations` at the top level instead of under `search`) is a 422 naming it,
    # never silently ignored.
    model_config = ConfigDict(extra="forbid")

    problem: str = Field(description="problem id or address such as silu:mini")
    start_kernel_id: int | None = Field(None, description="default: the problem's baseline kernel")
    agent: str = AgentKind.OFFLINE
    platform: str | None = Field(None, description="default: the problem's own (trn1 for NKI, h100 for Triton)")
    backend: str | None = Field(None, description="default: the platform's own")
    search: dict[str, Any] = Field(
        default_factory=dict,
        description="SearchConfig fields (iterations, beam_width, ...); unset ones take the run form's defaults",
    )
    models: dict[str, str] = Field(default_factory=dict, description="model name per role (LLM agent)")
    is_public: bool = False
    current_generation: bool = Field(False, description="NKI: return kernels in NKI 0.6 (the nki package) even from a "
                                     "legacy neuronxcc.nki start (prompts say so; the offline agent migrates first)")
    budget: dict[str, float | None] = Field(
        default_factory=dict,
        description="caps, each optional: max_tokens, max_cost_usd, max_wall_time_s, max_evaluations; the run stops "
        "as 'stopped' when it reaches one",
    )


class RunOut(Schema):
    id: int
    problem_id: int
    problem: str
    start_kernel_id: int
    owner: str | None
    is_public: bool
    agent: str
    platform: str
    backend: str
    config: dict[str, Any]
    status: str
    cancel_requested: bool
    pause_requested: bool
    error_message: str
    current_iteration: int
    best_kernel_id: int | None
    start_latency_ms: float | None
    best_latency_ms: float | None
    best_speedup: float | None
    best_peak_fraction: float | None
    prompt_tokens: int
    completion_tokens: int
    budget: dict[str, float | None]
    budget_usage: list[dict[str, Any]] = Field(description="per cap set: used, limit, fraction, reached, enforceable")
    stopped_by_budget: str = Field(description="the budget a 'stopped' run reached")
    cost_usd: float = Field(description="USD over the calls whose cost is known (a lower bound when cost_known is false)")
    cost_known: bool = Field(description="false when some call's cost is unknown (no token usage reported, or no price)")
    last_event_seq: int
    created: datetime
    started: datetime | None
    finished: datetime | None
    url: str
    events_url: str
    websocket_path: str


class EventOut(Schema):
    seq: int
    kind: str
    payload: dict[str, Any]
    time: datetime


class EventPageOut(Schema):
    run_id: int
    events: list[EventOut]
    next_after: int | None = Field(description="pass as ?after= for the next page; null when there is no more")


def _run_out(request: HttpRequest, run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "problem_id": run.problem_id,
        "problem": run.problem.address,
        "start_kernel_id": run.start_kernel_id,
        "owner": run.owner.get_username() if run.owner_id else None,
        "is_public": run.is_public,
        "agent": run.agent,
        "platform": run.platform,
        "backend": run.backend,
        "config": run.config,
        "status": run.status,
        "cancel_requested": run.cancel_requested,
        "pause_requested": run.pause_requested,
        "error_message": run.error_message,
        "current_iteration": run.current_iteration,
        "best_kernel_id": run.best_kernel_id,
        "start_latency_ms": run.start_latency_ms,
        "best_latency_ms": run.best_latency_ms,
        "best_speedup": run.best_speedup,
        "best_peak_fraction": run.best_peak_fraction,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "budget": run.budget.to_dict(),
        "budget_usage": budget_progress(run.budget, run.usage),
        "stopped_by_budget": run.stopped_by_budget,
        "cost_usd": run.cost_usd,
        "cost_known": run.cost_known,
        "last_event_seq": run.next_event_seq - 1,
        "created": run.created,
        "started": run.started,
        "finished": run.finished,
        "url": request.build_absolute_uri(run.get_absolute_url()),
        "events_url": request.build_absolute_uri(f"/api/runs/{run.pk}/events"),
        "websocket_path": f"/ws/runs/{run.pk}/",
    }


def _event_out(event: RunEvent) -> dict[str, Any]:
    return {"seq": event.seq, "kind": event.kind, "payload": event.payload, "time": event.created}


def _run_for(request: HttpRequest, run_id: int, *, write: bool = False) -> Run:
    return services.get_run_for_user(request.auth, run_id, write=write)


@router.post(
    "/runs",
    auth=api_role(ENGINEER),
    response={201: RunOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Queue an optimization run",
)
def create_run(request: HttpRequest, payload: RunIn) -> Status:
    problem = benchmark_services.get_problem_by_reference(request.auth, payload.problem)
    start_kernel = None
    if payload.start_kernel_id is not None:
        start_kernel = benchmark_services.get_kernel_for_user(request.auth, payload.start_kernel_id)
    run = services.create_run(
        request.auth,
        problem,
        start_kernel=start_kernel,
        agent=payload.agent,
        platform=payload.platform,
        backend=payload.backend,
        search=payload.search,
        models=payload.models,
        budget=payload.budget,
        is_public=payload.is_public,
        current_generation=payload.current_generation,
    )
    return Status(201, _run_out(request, services.get_run_for_user(request.auth, run.pk)))


@router.get("/runs", auth=api_optional_auth, response={200: list[RunOut], 400: ErrorOut},
            summary="List the runs you may see")
def list_runs(
    request: HttpRequest, status: str = "", problem: str = "", mine: bool = False, limit: int = 50, offset: int = 0
) -> list[dict[str, Any]]:
    runs = services.find_runs(request.auth, scope="mine" if mine else "", status=status, problem=problem)
    limit = max(1, min(limit, MAX_RUN_PAGE))
    return [_run_out(request, run) for run in runs[max(0, offset) : max(0, offset) + limit]]


@router.get(
    "/runs/{int:run_id}", auth=api_optional_auth, response={200: RunOut, 404: ErrorOut}, summary="Read a run"
)
def read_run(request: HttpRequest, run_id: int) -> dict[str, Any]:
    return _run_out(request, _run_for(request, run_id))


def _lifecycle(action: Callable[..., Run]) -> Callable[[HttpRequest, int], dict[str, Any]]:
    def endpoint(request: HttpRequest, run_id: int) -> dict[str, Any]:
        run = action(_run_for(request, run_id, write=True), request.auth)
        return _run_out(request, run)

    return endpoint


_WRITE_RESPONSES = {200: RunOut, 403: ErrorOut, 404: ErrorOut}
router.post("/runs/{int:run_id}/cancel", auth=api_role(ENGINEER), response=_WRITE_RESPONSES,
            summary="Cancel a run (a running one stops before its next step)",
            operation_id="cancel_run", url_name="run-cancel")(_lifecycle(services.cancel_run))
router.post("/runs/{int:run_id}/pause", auth=api_role(ENGINEER), response=_WRITE_RESPONSES,
            summary="Pause a run (a running one stops before its next step)",
            operation_id="pause_run", url_name="run-pause")(_lifecycle(services.pause_run))
router.post("/runs/{int:run_id}/resume", auth=api_role(ENGINEER), response=_WRITE_RESPONSES,
            summary="Resume a paused run from its last checkpoint",
            operation_id="resume_run", url_name="run-resume")(_lifecycle(services.resume_run))


class ContinueIn(Schema):
    model_config = ConfigDict(extra="forbid")

    budget: dict[str, float | None] = Field(
        default_factory=dict,
        description="the new caps, each optional (absent or null: no cap): max_tokens, max_cost_usd, max_wall_time_s, "
        "max_evaluations; each must be above what the run already spent",
    )


@router.post("/runs/{int:run_id}/continue", auth=api_role(ENGINEER), response={**_WRITE_RESPONSES, 400: ErrorOut},
             summary="Continue a run its budget stopped, with new caps, from where it stopped",
             operation_id="continue_run", url_name="run-continue")
def continue_run(request: HttpRequest, run_id: int, payload: ContinueIn) -> dict[str, Any]:
    run = services.continue_run(_run_for(request, run_id, write=True), request.auth, payload.budget)
    return _run_out(request, run)


@router.get(
    "/runs/{int:run_id}/events",
    auth=api_optional_auth,
    response={200: EventPageOut, 404: ErrorOut},
    summary="Page through a run's events (seq > after, in order)",
)
def run_events(request: HttpRequest, run_id: int, after: int = 0, limit: int = 100) -> dict[str, Any]:
    run = _run_for(request, run_id)
    events, next_after = services.event_page(run, max(0, after), max(1, min(limit, MAX_EVENT_PAGE)))
    return {"run_id": run.pk, "events": [_event_out(e) for e in events], "next_after": next_after}
