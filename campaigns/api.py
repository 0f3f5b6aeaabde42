"""Campaigns in the API; accelopt_site/api.py mounts this router under /api/.

POST /api/campaigns launches one (engineer), GET lists and reads them with their headline, rows and curves
(the campaign report), POST …/cancel stops one (owner), GET …/export.csv once finished. Each endpoint calls
the same service as the page.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Field, Router, Schema, Status

from accounts.auth import api_optional_auth, api_role
from accounts.roles import ENGINEER
from benchmark.models import DEFAULT_BACKEND, DEFAULT_PLATFORM
from campaigns import services
from campaigns.reports import CSV_COLUMNS, campaign_csv, campaign_report, require_finished
from optimizer.models import AgentKind

router = Router()


class ErrorOut(Schema):
    detail: str


class CampaignIn(Schema):
    name: str = ""
    suite: str = Field("", description="every problem of this suite (in `case`), or list `problems`")
    problems: list[str] = Field(default_factory=list, description="problem ids or addresses such as silu:mini")
    case: str = Field("", description="mini or full: the case of a suite, or of problems that name none")
    agent: str = AgentKind.OFFLINE
    platform: str = DEFAULT_PLATFORM.value  # a plain str: pydantic cannot serialize an OpenChoices member
    backend: str = DEFAULT_BACKEND.value
    search: dict[str, Any] = Field(default_factory=dict, description="SearchConfig fields over AccelOpt's defaults")
    models: dict[str, str] = Field(default_factory=dict, description="model name per role (LLM agent)")
    memory: bool = True
    budgets: dict[str, float] = Field(
        default_factory=dict, description="max_tokens, max_cost_usd, max_wall_time_s, max_evaluations for the whole campaign"
    )
    max_concurrent_runs: int | None = None
    is_public: bool = False
    current_generation: bool = Field(False, description="NKI problems: every run returns kernels in NKI 0.6 (the nki "
                                     "package) even from a legacy neuronxcc.nki baseline, as POST /api/runs does")


class CampaignOut(Schema):
    id: int
    name: str
    status: str
    stop_reason: str
    platform: str
    backend: str
    agent: str
    suite: str
    case: str
    config: dict[str, Any]
    budgets: dict[str, Any]
    max_concurrent_runs: int
    created: str
    finished: str | None
    headline: dict[str, Any]
    usage: dict[str, Any]
    rows: list[dict[str, Any]]
    by_iteration: list[dict[str, Any]]
    by_dollars: dict[str, Any]
    url: str


def _out(request: HttpRequest, campaign: Any) -> dict[str, Any]:
    report = campaign_report(campaign)
    report["url"] = request.build_absolute_uri(campaign.get_absolute_url())
    return report


@router.post("/campaigns", auth=api_role(ENGINEER), response={201: CampaignOut, 400: ErrorOut, 403: ErrorOut,
                                                              404: ErrorOut}, summary="Launch a campaign")
def create_campaign(request: HttpRequest, payload: CampaignIn) -> Status:
    campaign = services.create_campaign(request.auth, **payload.dict())
    return Status(201, _out(request, campaign))


@router.get("/campaigns", auth=api_optional_auth, response=list[CampaignOut], summary="List the campaigns you may see")
def list_campaigns(request: HttpRequest, limit: int = 20, offset: int = 0) -> list[dict[str, Any]]:
    limit = max(1, min(limit, 100))
    campaigns = services.visible_campaigns(request.auth)[max(0, offset): max(0, offset) + limit]
    return [_out(request, campaign) for campaign in campaigns]


@router.get("/campaigns/{int:campaign_id}", auth=api_optional_auth, response={200: CampaignOut, 404: ErrorOut},
            summary="Read a campaign: headline, a row per problem, the curves")
def read_campaign(request: HttpRequest, campaign_id: int) -> dict[str, Any]:
    return _out(request, services.get_campaign_for_user(request.auth, campaign_id))


@router.post("/campaigns/{int:campaign_id}/cancel", auth=api_role(ENGINEER),
             response={200: CampaignOut, 403: ErrorOut, 404: ErrorOut}, summary="Cancel a campaign")
def cancel_campaign(request: HttpRequest, campaign_id: int) -> dict[str, Any]:
    campaign = services.get_campaign_for_user(request.auth, campaign_id, write=True)
    return _out(request, services.cancel_campaign(campaign, request.auth))


@router.get("/campaigns/{int:campaign_id}/export.csv", auth=api_optional_auth, response={400: ErrorOut, 404: ErrorOut},
            summary="A finished campaign as CSV, one line per problem",
            # The CSV itself is no JSON schema: its answer is declared here, with its columns.
            openapi_extra={"responses": {200: {"description": "One line per problem: " + ", ".join(CSV_COLUMNS),
                                               "content": {"text/csv": {"schema": {"type": "string"}}}}}})
def export_csv(request: HttpRequest, campaign_id: int) -> HttpResponse:
    campaign = services.get_campaign_for_user(request.auth, campaign_id)
    require_finished(campaign)
    return HttpResponse(campaign_csv(campaign), content_type="text/csv")
