"""Websocket URL patterns: the site's own, plus `websocket_urlpatterns` from each app's routing.py.

An app adds live endpoints by creating `<app>/routing.py` with a `websocket_urlpatterns` list; nothing
here needs editing. Paths start with ws/ (e.g. optimizer: ws/runs/<id>/).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from django.apps import apps
from django.urls import path

from accelopt_site.consumers import PingConsumer


def collect_websocket_urlpatterns() -> list[Any]:
    patterns: list[Any] = [path("ws/ping/", PingConsumer.as_asgi(), name="ws-ping")]
    for config in apps.get_app_configs():
        module_name = f"{config.name}.routing"
        if config.name == "accelopt_site" or importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        patterns.extend(getattr(module, "websocket_urlpatterns", []))
    return patterns


websocket_urlpatterns = collect_websocket_urlpatterns()
