"""WhiteNoise's middleware, able to run in the async request path.

WhiteNoise's own middleware is sync-only, so under daphne Django ran it through `sync_to_async` and the rest of
the chain back through `async_to_sync`: two thread switches for every page and API request. Each switch waits
for the GIL, which the server's evaluation and agent threads hold much of the time under load. Serving a file
is the same call either way: a dictionary lookup, then a streamed file response that Django's ASGI handler
iterates off the event loop.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware


class AsyncCapableWhiteNoiseMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any = None) -> None:
        super().__init__(get_response)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        static_file = self.find_file(request.path_info) if self.autorefresh else self.files.get(request.path_info)
        if static_file is not None:
            return self.serve(static_file, request)
        return await self.get_response(request)
