"""API-token actions, used by the account page, the API auth and tests alike."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.models import ApiToken
from accounts.roles import ADMIN, grant_role

TOKEN_PREFIX = "aos_"  # makes a leaked token easy to recognise (and to grep for) in logs and repos
# Writing last_used_at on every request would turn each API read into a database write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str  # the only time the plain token exists; never stored


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_token(user: Any, name: str) -> NewToken:
    name = name.strip()
    if not name:
        raise ValueError("an API token needs a name saying what it is for")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name[:100], prefix=secret[: len(TOKEN_PREFIX) + 6], digest=_digest(secret)
    )
    return NewToken(token=token, secret=secret)


def revoke_token(user: Any, token_id: int) -> ApiToken:
    """Revoke one of the user's own tokens; ApiToken.DoesNotExist for anybody else's."""
    token = ApiToken.objects.get(pk=token_id, user=user)
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def user_for_token(secret: str) -> Any | None:
    """The active user owning this active token, or None (unknown, revoked, or user deactivated)."""
    if not secret.startswith(TOKEN_PREFIX):
        return None
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=_digest(secret), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


# --- The first admin ----------------------------------------------------------------------


def create_admin(username: str) -> str | None:
    """Create a superuser in the admin group with a random password; None if the username exists."""
    user_model = get_user_model()
    if user_model.objects.filter(username=username).exists():
        return None
    password = secrets.token_urlsafe(12)
    user = user_model.objects.create_superuser(username=username, email="", password=password)
    grant_role(user, ADMIN)
    return password
