from __future__ import annotations

from django.contrib import admin

from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    # The digest is useless to a person and nobody should hand-edit it.
    readonly_fields = ["prefix", "digest", "created_at", "last_used_at"]
