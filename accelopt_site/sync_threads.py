"""Django's sync code for each HTTP request on a kept thread, never a new one.

For every request Django's ASGI handler opens a `ThreadSensitiveContext`: the request's sync code (sync views,
Django's own `process_view` hooks) runs on a thread made for that request, and on the way out asgiref starts
yet another thread to join it. `Thread.start()` waits until the new thread has run, which needs the GIL; so
the event loop itself waits, with every page, websocket and /healthz behind it, for as long as the evaluation
and agent threads keep the GIL. The soak's stack dump of a 1.4-s /healthz stall caught the loop exactly there
(`ThreadSensitiveContext.__aexit__` → `Thread.start`).

`KeptSyncThreads` wraps Django's ASGI app in a `ThreadSensitiveContext` that brings its own single-thread
executor, taken from a free list and put back after the request. Django's inner context then finds one open
and neither makes nor joins a thread. One request's sync code still runs on one thread (connections are
per-thread), and concurrent requests still run on different threads.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext

KEPT_IDLE = 16  # idle threads kept for the next requests; more concurrent requests than this make new ones


class KeptSyncThreads:
    def __init__(self, app: Any) -> None:
        self.app = app
        self._idle: list[ThreadPoolExecutor] = []
        self._lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        executor = self._take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.app(scope, receive, send)
        except BaseException:
            # Cancelled (the client left) or failed: its thread may still be running this request's sync code,
            # which the next request must not queue behind. It ends by itself once that code returns.
            executor.shutdown(wait=False)
            raise
        self._give_back(executor)

    def _take(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        # Its one thread starts with its first task (a Thread.start on the event loop: once per kept thread, not
        # once per request as before).
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="django-sync")

    def _give_back(self, executor: ThreadPoolExecutor) -> None:
        with self._lock:
            if len(self._idle) < KEPT_IDLE:
                self._idle.append(executor)
                return
        executor.shutdown(wait=False)  # its thread ends by itself; nothing waits for it
