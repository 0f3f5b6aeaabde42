"""Websocket routes of campaigns, collected by accelopt_site/routing.py."""

from __future__ import annotations

from django.urls import path

from campaigns.consumers import CampaignConsumer

websocket_urlpatterns = [
    path("ws/campaigns/<int:campaign_id>/", CampaignConsumer.as_asgi(), name="ws-campaign"),
]
