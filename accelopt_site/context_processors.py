from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from accelopt_site.navigation import nav_links
from accounts.roles import roles_of


def site(request: HttpRequest) -> dict[str, Any]:
    """`nav_links` and `user_roles` for every template; lazy, so pages that ignore them pay nothing."""
    return {
        "nav_links": SimpleLazyObject(lambda: nav_links(request.path, request.user)),
        "user_roles": SimpleLazyObject(lambda: roles_of(request.user)),
    }
