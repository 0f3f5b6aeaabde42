"""One row per MCP tool call: who called which tool, a digest of its arguments, how long it took, how it ended.

The arguments themselves are not stored (a kernel's source can be private and large); the digest lets a
user or an admin tell two calls with the same arguments apart from different ones.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Transport(models.TextChoices):
    HTTP = "http", "streamable HTTP (/mcp)"
    STDIO = "stdio", "stdio (manage.py mcp)"


class ToolCall(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="mcp_tool_calls"
    )
    tool = models.CharField(max_length=100)
    arguments_sha256 = models.CharField(max_length=64, help_text="sha256 of the arguments as canonical JSON.")
    transport = models.CharField(max_length=8, choices=Transport.choices)
    duration_ms = models.FloatField()
    ok = models.BooleanField(help_text="False when the agent was answered with a tool error.")
    error = models.TextField(blank=True, help_text="The tool error the agent read, if any.")
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["user", "-created"], name="mcp_toolcall_user_recent")]

    def __str__(self) -> str:
        return f"{self.tool} by {self.user or 'nobody'} ({'ok' if self.ok else 'error'}, {self.duration_ms:.0f} ms)"
