"""The record of MCP tool calls in the API; accelopt_site/api.py mounts this router under /api/.

GET /api/mcp/calls: the caller's own calls (an admin's: everyone's, or one user's with ?user=).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema

from accounts.auth import api_auth
from mcp_server.records import visible_calls

router = Router()

MAX_PAGE = 200


class ToolCallOut(Schema):
    id: int
    user: str | None
    tool: str
    arguments_sha256: str
    transport: str
    duration_ms: float
    ok: bool
    error: str
    created: datetime


@router.get("/mcp/calls", auth=api_auth, response=list[ToolCallOut], summary="Your MCP tool calls (admins: everyone's)")
def list_calls(request: HttpRequest, user: str = "", tool: str = "", limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
    calls = visible_calls(request.auth)
    if user:
        calls = calls.filter(user__username=user)
    if tool:
        calls = calls.filter(tool=tool)
    start, limit = max(0, offset), max(1, min(limit, MAX_PAGE))
    return [{"id": c.pk, "user": c.user.get_username() if c.user_id else None, "tool": c.tool,
             "arguments_sha256": c.arguments_sha256, "transport": c.transport, "duration_ms": c.duration_ms,
             "ok": c.ok, "error": c.error, "created": c.created} for c in calls[start: start + limit]]
