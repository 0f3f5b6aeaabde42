"""The run event log: append with a per-run seq, publish to the run's channel-layer group, render.

Every RunEvent is stored before it is published, and published only after its transaction commits, so
a websocket client that replays from the database and then listens live never sees an event the
database does not hold. Seqs are gapless per run (1, 2, 3, ...): a client that has seen seq n asks for
everything after n and gets exactly what it missed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import F
from django.template.loader import render_to_string

from optimizer.models import Run, RunEvent

logger = logging.getLogger(__name__)

EVENTS_MESSAGE_TYPE = "run.events"  # the events of one transaction: RunEventsConsumer.run_events
EVENT_MESSAGE_TYPE = "run.event"  # one event, {"event": dict, "html": str}: RunEventsConsumer.run_event
PUBLISH_CHUNK = 50  # events per channel-layer message at most
EVENT_PARTIAL = "optimizer/partials/event.html"

# Measurement hook (measurements/ws_fanout_scaleout.py), off unless the environment names a directory: each
# published message then carries the publisher's clock (publish start, its group_send start) and the
# consumers add theirs, so a client can split its latency by hop; the publisher also writes when each
# group_send returned to <dir>/publish-<pid>.jsonl. Read once at import: the normal path pays one `if`.
TRACE_DIR = os.environ.get("ACCELOPT_EVENT_TRACE", "")

# Kinds the worker and the services add around the search's own (engine.search.EVENT_KINDS).
RUN_LIFECYCLE_KINDS = ("run.queued", "run.paused", "run.resumed", "run.cancelled", "run.resumed_after_crash",
                       "run.continued")


# Awaited with (run_id, events) after each publish, in the publishing process: how an app above the optimizer
# (campaigns) follows runs without the optimizer importing it. A failing listener is logged, never raised.
EventListener = Callable[[int, list[RunEvent]], Awaitable[None]]
_listeners: list[EventListener] = []


def register_event_listener(listener: EventListener) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def group_name(run_id: int) -> str:
    return f"run-{run_id}"


def append_events(run_id: int, events: Sequence[tuple[str, dict[str, Any]]]) -> list[RunEvent]:
    """Store events with the next seqs of the run. Call inside the transaction that makes them true.

    The seq counter is bumped with an UPDATE first, which takes the row's write lock (PostgreSQL) or the
    database write lock (SQLite) before the number is read, so two writers never get the same seq.
    """
    if not events:
        return []
    with transaction.atomic():
        updated = Run.objects.filter(pk=run_id).update(next_event_seq=F("next_event_seq") + len(events))
        if not updated:
            raise Run.DoesNotExist(f"append_events: no run with id {run_id}")
        end = Run.objects.values_list("next_event_seq", flat=True).get(pk=run_id)
        first = end - len(events)
        rows = [
            RunEvent(run_id=run_id, seq=first + offset, kind=kind, payload=payload)
            for offset, (kind, payload) in enumerate(events)
        ]
        return RunEvent.objects.bulk_create(rows)


def events_after(run: Run | int, seq: int = 0, *, limit: int | None = None) -> list[RunEvent]:
    """The run's events with seq > `seq`, in order (at most `limit`)."""
    run_id = run if isinstance(run, int) else run.pk
    events = RunEvent.objects.filter(run_id=run_id, seq__gt=seq).order_by("seq")
    return list(events[:limit] if limit is not None else events)


def client_text(event: dict[str, Any], html: str) -> str:
    """The websocket message a JSON client gets for one event (RunEventsConsumer sends it as is)."""
    return json.dumps({"type": "event", "event": event, "html": html})


def _messages(events: list[RunEvent]) -> list[dict[str, Any]]:
    """The events as EVENTS_MESSAGE_TYPE messages of at most PUBLISH_CHUNK, each event rendered and encoded once
    here, not once per watching client."""
    items = []
    for event in events:
        data = event.to_dict()
        html = render_event(data)
        items.append({"seq": event.seq, "html": html, "text": client_text(data, html)})
    return [{"type": EVENTS_MESSAGE_TYPE, "events": items[start:start + PUBLISH_CHUNK]}
            for start in range(0, len(items), PUBLISH_CHUNK)]


async def publish_events_async(run_id: int, events: Iterable[RunEvent]) -> None:
    events = list(events)
    layer = get_channel_layer()
    if layer is not None and events:
        await _send(layer, run_id, events)
    for listener in list(_listeners):
        try:
            await listener(run_id, events)
        except Exception:
            logger.exception("run %s: event listener %r failed", run_id, listener)


async def _send(layer: Any, run_id: int, events: list[RunEvent]) -> None:
    # One group_send for the events of one transaction: each group_send is several Redis round trips here and
    # a message for every web process to receive and hand to each of its consumers, so a step's 8 events
    # sent one by one queued behind each other at both ends (docs/benchmarks.md, websocket fan-out).
    publish = time.time() if TRACE_DIR else 0.0
    for message in _messages(events):
        if TRACE_DIR:
            message["trace"] = {"publish": publish, "send": time.time(), "batch": len(events)}
        try:
            await layer.group_send(group_name(run_id), message)
        except Exception:  # a broken channel layer must not stop the run; clients replay from the database
            logger.exception("run %s: could not publish events %s-%s", run_id, events[0].seq, events[-1].seq)
        if TRACE_DIR:
            _write_trace(run_id, message)


def _write_trace(run_id: int, message: dict[str, Any]) -> None:
    """TRACE_DIR: when this message's group_send returned, per event (after the send, never between)."""
    sent = time.time()
    with open(os.path.join(TRACE_DIR, f"publish-{os.getpid()}.jsonl"), "a") as handle:
        handle.write("".join(json.dumps({"run": run_id, "seq": item["seq"], **message["trace"], "sent": sent}) + "\n"
                             for item in message["events"]))


def publish_events(run_id: int, events: Iterable[RunEvent]) -> None:
    """From synchronous code (services, views): publish once the surrounding transaction commits."""
    events = list(events)
    if events:
        transaction.on_commit(lambda: async_to_sync(publish_events_async)(run_id, events))


def record_events(run_id: int, events: Sequence[tuple[str, dict[str, Any]]]) -> list[RunEvent]:
    """append_events + publish_events, for synchronous callers."""
    with transaction.atomic():
        stored = append_events(run_id, events)
        publish_events(run_id, stored)
    return stored


def warm_up() -> None:
    """Create the channel layer (importing its Redis client) and load the event partial and the URLconf it
    reverses now, in a process about to publish events (the run worker at start): otherwise the first batches
    of its first run wait for them (50-250 ms and 0.3-0.8 s measured on a loaded 2-core machine,
    docs/benchmarks.md). Rendering a candidate.written event loads both the partial and the URLconf."""
    get_channel_layer()
    render_event({"run": 1, "seq": 0, "kind": "candidate.written", "time": None,
                  "payload": {"candidate_key": "1.0.0.0", "plan_key": "1.0.0", "iteration": 1}})


def render_event(event: RunEvent | dict[str, Any]) -> str:
    """The HTML fragment for one event (sent by the consumer as an htmx out-of-band swap).

    The run page template decides how each kind looks; this only renders the shared partial.
    """
    data = event.to_dict() if isinstance(event, RunEvent) else event
    try:
        return render_to_string(EVENT_PARTIAL, {"event": data, "kind_class": data["kind"].replace(".", "-")})
    except Exception:  # a broken fragment must not stop the run or the stream; the JSON still goes out
        logger.exception("run %s: could not render event %s (%s)", data.get("run"), data.get("seq"), data.get("kind"))
        return ""
