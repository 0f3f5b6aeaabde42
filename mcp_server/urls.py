"""HTML pages of the MCP app, included at the site root by accelopt_site/urls.py (/mcp itself is not Django's)."""

from __future__ import annotations

from django.urls import path

from mcp_server import views

app_name = "mcp_server"

urlpatterns = [
    path("agents/calls/", views.tool_calls, name="calls"),
]
