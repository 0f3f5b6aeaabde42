"""A URL conf for the access-rule tests: the real site plus one sample page and API route per role."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path
from ninja import NinjaAPI

from accelopt_site.urls import urlpatterns as site_urlpatterns
from accounts.auth import api_optional_auth, api_role
from accounts.roles import CURATOR, ENGINEER, require_role


@require_role(ENGINEER)
def engineer_page(request: HttpRequest) -> HttpResponse:
    return HttpResponse("engineer page")


@require_role(CURATOR)
def curator_page(request: HttpRequest) -> HttpResponse:
    return HttpResponse("curator page")


@require_role(CURATOR)
async def curator_page_async(request: HttpRequest) -> HttpResponse:
    return HttpResponse("curator page (async)")


sample_api = NinjaAPI(urls_namespace="sample-api", docs_url=None)


@sample_api.get("/public", auth=api_optional_auth)
def public_route(request: HttpRequest) -> dict[str, str]:
    return {"caller": request.auth.get_username() or "anonymous"}


@sample_api.post("/engineer", auth=api_role(ENGINEER))
def engineer_route(request: HttpRequest) -> dict[str, str]:
    return {"caller": request.auth.get_username()}


@sample_api.post("/curator", auth=api_role(CURATOR))
def curator_route(request: HttpRequest) -> dict[str, str]:
    return {"caller": request.auth.get_username()}


urlpatterns = [
    path("sample/engineer/", engineer_page),
    path("sample/curator/", curator_page),
    path("sample/curator-async/", curator_page_async),
    path("sample-api/", sample_api.urls),
    *site_urlpatterns,
]
