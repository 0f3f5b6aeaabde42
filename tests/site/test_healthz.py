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
