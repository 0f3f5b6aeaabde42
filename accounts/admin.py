from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.http import HttpRequest

from accounts.models import ApiToken

User = get_user_model()

# Fields only a superuser may set: with them an admin-role member could make itself (or a friend) a
# superuser, or hand out any model permission, and so rise above the role it was given.
SUPERUSER_ONLY_USER_FIELDS = ("is_superuser", "user_permissions")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    # The digest is useless to a person and nobody should hand-edit it.
    readonly_fields = ["prefix", "digest", "created_at", "last_used_at"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.user.is_superuser and not request.user.is_superuser:
            return False  # a superuser's tokens are theirs (and other superusers') to revoke
        return super().has_change_permission(request, obj)

    has_delete_permission = has_change_permission


admin.site.unregister(User)


@admin.register(User)
class RoleAwareUserAdmin(UserAdmin):
    """The admin role manages users and their roles (groups); only a superuser grants superuser or model
    permissions, and only a superuser changes, deletes or sets the password of a superuser."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields += [name for name in SUPERUSER_ONLY_USER_FIELDS if name not in fields]
        return fields

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False  # also guards the password form, which asks this
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)


admin.site.unregister(Group)


@admin.register(Group)
class RoleAwareGroupAdmin(GroupAdmin):
    """Admins put people in groups; only a superuser changes what a group may do (its permissions)."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        if not request.user.is_superuser:
            fields.append("permissions")
        return fields
