"""/ws/runs/<id>/?after=<seq>: a run's events, replayed from the database and then streamed live.

The consumer joins the run's group BEFORE reading the database, so an event committed after the read
is also published to it; events it has already sent (seq <= last sent) are dropped and a gap in the
live stream is filled from the database. The client therefore sees every seq exactly once, in order.
Each message is JSON: {"type": "event", "event": {run, seq, kind, payload, time}, "html": fragment};
clients that prefer htmx out-of-band swaps connect with ?format=html and receive the fragment alone.
Live events arrive one channel-layer message per transaction, rendered and encoded once by the publisher
(optimizer.events), so a web process sends the same bytes to each of its clients.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.core.exceptions import PermissionDenied
from django.http import Http404

from optimizer.events import EVENT_MESSAGE_TYPE, EVENTS_MESSAGE_TYPE, events_after, group_name, render_event
from optimizer.services import get_run_for_user

REPLAY_PAGE = 500
# Close codes (4000-4999 are the application's): the browser can tell "not allowed" from a network drop.
CLOSE_NOT_ALLOWED = 4403
CLOSE_BAD_REQUEST = 4400


class RunEventsConsumer(AsyncJsonWebsocketConsumer):
    run_id: int
    last_seq: int
    html_only: bool

    async def connect(self) -> None:
        params = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
            self.last_seq = max(0, int((params.get("after") or params.get("last_seq") or ["0"])[0]))
        except (KeyError, ValueError):
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        self.html_only = (params.get("format") or ["json"])[0] == "html"
        if not await self._allowed():
            await self.close(code=CLOSE_NOT_ALLOWED)
            return
        await self.channel_layer.group_add(group_name(self.run_id), self.channel_name)
        self.groups.append(group_name(self.run_id))  # so disconnect leaves the group
        await self.accept()
        await self._send_from_database()

    @database_sync_to_async
    def _allowed(self) -> bool:
        try:
            get_run_for_user(self.scope.get("user"), self.run_id)
        except (Http404, PermissionDenied):
            return False
        return True

    async def _send_from_database(self) -> None:
        while True:
            page = await database_sync_to_async(events_after)(self.run_id, self.last_seq, limit=REPLAY_PAGE)
            for event in page:
                await self._send_event(event.to_dict())
            if len(page) < REPLAY_PAGE:
                return

    async def _send_event(self, event: dict[str, Any], html: str | None = None,
                          trace: dict[str, float] | None = None) -> None:
        if html is None:
            html = await database_sync_to_async(render_event)(event)
        if self.html_only:
            await self.send(text_data=html)
        elif trace is not None:  # optimizer.events.TRACE_DIR: the clock readings so far, and this one
            await self.send_json({"type": "event", "event": event, "html": html,
                                  "trace": {**trace, "consumer_send": time.time()}})
        else:
            await self.send_json({"type": "event", "event": event, "html": html})
        self.last_seq = event["seq"]

    async def dispatch(self, message: dict[str, Any]) -> None:
        # channels' dispatch first runs close_old_connections through sync_to_async: a round trip to the one
        # thread-sensitive executor thread, for every message to every consumer. With 25 clients of a run in a
        # web process that was 25 hops in a row per event, most of an event's fan-out time there
        # (docs/benchmarks.md, websocket fan-out). A live event needs the database only to fill a gap, and
        # that goes through database_sync_to_async, which closes old connections itself.
        kind = message.get("type")
        if kind == EVENTS_MESSAGE_TYPE:
            await self.run_events(message)
        elif kind == EVENT_MESSAGE_TYPE:
            await self.run_event(message)
        else:
            await super().dispatch(message)

    async def run_events(self, message: dict[str, Any]) -> None:
        """The events of one transaction (optimizer.events.EVENTS_MESSAGE_TYPE), in seq order, each already
        rendered and encoded by the publisher: sent as they are, the same bytes to every client."""
        trace = message.get("trace")  # present only when the publisher measures (optimizer.events.TRACE_DIR)
        if trace is not None:
            trace = {**trace, "consumer_received": time.time()}
        for item in message["events"]:
            if item["seq"] <= self.last_seq:
                continue  # already sent by the replay (or by the gap filling below)
            if item["seq"] > self.last_seq + 1:
                await self._send_from_database()  # missed some (a dropped message): fill the gap in order
                continue
            if self.html_only:
                await self.send(text_data=item["html"])
            elif trace is not None:
                stamped = json.dumps({**trace, "consumer_send": time.time()})
                await self.send(text_data=f'{item["text"][:-1]}, "trace": {stamped}}}')
            else:
                await self.send(text_data=item["text"])
            self.last_seq = item["seq"]

    async def run_event(self, message: dict[str, Any]) -> None:
        """One live event from the channel layer (optimizer.events.EVENT_MESSAGE_TYPE), encoded here."""
        event = message["event"]
        if event["seq"] <= self.last_seq:
            return  # already sent by the replay
        if event["seq"] > self.last_seq + 1:
            await self._send_from_database()  # missed some (a dropped message): fill the gap in order
            return
        trace = message.get("trace")  # present only when the publisher measures (optimizer.events.TRACE_DIR)
        if trace is not None:
            trace = {**trace, "consumer_received": time.time()}
        await self._send_event(event, message.get("html"), trace)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # Clients only listen; a ping gets the last seq sent, useful for checking a quiet connection.
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong", "last_seq": self.last_seq})
