"""Who may do what: the three roles, as Django groups, and the checks every app uses.

Roles are cumulative: a curator can do everything an engineer can, an admin everything a curator can,
and a superuser holds every role. Anonymous visitors (and accounts in no group) are viewers: they can
read public pages only.

    from accounts.roles import CURATOR, has_role, require_role

    @require_role(CURATOR)           # HTML views: anonymous -> login page, wrong role -> 403
    def prune_entry(request, pk): ...

For the API use accounts.auth (ApiAuth / api_role); for websocket consumers call has_role(scope["user"], …)
inside database_sync_to_async.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpRequest, HttpResponse

ENGINEER = "engineer"
CURATOR = "curator"
ADMIN = "admin"
# Lowest to highest; each role includes the ones before it.
ROLES: tuple[str, ...] = (ENGINEER, CURATOR, ADMIN)

ROLE_DESCRIPTIONS = {
    ENGINEER: "upload kernels, launch and cancel their own runs",
    CURATOR: "edit, pin, prune and restore optimization-memory entries",
    ADMIN: "manage users and roles",
}

_CACHE_ATTRIBUTE = "_accelopt_roles"


def _check_role_name(role: str) -> None:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")


def roles_of(user: Any) -> list[str]:
    """The roles a user effectively holds, lowest first (cached on the user object for the request)."""
    if user is None or isinstance(user, AnonymousUser) or not user.is_authenticated or not user.is_active:
        return []
    cached = getattr(user, _CACHE_ATTRIBUTE, None)
    if cached is not None:
        return list(cached)
    if user.is_superuser:
        effective = list(ROLES)
    else:
        groups = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        highest = max((ROLES.index(name) for name in groups), default=-1)
        effective = list(ROLES[: highest + 1])
    setattr(user, _CACHE_ATTRIBUTE, tuple(effective))
    return effective


def has_role(user: Any, role: str) -> bool:
    _check_role_name(role)
    return role in roles_of(user)


def is_engineer(user: Any) -> bool:
    return has_role(user, ENGINEER)


def is_curator(user: Any) -> bool:
    return has_role(user, CURATOR)


def is_admin(user: Any) -> bool:
    return has_role(user, ADMIN)


def visible_owned(user: Any, queryset: Any) -> Any:
    """The rows of `queryset` (with `is_public` and `owner` fields) that `user` may see: public ones for
    everyone, private ones for their owner, all of them for admins. Runs and campaigns share this rule."""
    if is_admin(user):
        return queryset
    if user is not None and user.is_authenticated:
        return queryset.filter(Q(is_public=True) | Q(owner=user))
    return queryset.filter(is_public=True)


def can_write_owned(user: Any, obj: Any) -> bool:
    """Whether `user` may change `obj` (cancel, pause, ...): its owning engineer, or an admin."""
    if user is None or not user.is_authenticated:
        return False
    return is_admin(user) or (obj.owner_id == user.pk and is_engineer(user))


def grant_role(user: Any, role: str) -> None:
    """Put the user in the role's group (running bootstrap_roles first if it has not run)."""
    _check_role_name(role)
    group = Group.objects.filter(name=role).first()
    if group is None:
        bootstrap_roles()  # so the group also gets its permissions, not just its name
        group = Group.objects.get(name=role)
    user.groups.add(group)
    if hasattr(user, _CACHE_ATTRIBUTE):
        delattr(user, _CACHE_ATTRIBUTE)


# Admins manage people through the Django admin, so their group carries these model permissions.
ADMIN_MODEL_PERMISSIONS = (("auth", "user"), ("auth", "group"), ("accounts", "apitoken"))


def bootstrap_roles() -> list[str]:
    """Create the role groups (idempotent) and give the admin group its permissions; returns new names."""
    created = []
    for role in ROLES:
        group, was_created = Group.objects.get_or_create(name=role)
        if was_created:
            created.append(role)
        if role == ADMIN:
            permissions = Permission.objects.filter(
                content_type__app_label__in={app for app, _ in ADMIN_MODEL_PERMISSIONS},
                content_type__model__in={model for _, model in ADMIN_MODEL_PERMISSIONS},
            )
            group.permissions.add(*permissions)
    return created


def require_role(role: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Decorator for HTML views: anonymous visitors go to the login page, others without the role get 403."""
    _check_role_name(role)

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        if iscoroutinefunction(view):

            @wraps(view)
            async def wrapped_async(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                user = await request.auser()
                if not user.is_authenticated:
                    return redirect_to_login(request.get_full_path())
                if not await sync_to_async(has_role)(user, role):
                    raise PermissionDenied(f"This page needs the {role} role.")
                return await view(request, *args, **kwargs)

            return wrapped_async

        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"This page needs the {role} role.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
