"""Personal API tokens. Roles are plain Django groups (see accounts/roles.py), so they need no model."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A personal token for `Authorization: Bearer …`.

    Only the SHA-256 digest is stored: the token is shown once, when it is created. A slow password
    hash is not needed because tokens are 256 random bits, not something a person chose.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'laptop CLI'.")
    # First characters of the token, shown in lists so people can tell their tokens apart.
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)  # the lookup on every API request
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "accounts_api_token"
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.user}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
