"""/ws/campaigns/<id>/: a ping whenever one of the campaign's runs moves or the scheduler changes it.

Each message is an htmx out-of-band fragment naming what to re-fetch (data-refresh="progress"); the page's
campaign_stream.js re-fetches the progress fragment at most once a second. The numbers themselves always
come from the database through that fragment, so a missed ping only delays the next refresh.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import PermissionDenied
from django.http import Http404

from campaigns.services import get_campaign_for_user
from campaigns.usage import group_name

CLOSE_NOT_ALLOWED = 4403
CLOSE_BAD_REQUEST = 4400


def ping_html(campaign_id: int, count: int) -> str:
    return (f'<span id="campaign-{campaign_id}-pulse" hx-swap-oob="true" data-refresh="progress" '
            f'data-count="{count}"></span>')


class CampaignConsumer(AsyncWebsocketConsumer):
    campaign_id: int
    count: int = 0

    async def connect(self) -> None:
        try:
            self.campaign_id = int(self.scope["url_route"]["kwargs"]["campaign_id"])
        except (KeyError, ValueError):
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        if not await self._allowed():
            await self.close(code=CLOSE_NOT_ALLOWED)
            return
        await self.channel_layer.group_add(group_name(self.campaign_id), self.channel_name)
        self.groups.append(group_name(self.campaign_id))
        await self.accept()
        await self._ping()  # whatever happened between the page's render and this connection

    @database_sync_to_async
    def _allowed(self) -> bool:
        try:
            get_campaign_for_user(self.scope.get("user"), self.campaign_id)
        except (Http404, PermissionDenied):
            return False
        return True

    async def _ping(self) -> None:
        self.count += 1
        await self.send(text_data=ping_html(self.campaign_id, self.count))

    async def campaign_changed(self, message: dict[str, Any]) -> None:
        """campaigns.usage.CAMPAIGN_MESSAGE_TYPE from the channel layer."""
        await self._ping()
