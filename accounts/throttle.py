"""Login throttling (django-axes): after ACCELOPT_LOGIN_FAILURE_LIMIT wrong passwords for one username from one
address, that pair is refused for ACCELOPT_LOGIN_COOLOFF_MINUTES, with a page saying so (429). Locking the
pair, not the username alone, keeps a stranger from locking a colleague out by guessing at their name.

Settings are in accelopt_site/settings.py ("People"); docs/operations.md says how to change them and how an
admin lifts a lock early (`manage.py axes_reset_username NAME`).
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_cool_off
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class LoginThrottleBackend(AxesStandaloneBackend):
    """Axes' check, for every login that comes through a request (the login page, the admin's). A call with no
    request is the process itself (the test client's login(), a shell), not a visitor: nothing to throttle."""

    def authenticate(self, request: HttpRequest | None = None, username: str | None = None,
                     password: str | None = None, **kwargs: Any) -> Any:
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def locked_out(request: HttpRequest, original_response: HttpResponse | None = None,
               credentials: dict[str, Any] | None = None) -> HttpResponse:
    """The page a locked-out visitor gets instead of the login form: what happened and when to try again."""
    cool_off = get_cool_off(request)
    minutes = max(1, round(cool_off.total_seconds() / 60)) if cool_off else None
    context = {
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "minutes": minutes,
        "username": (credentials or {}).get("username") or request.POST.get("username", ""),
    }
    return render(request, "registration/locked_out.html", context, status=429)
