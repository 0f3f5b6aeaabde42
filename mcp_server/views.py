"""The page of MCP tool calls: a signed-in user's own, an admin's everyone's (the same rule as GET /api/mcp/calls)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.roles import is_admin
from mcp_server.records import visible_calls

PAGE = 200


@login_required
@require_GET
def tool_calls(request: HttpRequest) -> HttpResponse:
    calls = visible_calls(request.user)
    return render(request, "mcp_server/tool_calls.html", {
        "calls": calls[:PAGE], "everyone": is_admin(request.user), "total": calls.count(), "page": PAGE,
    })
