"""GET /healthz reports the database and the channel layer, and fails loudly when one is down."""

from __future__ import annotations

import pytest
from channels.layers import InMemoryChannelLayer

pytestmark = pytest.mark.django_db


class DeafChannelLayer(InMemoryChannelLayer):
    """Accepts messages and never delivers them, like a layer whose broker went away."""

    async def send(self, channel, message):
        return None


class RefusingChannelLayer(InMemoryChannelLayer):
    async def send(self, channel, message):
        raise ConnectionRefusedError("redis at 127.0.0.1:6379 refused the connection")


def test_healthz_answers_200_with_database_and_channel_layer_status(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    report = response.json()
    assert report["status"] == "ok"
    assert report["database"]["ok"] is True and report["database"]["vendor"] == "sqlite"
    assert report["channel_layer"]["ok"] is True
    assert report["channel_layer"]["backend"] == "InMemoryChannelLayer"
    assert response["Cache-Control"].startswith("max-age=0")


def test_healthz_answers_503_naming_the_channel_layer_error(client, settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.RefusingChannelLayer"}}
    response = client.get("/healthz")
    assert response.status_code == 503
    report = response.json()
    assert report["status"] == "failing"
    assert report["channel_layer"]["ok"] is False
    assert "refused the connection" in report["channel_layer"]["error"]
    assert report["database"]["ok"] is True


def test_healthz_reports_a_layer_that_never_delivers(client, settings, monkeypatch):
    monkeypatch.setattr("accelopt_site.health.CHANNEL_LAYER_TIMEOUT_S", 0.05)
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.DeafChannelLayer"}}
    response = client.get("/healthz")
    assert response.status_code == 503
    assert "no reply within" in response.json()["channel_layer"]["error"]


async def _healthz_through_the_front(app) -> tuple[int, dict]:
    """GET /healthz through HealthzFront as daphne would call it."""
    import json

    from accelopt_site.health import HealthzFront

    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/healthz", "headers": [], "query_string": b""}
    await HealthzFront(app)(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


@pytest.mark.django_db(transaction=True)
async def test_healthz_answers_at_once_while_djangos_sync_thread_is_busy_with_a_slow_page():
    import asyncio
    import time

    from asgiref.sync import sync_to_async

    async def django_must_not_be_called(scope, receive, send):
        raise AssertionError("/healthz went through Django")

    slow_page = asyncio.create_task(sync_to_async(time.sleep)(3))  # holds the one sync thread for 3 s
    await asyncio.sleep(0.1)
    started = time.monotonic()
    status, report = await _healthz_through_the_front(django_must_not_be_called)
    assert time.monotonic() - started < 1.0
    assert status == 200 and report["database"]["ok"] is True
    await slow_page


@pytest.mark.django_db(transaction=True)
async def test_healthz_fails_naming_what_the_watchdog_found_stalled():
    from accelopt_site import watchdog
    from accelopt_site.watchdog import SYNC_THREAD, Watchdog

    dog = Watchdog(0.2)
    dog.beat(SYNC_THREAD)
    watchdog._current["watchdog"] = dog
    try:
        status, report = await _healthz_through_the_front(None)
        assert status == 200 and report["progress"] == {"ok": True}
        dog._beats[SYNC_THREAD] -= 60  # its last beat a minute ago
        status, report = await _healthz_through_the_front(None)
    finally:
        watchdog._current.pop("watchdog", None)
    assert status == 503 and report["status"] == "failing"
    assert report["progress"]["ok"] is False
    assert "Django's sync thread: no progress for 60" in report["progress"]["stalled"][0]
