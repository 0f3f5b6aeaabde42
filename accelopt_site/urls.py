"""Site URLs. Apps mount at the root and own their first path segment (benchmark: problems/, kernels/,
leaderboard/; optimizer: runs/; memory: memory/). Reserved here: admin/, accounts/, api/, docs/, healthz,
ops/, static/."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path, re_path

from accelopt_site import views
from accelopt_site.api import api, unknown_endpoint
from accelopt_site.evaluation_queue import evaluation_queue
from accelopt_site.quotas import quota_page

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("docs/<str:name>/", views.doc, name="doc"),
    path("ops/evaluations/", evaluation_queue, name="evaluation_queue"),
    path("ops/quotas/", quota_page, name="quotas"),
    path("admin/", admin.site.urls),
    path("accounts/", include("accounts.urls")),
    path("api/", api.urls),
    re_path(r"^api/(?P<path>.*)$", unknown_endpoint),  # after the API's own: an unknown /api/ path answers JSON
    path("", include("benchmark.urls")),
    path("", include("optimizer.urls")),
    path("", include("memory.urls")),
    path("", include("campaigns.urls")),
    path("", include("mcp_server.urls")),
]
