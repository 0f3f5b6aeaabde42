"""Static assets are served by the ASGI app itself (DEBUG off, no internet): from the finders when nothing was
collected, and once `make prepare` collected them, under hashed names, compressed, cached for a year."""

from __future__ import annotations

import asyncio
import re
from io import StringIO
from pathlib import Path

import pytest
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.contrib.staticfiles import finders

from accelopt_site.asgi import application


async def fetch(path: str) -> dict:
    """One GET through the real ASGI stack (channels' HttpCommunicator trips on body-less chunks)."""
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
    }
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(10)
    body = b""
    while True:
        chunk = await communicator.receive_output(10)
        body += chunk.get("body", b"")
        if not chunk.get("more_body", False):
            break
    return {"status": start["status"], "body": body}


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("vendor/plotly.min.js", "plotly/package_data/plotly.min.js"),
        ("django_htmx/htmx-2.min.js", "django_htmx/static/django_htmx/htmx-2.min.js"),
        ("django_htmx/ext/hx-ws-2.min.js", "django_htmx/static/django_htmx/ext/hx-ws-2.min.js"),
        ("css/site.css", "static/css/site.css"),
        ("ninja/swagger-ui-bundle.js", "ninja/static/ninja/swagger-ui-bundle.js"),
    ],
)
async def test_asset_is_served_with_debug_off_byte_for_byte(path, source):
    assert settings.DEBUG is False
    response = await fetch(f"/static/{path}")
    assert response["status"] == 200
    on_disk = Path(finders.find(path))
    assert on_disk.as_posix().endswith(source)
    assert response["body"] == on_disk.read_bytes()


async def test_unknown_asset_is_404():
    assert (await fetch("/static/vendor/nothing.js"))["status"] == 404


def test_prepare_collects_compressed_hashed_files_once_and_serves_them_cached(tmp_path, settings):
    from django.core.handlers.asgi import ASGIHandler
    from django.core.management import call_command
    from django.templatetags.static import static

    settings.STATIC_ROOT = tmp_path / "collected"
    out = StringIO()
    call_command("collect_static_if_changed", stdout=out)
    plotly = static("vendor/plotly.min.js")
    assert re.fullmatch(r"/static/vendor/plotly\.min\.[0-9a-f]{12}\.js", plotly)
    collected = tmp_path / "collected" / plotly.removeprefix("/static/")
    assert collected.stat().st_size > 1_000_000 and Path(f"{collected}.br").is_file()
    # Nothing changed: the next `make run` does not compress everything again.
    call_command("collect_static_if_changed", stdout=out)
    assert out.getvalue().count("Static files collected.") == 1 and "collected and compressed already" in out.getvalue()
    # A fresh handler indexes the new STATIC_ROOT (WhiteNoise reads it when the middleware starts).
    headers = asyncio.run(_headers(ASGIHandler(), plotly, b"br, gzip"))
    assert headers[b"content-encoding"] == b"br" and b"immutable" in headers[b"cache-control"]
    assert int(headers[b"content-length"]) < 1_500_000  # 4.7 MB of JavaScript, compressed


async def _headers(app, path: str, encodings: bytes) -> dict[bytes, bytes]:
    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"",
             "headers": [(b"host", b"127.0.0.1"), (b"accept-encoding", encodings)]}
    communicator = ApplicationCommunicator(app, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(30)
    while (await communicator.receive_output(30)).get("more_body", False):
        pass
    assert start["status"] == 200
    return {name.lower(): value for name, value in start["headers"]}
