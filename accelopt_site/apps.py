from __future__ import annotations

from django.apps import AppConfig


class AccelOptSiteConfig(AppConfig):
    """The project package is also an app so it can own site-wide commands (prepare) and checks."""

    name = "accelopt_site"
    verbose_name = "AccelOpt Studio site"
    default_auto_field = "django.db.models.BigAutoField"
