"""URL confs for the navigation test: the site shell with no app pages, and the same plus a leaderboard."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import include, path

from accelopt_site import views
from accelopt_site.api import api


def leaderboard(request: HttpRequest) -> HttpResponse:
    return render(request, "base.html")


shell_patterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/", include("accounts.urls")),
    path("api/", api.urls),
]

urlpatterns = shell_patterns  # used as "tests.site.navurls"

with_leaderboard = [
    *shell_patterns,
    path("", include(([path("leaderboard/", leaderboard, name="leaderboard")], "benchmark"))),
]
