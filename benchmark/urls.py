"""HTML pages of the benchmark app, included at the site root by accelopt_site/urls.py."""

from __future__ import annotations

from django.urls import URLPattern

app_name = "benchmark"

urlpatterns: list[URLPattern] = []
