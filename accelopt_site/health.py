"""Liveness checks behind GET /healthz: each returns a small JSON-able dict with an "ok" flag.

Served in front of Django's middleware (HealthzFront), so a slow page never delays it. The database and
the channel layer are always checked, and the server's watchdog says whether anything stopped making
progress; the Ray cluster only when evaluations run on one
(ACCELOPT_RAY_ADDRESS), through this process's executor: its nodes, their free CPUs, GPUs and NeuronCores.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections

from accelopt_site import watchdog
from benchmark import conf, services

CHANNEL_LAYER_TIMEOUT_S = 2.0
RAY_TIMEOUT_S = 10.0  # the first check in a process also connects it to the cluster


def check_database(alias: str = "default") -> dict[str, Any]:
    connection = connections[alias]
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:  # any driver error means "not healthy"; the message says which
        return {"ok": False, "vendor": connection.vendor, "error": f"{type(error).__name__}: {error}"}
    return {
        "ok": True,
        "vendor": connection.vendor,
        "latency_ms": round((time.perf_counter() - started) * 1e3, 2),
    }


async def check_channel_layer() -> dict[str, Any]:
    """Round-trip one message through the layer: proves publish/subscribe works, not just that it loads."""
    layer = get_channel_layer()
    if layer is None:
        return {"ok": False, "error": "CHANNEL_LAYERS has no default layer"}
    backend = type(layer).__name__
    started = time.perf_counter()
    try:
        channel = await layer.new_channel()
        await layer.send(channel, {"type": "health.ping"})
        message = await asyncio.wait_for(layer.receive(channel), CHANNEL_LAYER_TIMEOUT_S)
    except TimeoutError:
        return {"ok": False, "backend": backend, "error": f"no reply within {CHANNEL_LAYER_TIMEOUT_S} s"}
    except Exception as error:  # e.g. Redis refused the connection
        return {"ok": False, "backend": backend, "error": f"{type(error).__name__}: {error}"}
    if message.get("type") != "health.ping":
        return {"ok": False, "backend": backend, "error": f"unexpected message {message!r}"}
    return {"ok": True, "backend": backend, "latency_ms": round((time.perf_counter() - started) * 1e3, 2)}


def check_ray() -> dict[str, Any] | None:
    """The Ray cluster evaluations run on, seen through this process's executor; None when none is configured."""
    if not conf.ray_address():
        return None
    started = time.perf_counter()
    try:
        described = services.get_executor().describe()
    except Exception as error:  # unreachable head, Ray not installed: evaluations cannot run
        return {"ok": False, "address": conf.ray_address(), "error": f"{type(error).__name__}: {error}"}
    ok = described.get("kind") == "ray" and described.get("alive_nodes", 0) > 0
    report = {"ok": ok, **described, "latency_ms": round((time.perf_counter() - started) * 1e3, 2)}
    if not ok:
        report["error"] = "no alive node in the Ray cluster" if described.get("kind") == "ray" else (
            f"the executor is {described.get('kind')!r}, not Ray")
    return report


def check_progress() -> dict[str, Any] | None:
    """What the server's watchdog finds stalled (the loop, Django's sync thread, an evaluation worker);
    None where no watchdog runs (tests, management commands)."""
    dog = watchdog.current()
    if dog is None:
        return None
    stalls = dog.stalls()
    return {"ok": not stalls, **({"stalled": sorted(stalls.values())} if stalls else {})}


async def site_health() -> dict[str, Any]:
    # Not on Django's one sync thread (thread_sensitive=False): pages queue there under load, and a health
    # check must answer in time whatever they do; that thread's own progress is check_progress's.
    database = await sync_to_async(check_database, thread_sensitive=False)()
    channel_layer = await check_channel_layer()
    report: dict[str, Any] = {"database": database, "channel_layer": channel_layer}
    try:
        ray = await asyncio.wait_for(sync_to_async(check_ray, thread_sensitive=False)(), RAY_TIMEOUT_S)
    except TimeoutError:
        ray = {"ok": False, "error": f"the Ray cluster did not answer within {RAY_TIMEOUT_S:.0f} s"}
    if ray is not None:
        report["ray"] = ray
    if (progress := check_progress()) is not None:
        report["progress"] = progress
    ok = all(part["ok"] for part in report.values())
    return {"status": "ok" if ok else "failing", **report}


class HealthzFront:
    """ASGI: GET /healthz answered here, everything else passed to `app` (Django). Django runs every
    request's middleware on its one sync thread, where /healthz waited behind pages for over a second under
    load; the report itself touches no such thread, and says when that thread is stuck (check_progress)."""

    PATH = "/healthz"

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != self.PATH or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        report = await site_health()
        body = json.dumps(report).encode()
        await send({"type": "http.response.start", "status": 200 if report["status"] == "ok" else 503,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"cache-control", b"max-age=0, no-cache, no-store, must-revalidate, private")]})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
