from __future__ import annotations

from django.apps import AppConfig


class McpServerConfig(AppConfig):
    name = "mcp_server"
    verbose_name = "MCP tools for coding agents"
    default_auto_field = "django.db.models.BigAutoField"
