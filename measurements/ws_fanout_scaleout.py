"""50 websocket clients on two web processes, one run driven by a separate run worker, events through Redis:
does every client get every event, in order, and how late?

The scale-out topology of deploy/local.py without Ray (the run worker evaluates in its local executor):
PostgreSQL, Redis, two daphne processes (embedded worker off) and one run_worker. A public offline-agent run
on silu:mini is queued already paused; half the clients connect to web A and half to web B; the run is
resumed through A's API and every client reads until run.finished. Each event goes run worker -> Redis ->
both daphne processes -> their clients.

Latency is the client's receive time minus RunEvent.created (same machine clock), over the events created
after every client had connected; reported for all clients and per web process. Goal: p95 under 100 ms
on an idle machine.

Variants, measured one after the other in the same topology (side by side on a shared machine):
  run        the run above, the clients in one process of their own
  replay     that run's events again, same batches (one per transaction) at the same times, stored and
             published by a process that evaluates nothing: the event path alone
  <v>/N      the clients spread over N processes (is one client process the tail?)
  <v>@baseline  the live-event path as it was before the fix (measurements/ws_fanout_baseline.py): the clients
             on two more daphne processes serving it, a replay published one event per group_send
  <v>@per-event  a replay published one event per group_send, to the fixed web processes: the consumer's
             dispatch fix alone, without one message per transaction
--trace makes every process stamp each event as it passes (optimizer.events.TRACE_DIR) and prints the
latency split by hop at p50/p95, and the hops' share of the slowest 5 %.

    .venv/bin/python measurements/ws_fanout_scaleout.py [--clients 50] [--iterations 3]
        [--variants run replay replay/4] [--trace]

The last line is a one-line summary of the first variant (for re-running on a quieter machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deploy.local import PYTHON, REPO, manage, start_web, topology  # noqa: E402
from deploy.wsclient import watch_run  # noqa: E402

QUEUE_PAUSED = """
from django.db import transaction
from accounts.roles import ENGINEER, grant_role
from accounts.services import create_token
from django.contrib.auth import get_user_model
from benchmark.models import Problem
from optimizer.services import create_run, pause_run
user, _ = get_user_model().objects.get_or_create(username="fanout")
grant_role(user, ENGINEER)
with transaction.atomic():  # paused before any worker can see it queued
    run = create_run(user, Problem.objects.get(suite="nkibench", slug="silu", case="mini"), is_public=True,
                     search={"iterations": ITERATIONS, "beam_width": 2, "plans_per_candidate": 4, "samples_per_plan": 1})
    pause_run(run, user)
print(run.pk, create_token(user, "fanout").secret)
"""

# Stores and publishes recorded batches at their recorded offsets, through the same code as the run worker's
# recorder (append_events in a transaction, then publish_events_async); it evaluates nothing.
REPLAYER = """
import asyncio, json, os, sys, time
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction
from optimizer.events import append_events, publish_events_async, warm_up
spec = json.loads(open(os.environ["WS_FANOUT_REPLAY"]).read())
if spec["per_event"]:  # publish one event per group_send, as before the fix
    import optimizer.events
    from measurements.ws_fanout_baseline import per_event_send
    optimizer.events._send = per_event_send
def store(events):
    with transaction.atomic():
        return append_events(spec["run"], [tuple(event) for event in events])
async def replay():
    # Warmed up as a run worker is by its earlier runs: the event template loaded, Redis connected.
    warm_up()
    await get_channel_layer().group_send("warm-up", {"type": "none"})
    await sync_to_async(store)([])  # the database connection opened
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    start = time.monotonic()
    for offset, events in spec["batches"]:
        await asyncio.sleep(max(0.0, start + offset - time.monotonic()))
        await publish_events_async(spec["run"], await sync_to_async(store)(events))
