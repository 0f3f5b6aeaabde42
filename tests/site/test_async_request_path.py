"""Under daphne a page or API request enters Django on the event loop: no middleware makes Django run the
chain through a thread and back (a sync-only one costs every request two thread switches, each waiting for
the GIL, which evaluation and agent threads hold much of the time under load)."""

from __future__ import annotations

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler


def test_no_middleware_is_adapted_between_sync_and_async(monkeypatch) -> None:
    adapted = []
    adapt = BaseHandler.adapt_method_mode

    def counting(self, is_async, method, method_is_async=None, debug=False, name=None):
        result = adapt(self, is_async, method, method_is_async, debug, name)
        if result is not method and (name or "").startswith("middleware "):  # not Django's own process_view hooks
            adapted.append(name)
        return result

    monkeypatch.setattr(BaseHandler, "adapt_method_mode", counting)
    ASGIHandler().load_middleware(is_async=True)
    assert adapted == []
