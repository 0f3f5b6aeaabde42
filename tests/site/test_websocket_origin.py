"""The websocket entry point: the origin check guards every socket, and the session user reaches consumers."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator

from accelopt_site.asgi import application


async def connect(origin: bytes | None) -> tuple[bool, WebsocketCommunicator]:
    headers = [(b"origin", origin)] if origin is not None else []
    communicator = WebsocketCommunicator(application, "/ws/ping/", headers=headers)
    connected, _ = await communicator.connect()
    return connected, communicator


@pytest.mark.django_db(transaction=True)
async def test_socket_from_the_sites_own_origin_is_accepted():
    connected, communicator = await connect(b"http://127.0.0.1:8000")
    assert connected
    assert await communicator.receive_json_from() == {"type": "pong", "authenticated": False}
    await communicator.send_json_to({"hello": 1})
    assert await communicator.receive_json_from() == {"type": "pong", "echo": {"hello": 1}}
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_socket_from_another_origin_is_refused():
    connected, communicator = await connect(b"https://evil.example")
    assert not connected
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_socket_without_an_origin_header_is_refused():
    connected, communicator = await connect(None)
    assert not connected
    await communicator.disconnect()
