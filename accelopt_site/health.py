"""Liveness checks behind GET /healthz: each returns a small JSON-able dict with an "ok" flag.

The database and the channel layer are always checked; the Ray cluster only when evaluations run on one
(ACCELOPT_RAY_ADDRESS), through this process's executor: its nodes, their free CPUs, GPUs and NeuronCores.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections

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
    from benchmark import conf, services

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


async def site_health() -> dict[str, Any]:
    database = await sync_to_async(check_database)()
    channel_layer = await check_channel_layer()
    report: dict[str, Any] = {"database": database, "channel_layer": channel_layer}
    try:
        ray = await asyncio.wait_for(sync_to_async(check_ray, thread_sensitive=False)(), RAY_TIMEOUT_S)
    except TimeoutError:
        ray = {"ok": False, "error": f"the Ray cluster did not answer within {RAY_TIMEOUT_S:.0f} s"}
    if ray is not None:
        report["ray"] = ray
    ok = all(part["ok"] for part in report.values())
    return {"status": "ok" if ok else "failing", **report}