asyncio.run(replay())
"""

TRACE_HOPS = (  # (name, from, to) over a delivery's clock readings
    ("stored -> publish starts (rest of the transaction, commit)", "created", "publish"),
    ("publish -> its group_send starts (earlier events of the batch)", "publish", "send"),
    ("group_send (run worker -> Redis)", "send", "sent"),
    ("Redis -> consumer handler (daphne's receive loop, other consumers)", "sent", "consumer_received"),
    ("consumer handler -> it calls send", "consumer_received", "consumer_send"),
    ("send called -> client has it (encode, daphne, kernel, client process)", "consumer_send", "received_at"),
)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    if not values:
        return "no deliveries (no client here)"
    return (f"median {statistics.median(values):6.1f} ms, p95 {p95(values):6.1f} ms, max {max(values):6.1f} ms "
            f"over {len(values)} deliveries")


# --- clients -------------------------------------------------------------------------------------------


def _client_process(ports: list[int], run_id: int, indexes: list[int], queue: multiprocessing.Queue) -> None:
    """Clients `indexes` (client i on ports[i % len(ports)]); says when all have their replay, then sends
    what each received (without payloads: only what the latency needs)."""
    async def watch() -> list[list[dict]]:
        logs: list[list[dict]] = [[] for _ in indexes]
        tasks = [asyncio.create_task(watch_run("127.0.0.1", ports[index % len(ports)], run_id, log))
                 for index, log in zip(indexes, logs, strict=True)]
        while any(len(log) < 2 for log in logs):  # each has its replay (run.queued, run.paused)
            await asyncio.sleep(0.05)
        queue.put(("connected", os.getpid()))
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=1800)
        return logs

    logs = asyncio.run(watch())
    slim = [[{key: event[key] for key in ("seq", "kind", "time", "received_at", "trace") if key in event}
             for event in log] for log in logs]
    queue.put(("logs", list(zip(indexes, slim, strict=True))))


def watch_all(ports: list[int], run_id: int, clients: int, processes: int, start: callable) -> tuple[float, list]:
    """Connect `clients` spread over `processes` client processes, call start() once all are connected,
    return (connected time, each client's log in client order)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    shares = [list(range(clients))[share::processes] for share in range(processes)]
    children = [context.Process(target=_client_process, args=(ports, run_id, share, queue), daemon=True)
                for share in shares if share]
    for child in children:
        child.start()
    for _ in children:
        kind, _pid = queue.get(timeout=300)
        assert kind == "connected", kind
    connected_at = time.time()
    start()
    logs: list[list[dict]] = [[] for _ in range(clients)]
    for _ in children:
        kind, pairs = queue.get(timeout=1800)
        for index, log in pairs:
            logs[index] = log
    for child in children:
        child.join(timeout=30)
    return connected_at, logs


# --- the two ways of producing events ------------------------------------------------------------------


def queue_paused_run(state, iterations: int) -> tuple[int, str]:
    run_id, token = manage(state.env, "shell", "-c", QUEUE_PAUSED.replace("ITERATIONS", str(iterations))).split()[-2:]
    return int(run_id), token


def stored_events(state, run_id: int) -> list[tuple]:
    """(seq, kind, payload, created, transaction id) of the run's events, in order."""
    import psycopg

    with psycopg.connect(state.database_url, autocommit=True) as connection:
        return list(connection.execute(
            "SELECT seq, kind, payload, created, xmin::text FROM optimizer_runevent WHERE run_id = %s ORDER BY seq",
            (run_id,)))


def resume_through_api(port: int, run_id: int, token: str) -> None:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/runs/{run_id}/resume", method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
    json.loads(urllib.request.urlopen(request, timeout=60).read())


def replay_spec(recorded: list[tuple], run_id: int) -> dict:
    """The recorded run's events after its queue/pause (the replay run has its own), one batch per transaction,
    each at its offset from the first."""
    batches: list[tuple[float, list]] = []
    first = None
    last_xid = None
    for _seq, kind, payload, created, xid in recorded[2:]:
        first = first or created
        if xid != last_xid:
            batches.append(((created - first).total_seconds(), []))
            last_xid = xid
        batches[-1][1].append([kind, payload])
    return {"run": run_id, "batches": batches}


def measure(state, variant: str, recorded: list[tuple] | None, clients: int, iterations: int,
            ports: list[int]) -> dict:
    source, _, processes = variant.partition("@")[0].partition("/")
    processes = int(processes or 1)
    run_id, token = queue_paused_run(state, iterations)
    replayer = None
    if source == "replay":
        spec_file = Path(state.directory) / f"replay-{run_id}.json"
        per_event = "@baseline" in variant or "@per-event" in variant
        spec_file.write_text(json.dumps({**replay_spec(recorded, run_id), "per_event": per_event}, default=str))
        replayer = subprocess.Popen([PYTHON, "manage.py", "shell", "-c", REPLAYER], cwd=REPO, text=True,
                                    env={**state.env, "WS_FANOUT_REPLAY": str(spec_file)},
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        while (line := replayer.stdout.readline()) and line.strip() != "ready":  # after Django's own lines
            pass
        if not line:
            raise RuntimeError(f"the replayer exited with {replayer.wait()} before it was ready")

        def start() -> None:
            replayer.stdin.write("go\n")
            replayer.stdin.flush()
    else:
        def start() -> None:
            resume_through_api(state.web_ports[0], run_id, token)

    load = os.getloadavg()[0]
    started = time.monotonic()
    connected_at, logs = watch_all(ports, run_id, clients, processes, start)
    wall = time.monotonic() - started
    if replayer is not None:
        replayer.wait(timeout=120)
    events = stored_events(state, run_id)
    seqs = [row[0] for row in events]
    created_by_seq = {row[0]: row[3].timestamp() for row in events}
    complete = all([event["seq"] for event in log] == seqs for log in logs)
    deliveries = []  # (port, latency ms, trace with every reading, or None)
    for index, log in enumerate(logs):
        port = ports[index % len(ports)]
        for event in log:
            created = datetime.fromisoformat(event["time"]).timestamp()
            if created > connected_at:
                trace = {**event["trace"], "created": created_by_seq[event["seq"]],
                         "received_at": event["received_at"]} if "trace" in event else None
                deliveries.append((port, (event["received_at"] - created) * 1000, trace, event["seq"]))
    return {"variant": variant, "run": run_id, "ports": ports, "complete": complete, "events": len(seqs), "load": load,
            "wall": wall, "deliveries": deliveries, "clients": clients}


# --- reporting -------------------------------------------------------------------------------------------


def publisher_readings(trace_dir: Path) -> dict[tuple[int, int], float]:
    """(run, seq) -> when its group_send returned, from every publisher's file."""
    sent = {}
    for path in trace_dir.glob("publish-*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            sent[(record["run"], record["seq"])] = record["sent"]
    return sent


def report_hops(result: dict, sent: dict[tuple[int, int], float]) -> None:
    traced = [(latency, {**trace, "sent": sent[(result["run"], seq)]})
              for _port, latency, trace, seq in result["deliveries"] if trace and (result["run"], seq) in sent]
    if not traced:
        return
    cut = p95([latency for latency, _ in traced])
    tail = [trace for latency, trace in traced if latency >= cut]
    print(f"  by hop over {len(traced)} deliveries (ms): p50, p95, mean in the slowest 5 % ({len(tail)})")
    for name, begin, end in TRACE_HOPS:
        values = [(trace[end] - trace[begin]) * 1000 for _, trace in traced]
        share = statistics.mean((trace[end] - trace[begin]) * 1000 for trace in tail)
        print(f"    {name:<70} {statistics.median(values):7.1f} {p95(values):7.1f} {share:7.1f}")
    batches = [trace["batch"] for _, trace in traced]
    print(f"    events per published batch: median {statistics.median(batches):.0f}, max {max(batches)}; "
          f"in the slowest 5 %: median {statistics.median(trace['batch'] for trace in tail):.0f}")


def report(result: dict, ports: list[int], sent: dict | None) -> str:
    every = [latency for _port, latency, _trace, _seq in result["deliveries"]]
    print(f"{result['variant']}: {result['clients']} clients ({result['clients'] - result['clients'] // 2} on web A, "
          f"{result['clients'] // 2} on web B), events per client: {result['events']}; every client got all of "
          f"them once and in order: {result['complete']}")
    print(f"  event-to-client latency, all clients: {summary(every)}")
    for name, port in zip("AB", ports, strict=True):
        print(f"    web {name}: {summary([latency for where, latency, _, _ in result['deliveries'] if where == port])}")
    print(f"  wall {result['wall']:.1f} s; load average at the start {result['load']:.1f} on {os.cpu_count()} CPUs")
    if sent is not None:
        report_hops(result, sent)
    return (f"SUMMARY ws_fanout_scaleout {result['variant']}: clients {result['clients']}, median "
            f"{statistics.median(every):.1f} ms, p95 {p95(every):.1f} ms, max {max(every):.1f} ms, all events once "
            f"in order: {result['complete']}, load {result['load']:.2f}, goal p95 < 100 ms: "
            f"{'met' if p95(every) < 100 else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--variants", nargs="+", default=["run"],
                        help="run, replay (needs a run before it), each optionally /N client processes, @baseline or @per-event")
    parser.add_argument("--trace", action="store_true", help="split the latency by hop (optimizer.events.TRACE_DIR)")
    parser.add_argument("--dump", type=Path, help="write every delivery and reading to this JSON file")
    args = parser.parse_args()
    if args.variants[0].partition("/")[0] != "run":
        parser.error("the first variant must be a run (a replay replays the last run)")
    if any(variant.startswith("run") and "@" in variant for variant in args.variants):
        parser.error("@baseline and @per-event go with replay only (the run worker publishes the current way)")
    trace_dir = Path(tempfile.mkdtemp(prefix="ws-trace-")) if args.trace else None
    extra = {"ACCELOPT_EVENT_TRACE": str(trace_dir)} if trace_dir else {}
    results, recorded = [], None
    with topology(web=2, workers=1, ray=False, extra_env=extra) as state:
        baseline = []
        if any("@baseline" in variant for variant in args.variants):
            for name in ("web-baseline-1", "web-baseline-2"):
                server, port = start_web(state.env, Path(state.directory) / f"{name}.log",
                                         application="measurements.ws_fanout_baseline:application")
                state.add(server)
                baseline.append(port)
        for variant in args.variants:
            ports = baseline if "@baseline" in variant else state.web_ports
            result = measure(state, variant, recorded, args.clients, args.iterations, ports)
            if variant.partition("/")[0] == "run":
                recorded = stored_events(state, result["run"])
            results.append(result)
    sent = publisher_readings(trace_dir) if trace_dir else None
    if args.dump:
        args.dump.write_text(json.dumps({"results": results, "sent": [[*key, value] for key, value in (sent or {}).items()],
                                         "ports": state.web_ports}, default=str))
    lines = [report(result, result["ports"], sent) for result in results]
    for line in lines[1:]:
        print(line)
    print(lines[0])
    if not all(result["complete"] for result in results):
        raise SystemExit("some client missed, repeated or reordered an event")


if __name__ == "__main__":
    main()
