"""Recording MCP tool calls (models.ToolCall) and who may read the record: a user their own calls, an admin all."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db.models import QuerySet

from accounts.roles import is_admin
from mcp_server.models import ToolCall

ERROR_LIMIT = 2000


def arguments_digest(arguments: Any) -> str:
    """sha256 of the arguments as canonical JSON (sorted keys), so equal arguments give equal digests."""
    text = json.dumps(arguments if arguments is not None else {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def record_call(user: Any, tool: str, arguments: Any, *, transport: str, duration_ms: float, ok: bool,
                error: str = "") -> ToolCall:
    return ToolCall.objects.create(
        user=user if getattr(user, "is_authenticated", False) else None, tool=str(tool)[:100],
        arguments_sha256=arguments_digest(arguments), transport=transport, duration_ms=duration_ms, ok=ok,
        error=error[:ERROR_LIMIT],
    )


def visible_calls(user: Any) -> QuerySet[ToolCall]:
    """The calls `user` may read: their own, or everybody's for an admin; none for an anonymous caller."""
    calls = ToolCall.objects.select_related("user")
    if is_admin(user):
        return calls
    if user is None or not user.is_authenticated:
        return calls.none()
    return calls.filter(user=user)
