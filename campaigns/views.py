"""HTML pages of campaigns: the list, the form, the live campaign page and its fragments, exports, compare.

The campaign page's table and charts are fragments the page re-fetches when the websocket
(campaigns.consumers) says one of the campaign's runs moved, so they are always rendered from the database.
Views parse, authorize, call campaigns.services / progress / reports and render.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.roles import ENGINEER, require_role
from campaigns import services
from campaigns.display import dollar_chart_html, iteration_chart_html
from campaigns.forms import CampaignForm
from campaigns.models import Campaign
from campaigns.progress import campaign_rows, dollar_curve, headline, iteration_curve
from campaigns.reports import campaign_csv, campaign_report, compare, require_finished
from optimizer.services import launchable_problems


@require_GET
def campaign_list(request: HttpRequest) -> HttpResponse:
    campaigns = services.visible_campaigns(request.user).prefetch_related("entries")[:200]
    return render(request, "campaigns/campaign_list.html", {
        "campaigns": campaigns, "can_launch": services.can_launch_campaigns(request.user),
    })


@require_role(ENGINEER)
@require_http_methods(["GET", "POST"])
def campaign_create(request: HttpRequest) -> HttpResponse:
    problems = launchable_problems(request.user)
    form = CampaignForm(request.POST or None, problems=problems)
    if request.method == "POST" and form.is_valid():
        try:
            campaign = services.create_campaign(request.user, **form.campaign_arguments())
        except ValidationError as error:
            form.add_error(None, error)
        else:
            messages.success(request, f"Campaign {campaign.pk} launched: {campaign.entries.count()} problems.")
            return redirect(campaign.get_absolute_url())
    return render(request, "campaigns/campaign_form.html", {"form": form, "scale": form.scale()})


@require_role(ENGINEER)
@require_GET
def campaign_estimate(request: HttpRequest) -> HttpResponse:
    """The campaign form's size warning, re-rendered by htmx as its settings change."""
    form = CampaignForm(request.GET, problems=launchable_problems(request.user))
    form.is_valid()  # the estimate reads whatever is valid so far
    return render(request, "campaigns/partials/scale.html", {"scale": form.scale()})


def _progress_context(request: HttpRequest, campaign: Campaign) -> dict[str, Any]:
    rows = campaign_rows(campaign)
    curve = dollar_curve(rows)
    return {
        "campaign": campaign,
        "can_write": services.can_write_campaign(request.user, campaign),
        "rows": rows,
        "headline": headline(campaign, rows),
        "iteration_chart": iteration_chart_html([(campaign.title, iteration_curve(rows))]),
        "dollar_chart": dollar_chart_html([(campaign.title, curve)]),
        "dollar_curve": curve,
    }


@require_GET
def campaign_detail(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = services.get_campaign_for_user(request.user, pk)
    context = _progress_context(request, campaign)
    context.update(
        search=campaign.config.get("search", {}),
        models=campaign.config.get("models", {}),
        ws_url=f"/ws/campaigns/{campaign.pk}/",
    )
    return render(request, "campaigns/campaign_detail.html", context)


@require_GET
def campaign_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The headline, table and charts, re-fetched by the page when the stream says a run moved."""
    campaign = services.get_campaign_for_user(request.user, pk)
    return render(request, "campaigns/partials/progress.html", _progress_context(request, campaign))


@require_POST
def campaign_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    campaign = services.get_campaign_for_user(request.user, pk, write=True)
    services.cancel_campaign(campaign, request.user)
    messages.info(request, f"Campaign {campaign.pk}: cancelled; its running runs stop before their next step.")
    return redirect(campaign.get_absolute_url())


@require_GET
def campaign_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    campaign = services.get_campaign_for_user(request.user, pk)
    try:
        require_finished(campaign)
    except ValidationError as error:
        return HttpResponse(" ".join(error.messages), status=409, content_type="text/plain")
    if fmt == "csv":
        response = HttpResponse(campaign_csv(campaign), content_type="text/csv")
    else:
        response = HttpResponse(json.dumps(campaign_report(campaign), indent=2), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}.{fmt}"'
    return response


@require_GET
def campaign_compare(request: HttpRequest) -> HttpResponse:
    ids = [int(value) for value in request.GET.getlist("ids") if value.isdigit()]
    campaigns = [services.get_campaign_for_user(request.user, pk) for pk in dict.fromkeys(ids)]
    context: dict[str, Any] = {"campaigns": campaigns}
    try:
        result = compare(campaigns)
    except ValidationError as error:
        context["error"] = " ".join(error.messages)
    else:
        context.update(
            result=result,
            iteration_chart=iteration_chart_html([(c["campaign"].title, c["by_iteration"]) for c in result["columns"]]),
            dollar_chart=dollar_chart_html([(c["campaign"].title, c["by_dollars"]) for c in result["columns"]]),
        )
    return render(request, "campaigns/compare.html", context)
