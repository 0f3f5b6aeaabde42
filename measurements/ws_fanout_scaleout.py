"""50 websocket clients on two web processes, one run driven by a separate run worker, events through Redis:
does every client get every event, in order, and how late?

The scale-out topology of deploy/local.py without Ray (the run worker evaluates in its local executor, so
the measurement is the event path): PostgreSQL, Redis, two daphne processes (embedded worker off) and one
run_worker. A public offline-agent run on silu:mini is queued already paused; half the clients connect to
web A and half to web B; the run is resumed through A's API and every client reads until run.finished.
Each event goes run worker -> Redis -> both daphne processes -> their clients.

Latency is the client's receive time minus RunEvent.created (same machine clock), over the events created
after every client had connected; reported for all clients and per web process. Goal: p95 under 100 ms
on an idle machine.

    .venv/bin/python measurements/ws_fanout_scaleout.py [--clients 50] [--iterations 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deploy.local import manage, topology  # noqa: E402
from deploy.wsclient import watch_run  # noqa: E402

QUEUE_PAUSED = """
from django.db import transaction
from accounts.roles import ENGINEER, grant_role
from accounts.services import create_token
from django.contrib.auth import get_user_model
from benchmark.models import Problem
from optimizer.services import create_run, pause_run
user = get_user_model().objects.create_user("fanout", password="unused")
grant_role(user, ENGINEER)
with transaction.atomic():  # paused before any worker can see it queued
    run = create_run(user, Problem.objects.get(suite="nkibench", slug="silu", case="mini"), is_public=True,
                     search={"iterations": ITERATIONS, "beam_width": 2, "plans_per_candidate": 4, "samples_per_plan": 1})
    pause_run(run, user)
print(run.pk, create_token(user, "fanout").secret)
"""


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    if not values:
        return "no deliveries (no client here)"
    return (f"median {statistics.median(values):6.1f} ms, p95 {p95(values):6.1f} ms, max {max(values):6.1f} ms "
            f"over {len(values)} deliveries")


async def watch_all(ports: list[int], run_id: int, clients: int, resume: callable) -> tuple[float, list, list]:
    logs: list[list[dict]] = [[] for _ in range(clients)]
    where = [ports[index % len(ports)] for index in range(clients)]
    tasks = [asyncio.create_task(watch_run("127.0.0.1", port, run_id, log)) for port, log in zip(where, logs, strict=True)]
    while any(len(log) < 2 for log in logs):  # each has its replay (run.queued, run.paused)
        await asyncio.sleep(0.05)
    connected_at = time.time()
    await asyncio.to_thread(resume)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=1800)
    return connected_at, where, logs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()
    with topology(web=2, workers=1, ray=False) as state:
        run_id, token = manage(state.env, "shell", "-c", QUEUE_PAUSED.replace(
            "ITERATIONS", str(args.iterations))).split()[-2:]
        run_id = int(run_id)

        def resume() -> None:
            import json
            import urllib.request

            request = urllib.request.Request(f"http://127.0.0.1:{state.web_ports[0]}/api/runs/{run_id}/resume",
                                             method="POST", headers={"Authorization": f"Bearer {token}"})
            json.loads(urllib.request.urlopen(request, timeout=60).read())

        load = os.getloadavg()[0]
        started = time.monotonic()
        connected_at, where, logs = asyncio.run(watch_all(state.web_ports, run_id, args.clients, resume))
        wall = time.monotonic() - started
        import psycopg

        with psycopg.connect(state.database_url, autocommit=True) as connection:
            stored = [seq for (seq,) in connection.execute(
                "SELECT seq FROM optimizer_runevent WHERE run_id = %s ORDER BY seq", (run_id,))]

    complete = all([event["seq"] for event in log] == stored for log in logs)
    latencies: dict[int, list[float]] = {port: [] for port in state.web_ports}
    for port, log in zip(where, logs, strict=True):
        for event in log:
            created = datetime.fromisoformat(event["time"]).timestamp()
            if created > connected_at:
                latencies[port].append((event["received_at"] - created) * 1000)
    every = [value for values in latencies.values() for value in values]
    print(f"clients: {args.clients} ({args.clients - args.clients // 2} on web A, {args.clients // 2} on web B), "
          f"events per client: {len(stored)}; every client got all of them once and in order: {complete}")
    print(f"event-to-client latency, all clients: {summary(every)}")
    for name, port in zip("AB", state.web_ports, strict=True):
        print(f"  web {name}: {summary(latencies[port])}")
    print(f"run wall {wall:.1f} s; load average at the start {load:.1f} on {os.cpu_count()} CPUs")
    if not complete:
        raise SystemExit("some client missed, repeated or reordered an event")


if __name__ == "__main__":
    main()
