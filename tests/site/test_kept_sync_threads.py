"""A page served by a sync view starts no thread once the server is warm: Django's per-request sync thread, and
the thread asgiref started to join it, each made the event loop wait in `Thread.start()` for the GIL (the
soak's 1.4-s /healthz stall was caught there). Requests go through the real ASGI application."""

from __future__ import annotations

import threading

from asgiref.testing import ApplicationCommunicator

from accelopt_site.asgi import application


async def get(path: str) -> int:
    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"",
             "headers": [(b"host", b"127.0.0.1")]}
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(10)
    while (await communicator.receive_output(10)).get("more_body", False):
        pass
    await communicator.wait(10)  # the application returns, as under daphne, rather than being cancelled
    return start["status"]


async def test_a_warm_server_starts_no_thread_per_request(monkeypatch) -> None:
    assert await get("/docs/operations/") == 200  # warms a kept thread
    started = []
    start = threading.Thread.start

    def counting(thread: threading.Thread) -> None:
        started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counting)
    for _ in range(3):
        assert await get("/docs/operations/") == 200
    assert started == []
