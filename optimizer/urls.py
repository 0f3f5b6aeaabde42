"""HTML pages of the optimizer app, included at the site root by accelopt_site/urls.py."""

from __future__ import annotations

from django.urls import URLPattern

app_name = "optimizer"

urlpatterns: list[URLPattern] = []
