"""/ops/quotas/ (the admin role): each person's use of the per-person quotas (accounts.quotas), fullest
first, those at or past NEAR_FRACTION of a limit marked, so an admin sees who is about to be refused."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts import quotas
from accounts.roles import ADMIN, require_role
from benchmark.models import Evaluation, EvaluationStatus
from optimizer.models import Run, RunStatus


def quota_usage() -> list[dict[str, Any]]:
    """One row per person with anything queued or running: their user, one Usage per quota, and `near`."""
    evaluations = dict(
        Evaluation.objects.filter(status__in=[EvaluationStatus.QUEUED, EvaluationStatus.RUNNING],
                                  requested_by__isnull=False)
        .values_list("requested_by").annotate(n=Count("id")).order_by()
    )
    runs = dict(
        Run.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING], owner__isnull=False)
        .values_list("owner").annotate(n=Count("id")).order_by()
    )
    users = get_user_model().objects.in_bulk(set(evaluations) | set(runs))
    rows = []
    for pk, user in users.items():
        usages = [
            quotas.Usage(quotas.QUEUED_EVALUATIONS, evaluations.get(pk, 0), quotas.limit(quotas.QUEUED_EVALUATIONS)),
            quotas.Usage(quotas.RUNS_IN_FLIGHT, runs.get(pk, 0), quotas.limit(quotas.RUNS_IN_FLIGHT)),
        ]
        rows.append({"user": user, "usages": usages, "near": any(u.near for u in usages),
                     "fullest": max(u.fraction for u in usages)})
    rows.sort(key=lambda row: (-row["fullest"], row["user"].get_username()))
    return rows


@require_role(ADMIN)
@require_GET
def quota_page(request: HttpRequest) -> HttpResponse:
    limits = [(setting, quotas.QUOTA_NOUNS[setting], quotas.limit(setting))
              for setting in (quotas.QUEUED_EVALUATIONS, quotas.RUNS_IN_FLIGHT)]
    return render(request, "accelopt_site/quotas.html", {
        "rows": quota_usage(), "limits": limits, "near_percent": round(quotas.NEAR_FRACTION * 100),
    })
