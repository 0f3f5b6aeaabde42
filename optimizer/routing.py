"""Websocket routes of the optimizer app, collected by accelopt_site/routing.py."""

from __future__ import annotations

from django.urls import path

from optimizer.consumers import RunEventsConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunEventsConsumer.as_asgi(), name="ws-run-events"),
]
