"""The live-event path as it was before the fan-out fix (issue 22), for side-by-side measurement only
(measurements/ws_fanout_scaleout.py `--variants replay replay@baseline`), never deployed:

- `application`: the site's ASGI application with channels' own consumer dispatch (close_old_connections
  through a thread hop before every message, for every client); served by two extra daphne processes;
- `per_event_send`: one group_send per event, encoded per client by the consumer; the replayer of a
  `@baseline` variant publishes with it instead of optimizer.events._send.

    daphne measurements.ws_fanout_baseline:application
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from channels.consumer import AsyncConsumer

from accelopt_site.asgi import application
from optimizer import events
from optimizer.consumers import RunEventsConsumer
from optimizer.models import RunEvent

RunEventsConsumer.dispatch = AsyncConsumer.dispatch

__all__ = ["application", "per_event_send"]


async def per_event_send(layer: Any, run_id: int, stored: list[RunEvent]) -> None:
    """optimizer.events._send before the fix (with the same TRACE_DIR readings)."""
    publish = time.time()
    lines = []
    for event in stored:
        message = {"type": events.EVENT_MESSAGE_TYPE, "event": event.to_dict(), "html": events.render_event(event)}
        if events.TRACE_DIR:
            message["trace"] = {"publish": publish, "send": time.time(), "batch": len(stored)}
        await layer.group_send(events.group_name(run_id), message)
        if events.TRACE_DIR:
            lines.append(json.dumps({"run": run_id, "seq": event.seq, **message["trace"], "sent": time.time()}))
    if lines:
        with open(os.path.join(events.TRACE_DIR, f"publish-{os.getpid()}.jsonl"), "a") as handle:
            handle.write("".join(line + "\n" for line in lines))
