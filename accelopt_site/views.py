from __future__ import annotations

import re

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
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


@require_GET
def doc(request: HttpRequest, name: str) -> HttpResponse:
    """A guide from the checkout's docs/ as plain Markdown text, so form help can link to the one true copy
    (docs/operations.md) instead of restating it; the server has no internet to link to a hosted copy."""
    path = settings.BASE_DIR / "docs" / f"{name}.md"
    if not re.fullmatch(r"[a-z0-9-]+", name) or not path.is_file():
        raise Http404(f"no guide named {name!r}")
    return HttpResponse(path.read_text(encoding="utf-8"), content_type="text/plain; charset=utf-8")
