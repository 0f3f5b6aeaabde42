"""Streamable HTTP at /mcp, inside the site's own ASGI application (accelopt_site/asgi.py routes /mcp here).

A personal API token is required (`Authorization: Bearer aos_...`, from the account page): a missing, malformed,
unknown or revoked one is a 401 with the REST API's JSON body, before any MCP message is read. The token's
owner goes on the ASGI scope, where the tools find it (mcp_server/server.py).

The SDK's session manager needs a running task group (normally a Starlette lifespan); daphne has no lifespan
protocol, so it is started on the first request, once per event loop. Stateless mode with JSON answers: no
session lives in this process's memory, so any server process can answer any request.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from accounts.services import user_for_token
from mcp_server.server import SCOPE_USER_KEY, build_server

Scope = dict[str, Any]


async def _answer(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="AccelOpt Studio"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _bearer(scope: Scope) -> tuple[str | None, str | None]:
    """(token, None), or (None, why the request is refused)."""
    header = next((value.decode("latin-1") for key, value in scope.get("headers", []) if key == b"authorization"), "")
    if not header:
        return None, ("the MCP endpoint needs a personal API token from your account page: "
                      "'Authorization: Bearer <token>'")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None, "the Authorization header must be 'Bearer <token>'"
    return token.strip(), None


class McpHttpApp:
    """The ASGI application behind /mcp."""

    def __init__(self) -> None:
        self._managers: dict[asyncio.AbstractEventLoop, tuple[StreamableHTTPSessionManager, asyncio.Event,
                                                               asyncio.Task[None]]] = {}

    async def _manager(self) -> StreamableHTTPSessionManager:
        loop = asyncio.get_running_loop()
        if loop not in self._managers:
            server = build_server()  # a manager runs once: one server per loop (cheap: the tools are functions)
            # The SDK's DNS-rebinding check allows localhost only; here the bearer token does that job: a page on
            # another origin that rebinds a name to this server cannot attach the user's token.
            server.streamable_http_app(stateless_http=True, json_response=True,
                                       transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
            manager = server.session_manager
            ready = asyncio.Event()

            async def serve() -> None:
                async with manager.run():
                    ready.set()
                    await asyncio.Event().wait()  # until the loop (the server process) ends, or aclose()

            # A fresh context: the manager outlives this request (and its ThreadSensitiveContext).
            self._managers[loop] = (manager, ready, loop.create_task(serve(), context=contextvars.Context()))
        manager, ready, task = self._managers[loop]
        if not ready.is_set():
            waiting = asyncio.ensure_future(ready.wait())
            await asyncio.wait({waiting, task}, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if task.done():  # it failed to start: the next request tries again, this one says why
                self._managers.pop(loop, None)
                task.result()
                raise RuntimeError("the MCP session manager stopped")
        return manager

    async def aclose(self) -> None:
        """Stop this event loop's session manager (tests end their loop; the server process never calls it)."""
        entry = self._managers.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            entry[2].cancel()
            await asyncio.gather(entry[2], return_exceptions=True)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        # Each request's Django calls get a thread of their own, as Django's ASGIHandler gives its requests:
        # an evaluate_kernel waiting for its result then holds up no other call (nor the run worker).
        async with ThreadSensitiveContext():
            token, refusal = _bearer(scope)
            user = await sync_to_async(user_for_token)(token) if token else None
            if user is None:
                await _answer(send, 401, refusal or "the API token is not valid (unknown or revoked)")
                return
            manager = await self._manager()
            await manager.handle_request({**scope, SCOPE_USER_KEY: user}, receive, send)


def is_mcp_path(path: str) -> bool:
    return path == "/mcp" or path.startswith("/mcp/")


class McpFront:
    """Sends /mcp to the MCP app and everything else to `app` (the site's HTTP application)."""

    def __init__(self, app: Any, mcp_app: McpHttpApp | None = None) -> None:
        self.app = app
        self.mcp_app = mcp_app or McpHttpApp()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and is_mcp_path(scope.get("path", "")):
            await self.mcp_app(scope, receive, send)
            return
        await self.app(scope, receive, send)
