"""Authentication for the ninja API: a personal bearer token, or the browser's login session.

    from accounts.auth import api_auth, api_optional_auth, api_role

    @router.get("/problems", auth=api_optional_auth)    # anyone; request.auth is the user or AnonymousUser
    @router.post("/kernels", auth=api_role("engineer"))  # 401 without credentials, 403 without the role
    @router.get("/me", auth=api_auth)                    # any signed-in user

A bad or revoked token is refused with 401 even where anonymous access is allowed, so a client never
silently runs as anonymous. Session callers must send the CSRF token on unsafe methods (as htmx does).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from ninja.errors import AuthenticationError, AuthorizationError
from ninja.security import HttpBearer
from ninja.utils import check_csrf

from accounts.roles import ROLES, has_role
from accounts.services import user_for_token

_SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class ApiAuth(HttpBearer):
    """Bearer token or session; optionally requires a role. Documented in OpenAPI as HTTP bearer."""

    def __init__(self, role: str | None = None, *, optional: bool = False) -> None:
        if role is not None and role not in ROLES:
            raise ValueError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
        if role is not None and optional:
            raise ValueError("a role-protected endpoint cannot also allow anonymous callers")
        self.role = role
        self.optional = optional
        super().__init__()

    def __call__(self, request: HttpRequest) -> Any:
        user = self._authenticated_user(request)
        if user is None:
            return AnonymousUser() if self.optional else None  # None -> ninja answers 401
        if self.role is not None and not has_role(user, self.role):
            raise AuthorizationError(message=f"this endpoint needs the {self.role} role")
        return user

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        user = user_for_token(token)
        if user is None:
            raise AuthenticationError(message="the API token is not valid (unknown or revoked)")
        request.user = user
        return user

    def _authenticated_user(self, request: HttpRequest) -> Any:
        header = request.headers.get(self.header)
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != self.openapi_scheme or not token.strip():
                raise AuthenticationError(message="the Authorization header must be 'Bearer <token>'")
            return self.authenticate(request, token.strip())
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            if request.method not in _SAFE_METHODS and check_csrf(request) is not None:
                raise AuthorizationError(message="CSRF check failed for a session-authenticated request")
            return user
        return None


api_auth = ApiAuth()
api_optional_auth = ApiAuth(optional=True)


def api_role(role: str) -> ApiAuth:
    return ApiAuth(role)
