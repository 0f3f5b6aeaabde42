from __future__ import annotations

from django.contrib import admin

from mcp_server.models import ToolCall


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ["created", "user", "tool", "transport", "ok", "duration_ms", "arguments_sha256"]
    list_filter = ["tool", "transport", "ok"]
    search_fields = ["user__username", "tool", "arguments_sha256"]
    # A record of what happened: nobody edits it.
    readonly_fields = [field.name for field in ToolCall._meta.fields]

    def has_add_permission(self, request: object) -> bool:
        return False
