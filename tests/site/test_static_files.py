"""Static assets are served by the ASGI app itself (DEBUG off, no internet, no collectstatic)."""

from __future__ import annotations

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


def test_collectstatic_gathers_plotly_for_a_reverse_proxy(tmp_path, settings):
    from django.core.management import call_command

    settings.STATIC_ROOT = tmp_path / "collected"
    call_command("collectstatic", interactive=False, verbosity=0)
    assert (tmp_path / "collected" / "vendor" / "plotly.min.js").stat().st_size > 1_000_000
    assert (tmp_path / "collected" / "django_htmx" / "ext" / "hx-ws-2.min.js").is_file()
