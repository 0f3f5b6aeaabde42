from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from accelopt_site.health import site_health


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html")


@never_cache
@require_GET
async def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the channel layer both answer, 503 (same JSON shape) otherwise."""
    report = await site_health()
    return JsonResponse(report, status=200 if report["status"] == "ok" else 503)
