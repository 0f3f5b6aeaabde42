"""Driving the studio's MCP server with the SDK's own client, over streamable HTTP (the site's ASGI application,
in process) and over stdio (`manage.py mcp` as a child process).

A test is a plain function that runs its async scenario with `drive(...)` (asgiref's async_to_sync): Django's
sync calls inside the server then run on the test's own thread and database connection, so the server sees
the rows the test made inside its transaction.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
from asgiref.sync import async_to_sync
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.benchmark.conftest import (  # noqa: F401 - fixtures shared with the API's tests
    FakePipeline,
    bearer,
    fake_pipeline,
    inline_evaluations,
    nkibench,
    silu_mini,
)

BASE = "http://testserver"


def asgi_app() -> Any:
    from accelopt_site.asgi import application

    return application


def drive(scenario: Callable[[], Awaitable[Any]]) -> Any:
    """Run an async scenario from a sync test, then stop the MCP session manager started on its loop."""
    from mcp_server.http import McpFront

    async def run() -> Any:
        try:
            return await scenario()
        finally:
            front = _mcp_front(asgi_app())
            if isinstance(front, McpFront):
                await front.mcp_app.aclose()

    return async_to_sync(run)()


def _mcp_front(app: Any) -> Any:
    # EmbeddedWorkerMiddleware -> ProtocolTypeRouter -> McpFront
    router = getattr(app, "app", app)
    return getattr(router, "application_mapping", {}).get("http")


@contextlib.asynccontextmanager
async def http_client(token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=asgi_app()), base_url=BASE, headers=headers)
    async with http, Client(streamable_http_client(f"{BASE}/mcp", http_client=http), cache=None) as client:
        yield client


def payload(result: Any) -> dict[str, Any]:
    """A successful tool result's JSON."""
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def error_text(result: Any) -> str:
    assert result.is_error, result.content
    return result.content[0].text
