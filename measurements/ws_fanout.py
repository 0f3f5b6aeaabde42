"""50 websocket clients watching one run: does every client get every event, in order, and how late?

Starts a daphne server (embedded run worker, in-memory channel layer, its own SQLite database under a
temporary directory), queues a public offline-agent run on silu:mini and pauses it, connects N clients to
/ws/runs/<id>/, then resumes the run and reads until every client has seen run.finished. Checks that each
client received seqs 1..last exactly once, in order, and equal to the database's log; reports the
event-to-client latency (client receive time minus RunEvent.created, same machine clock) over the events
created after all clients connected. Events recorded outside the server process (the resume itself)
reach clients through the consumer's gap filling and are left out of the latency figures.

    .venv/bin/python measurements/ws_fanout.py [--clients 50] [--iterations 3]

The websocket client is deploy/wsclient.py's minimal RFC 6455 reader (no client library is a dependency).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from deploy.wsclient import WebSocket  # noqa: E402

# --- the server ---------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _django(env: dict[str, str], code: str) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], env=env, cwd=REPO, check=True, capture_output=True,
        text=True, timeout=600,
    ).stdout.strip().splitlines()[-1]


async def _client(host: str, port: int, path: str, received: list[tuple[int, str, float, str]]) -> None:
    sock = await WebSocket.connect(host, port, path)
    try:
        while True:
            text = await sock.receive()
            if text is None:
                return
            now = time.time()
            message = json.loads(text)
            if message.get("type") != "event":
                continue
            event = message["event"]
            received.append((event["seq"], event["kind"], now, event["time"]))
            if event["kind"] in ("run.finished", "run.failed"):
                return
    finally:
        sock.close()


async def _watch(host: str, port: int, run_id: int, clients: int, resume: Callable[[], None]) -> list[list]:
    logs: list[list] = [[] for _ in range(clients)]
    path = f"/ws/runs/{run_id}/"
    tasks = [asyncio.create_task(_client(host, port, path, log)) for log in logs]
    # Every client has its replay (run.queued, run.paused) before the run goes on.
    while any(len(log) < 2 for log in logs):
        await asyncio.sleep(0.05)
    connected_at = time.time()
    await asyncio.to_thread(resume)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=1800)
    return [connected_at, logs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=3)
    args = parser.parse_args()

    var = Path(tempfile.mkdtemp(prefix="ws-fanout-"))
    database = var / "fanout.sqlite3"
    env = {**os.environ, "ACCELOPT_VAR_DIR": str(var), "DATABASE_URL": f"sqlite:///{database}",
           "DJANGO_SETTINGS_MODULE": "accelopt_site.settings", "ACCELOPT_EMBEDDED_WORKER": "1",
           "ACCELOPT_BACKGROUND_BASELINES": "none"}  # only the measured run's evaluations on the CPUs
    env.pop("REDIS_URL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], env=env, cwd=REPO, check=True)
    subprocess.run([sys.executable, "manage.py", "load_suite", "--evaluate", "none", "-v", "0"], env=env, cwd=REPO,
                   check=True, capture_output=True)
    run_id = int(_django(env, (
        "from benchmark.models import Problem; from optimizer.services import create_run, pause_run\n"
        "p = Problem.objects.get(slug='silu', case='mini')\n"
        f"r = create_run(None, p, is_public=True, search={{'iterations': {args.iterations}, 'beam_width': 2, "
        "'plans_per_candidate': 4, 'samples_per_plan': 1})\n"
        "pause_run(r); print(r.pk)"
    )))
    port = _free_port()
    log = (var / "daphne.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                               "accelopt_site.asgi:application"], env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.2)

        def resume() -> None:
            _django(env, f"from optimizer.models import Run; from optimizer.services import resume_run\n"
                         f"resume_run(Run.objects.get(pk={run_id})); print('resumed')")

        started = time.monotonic()
        connected_at, logs = asyncio.run(_watch("127.0.0.1", port, run_id, args.clients, resume))
        wall = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()

    with sqlite3.connect(database) as db:
        stored = [seq for (seq,) in db.execute("SELECT seq FROM optimizer_runevent WHERE run_id = ? ORDER BY seq",
                                               (run_id,))]
    last = max(seq for log in logs for seq, *_ in log)
    expected = [seq for seq in stored if seq <= last]
    complete = all([seq for seq, *_ in log] == expected for log in logs)
    latencies = sorted(
        (received - datetime.fromisoformat(created).timestamp()) * 1000
        for log in logs for _, kind, received, created in log
        if datetime.fromisoformat(created).timestamp() > connected_at and kind != "run.resumed"
    )
    p95 = latencies[min(len(latencies) - 1, int(round(0.95 * (len(latencies) - 1))))]
    print(f"clients: {args.clients}, events per client: {len(expected)} (database: {len(stored)}), "
          f"every client got seqs 1..{last} once and in order: {complete}")
    print(f"event-to-client latency over {len(latencies)} deliveries: median {statistics.median(latencies):.1f} ms, "
          f"p95 {p95:.1f} ms, max {latencies[-1]:.1f} ms; run wall {wall:.1f} s")
    if not complete:
        raise SystemExit("some client missed, repeated or reordered an event")


if __name__ == "__main__":
    main()
