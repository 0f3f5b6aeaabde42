"""/ws/campaigns/<id>/: a ping on connect and whenever one of the campaign's runs publishes events; private
campaigns only for their owner."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from campaigns.consumers import CLOSE_NOT_ALLOWED
from campaigns.routing import websocket_urlpatterns
from campaigns.services import create_campaign
from optimizer.events import record_events
from optimizer.models import Run

from .conftest import TINY

pytestmark = pytest.mark.django_db(transaction=True)


async def connect(campaign_id: int, user):
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/campaigns/{campaign_id}/")
    communicator.scope["user"] = user
    connected, code = await communicator.connect()
    return communicator, connected, code


async def test_the_page_is_pinged_when_a_run_of_the_campaign_moves(problems, owner):
    campaign = await database_sync_to_async(create_campaign)(owner, problems=["double", "triple"], search=TINY)
    communicator, connected, _ = await connect(campaign.pk, owner)
    assert connected
    assert 'data-refresh="progress"' in await communicator.receive_from(timeout=2)  # on connect
    run = await database_sync_to_async(Run.objects.get)()
    await database_sync_to_async(record_events)(run.pk, [("test.tick", {})])
    assert 'data-count="2"' in await communicator.receive_from(timeout=5)
    await communicator.disconnect()


async def test_a_private_campaign_is_closed_to_others(problems, owner, teammate):
    campaign = await database_sync_to_async(create_campaign)(owner, problems=["double"], search=TINY)
    for user in (teammate, AnonymousUser()):
        _, connected, code = await connect(campaign.pk, user)
        assert not connected and code == CLOSE_NOT_ALLOWED
