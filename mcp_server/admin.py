from __future__ import annotations

from typing import Any

from django.contrib import admin

from accounts.roles import is_admin
from mcp_server.models import ToolCall


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ["created", "user", "tool", "transport", "ok", "duration_ms", "arguments_sha256"]
    list_filter = ["tool", "transport", "ok"]
    search_fields = ["user__username", "tool", "arguments_sha256"]
    # A record of what happened: nobody edits it.
    readonly_fields = [field.name for field in ToolCall._meta.fields]

    # Every admin reads the record by role, as agent calls are read on run pages, without a model permission.
    def has_module_permission(self, request: Any) -> bool:
        return is_admin(request.user)

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        return is_admin(request.user)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
