"""One cap on what a request may upload, the same on every path (pages, the API's JSON and multipart bodies,
imports, /mcp): ACCELOPT_MAX_UPLOAD_BYTES, checked before the body is read, and as it streams when it gives no length.

- `UploadSizeLimit` (ASGI, in asgi.py) and `UploadSizeLimitMiddleware` (Django) refuse a request whose Content-Length is over the cap with 413 before
  Django reads (the ASGI one) or parses (the Django one) any of its body;
- `CappedUploadHandler` (settings.FILE_UPLOAD_HANDLERS) stops a multipart body that grows past the cap while
  it streams (one sent without a Content-Length), with RequestDataTooBig;
- DATA_UPLOAD_MAX_MEMORY_SIZE, the cap for a non-file body (JSON), is the same number;
- files over FILE_UPLOAD_MAX_MEMORY_SIZE are streamed to a temporary file, never held whole in memory.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest, HttpResponse, JsonResponse

from benchmark.sizes import human_bytes

# Multipart boundaries and headers around the files themselves: a body may be this much over the cap.
ENVELOPE_BYTES = 64 * 1024


def max_upload_bytes() -> int:
    return int(settings.ACCELOPT_MAX_UPLOAD_BYTES)


def too_big_message(size: int | None) -> str:
    said = f"the request body is {human_bytes(size)}" if size is not None else "the request body is too large"
    return f"{said}; the limit is {human_bytes(max_upload_bytes())} (ACCELOPT_MAX_UPLOAD_BYTES)"


class CappedUploadHandler(FileUploadHandler):
    """First of the upload handlers: counts the bytes as they stream and stops past the cap."""

    def handle_raw_input(self, input_data: Any, META: dict[str, Any], content_length: int, boundary: Any,
                         encoding: str | None = None) -> None:
        self.seen = 0
        if content_length and content_length > max_upload_bytes() + ENVELOPE_BYTES:
            raise RequestDataTooBig(too_big_message(content_length))

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.seen += len(raw_data)
        if self.seen > max_upload_bytes():
            raise RequestDataTooBig(too_big_message(None))
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


class UploadSizeLimitMiddleware:
    """The same refusal as UploadSizeLimit, as Django middleware (first in MIDDLEWARE): for servers and test
    clients that do not go through asgi.py, and before the CSRF check, which would read a page's form body."""

    # Both modes: a sync-only middleware costs every request under daphne two thread switches, each waiting
    # for the GIL (accelopt_site/staticserving.py says why that matters).
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        refusal = self._refusal(request)
        if iscoroutinefunction(self):
            return self._acall(request, refusal)
        return refusal if refusal is not None else self.get_response(request)

    async def _acall(self, request: HttpRequest, refusal: HttpResponse | None) -> HttpResponse:
        return refusal if refusal is not None else await self.get_response(request)

    @staticmethod
    def _refusal(request: HttpRequest) -> HttpResponse | None:
        length = request.META.get("CONTENT_LENGTH", "")
        if not (length.isdigit() and int(length) > max_upload_bytes() + ENVELOPE_BYTES):
            return None
        message = too_big_message(int(length))
        if request.path.startswith("/api/"):
            return JsonResponse({"detail": message}, status=413)
        return HttpResponse(f"Upload refused: {message}.\n", status=413, content_type="text/plain; charset=utf-8")


class UploadSizeLimit:
    """ASGI middleware: a request that says it is over the cap is answered 413 at once (JSON under /api/, a
    line of text elsewhere), before Django reads, spools or parses any of its body."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            length = dict(scope.get("headers") or []).get(b"content-length", b"")
            if length.isdigit() and int(length) > max_upload_bytes() + ENVELOPE_BYTES:
                await self._refuse(scope, send, int(length))
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope: dict[str, Any], send: Any, size: int) -> None:
        message = too_big_message(size)
        if scope.get("path", "").startswith("/api/"):
            body, kind = json.dumps({"detail": message}).encode(), b"application/json"
        else:
            body, kind = f"Upload refused: {message}.\n".encode(), b"text/plain; charset=utf-8"
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


_STREAMED = -1  # a body that gave no length and streamed past the cap


def cap_daphne_uploads() -> None:
    """In a daphne server, refuse an over-sized body as its headers arrive: Twisted would otherwise store all of
    it and daphne then queue all of it, in 8 KiB messages, in memory before the application could say no (a
    50 MB upload peaked the server at over 1 GB). The body is read off the socket and dropped, so the client,
    which sends all of it first, still gets the 413; nothing of it is kept."""
    from daphne.http_protocol import (
        WebRequest,  # lazy: only a daphne server patches it, never tests or workers
    )

    if getattr(WebRequest, "_accelopt_upload_cap", False):
        return
    got_length, handle_chunk, process = WebRequest.gotLength, WebRequest.handleContentChunk, WebRequest.process

    def capped_got_length(self: Any, length: int | None) -> None:
        self._accelopt_too_big = length if length is not None and length > max_upload_bytes() + ENVELOPE_BYTES else None
        self._accelopt_streamed = 0
        got_length(self, 0 if self._accelopt_too_big is not None else length)

    def capped_chunk(self: Any, data: bytes) -> None:
        if getattr(self, "_accelopt_too_big", None) is not None:
            return
        # A body sent without its length (chunked) is counted as it arrives: past the cap the rest is dropped, and
        # what came before is never queued for the application (/mcp reads a body whole, the SDK's way).
        self._accelopt_streamed = getattr(self, "_accelopt_streamed", 0) + len(data)
        if self._accelopt_streamed > max_upload_bytes() + ENVELOPE_BYTES:
            self._accelopt_too_big = _STREAMED
            return
        handle_chunk(self, data)

    def capped_process(self: Any) -> None:
        size = getattr(self, "_accelopt_too_big", None)
        if size is None:
            process(self)
            return
        message = too_big_message(None if size == _STREAMED else size)
        if self.path.startswith(b"/api/"):
            body, kind = json.dumps({"detail": message}).encode(), b"application/json"
        else:
            body, kind = f"Upload refused: {message}.\n".encode(), b"text/plain; charset=utf-8"
        self.setResponseCode(413)
        self.setHeader(b"Content-Type", kind)
        self.setHeader(b"Content-Length", str(len(body)).encode())
        self.write(body)
        self.finish()

    WebRequest.gotLength, WebRequest.handleContentChunk, WebRequest.process = (
        capped_got_length, capped_chunk, capped_process)
    WebRequest._accelopt_upload_cap = True
