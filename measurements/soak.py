"""Soak: a real server under ordinary use from several clients at once, for a bounded time. Does it stay
responsive, and does everything it was asked to do end? (issue 32)

    .venv/bin/python measurements/soak.py [--minutes 120] [--clients 4] [--dir DIR]

Starts the server as `make run` does (`manage.py prepare`, then daphne with the embedded run worker and the
background baseline pass, ACCELOPT_BACKGROUND_BASELINES=mini,full by default) on a free port, with its own
SQLite database and var directory (a new temporary one, or --dir), so the developer's data is never touched.
Then, until --minutes have passed, each client thread repeatedly picks one of:
  upload    POST /api/kernels: a mini problem's baseline with a new comment (a new kernel, a new evaluation),
            then polls /api/evaluations/<id> until it is done
  run       POST /api/runs: a small public offline-agent run on a mini problem, its page, then its live
            websocket (/ws/runs/<id>/, deploy/wsclient.py) read until run.finished
  browse    the pages and API lists a visitor and an engineer open (/, leaderboard, problems, runs, the
            evaluation queue as JSON, /api/problems, /api/runs, /api/baselines...)
and one more thread keeps a campaign going (three mini problems, two runs at once: ACCELOPT_WORKER_CONCURRENCY
is --worker-concurrency, 2 by default), watching its websocket. Another thread GETs /healthz every 0.5 s.

After the time is up the clients stop starting work and the script waits (at most --drain-minutes) for every
run and campaign it started, and every evaluation that was pending when the time was up or belongs to one of
its runs, to end (the database says; background baselines started later are not waited for). It then stops
the server with SIGTERM (and says whether that was enough) and prints a summary.

Exit status 1, with the reasons, when /healthz did not answer within --healthz-limit (1 s) even once, when
anything did not end, when a request failed (5xx, no answer within 60 s, a refused websocket) or when the
server died. At the first three slow /healthz answers, and at up to three over LONG_SLOW_S (or unanswered),
the script takes the server's stacks while it is slow (`py-spy dump` when installed, else SIGUSR1, which makes
the server's watchdog dump every thread to its log) and prints the end of the server's log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deploy.local import REPO, Server, StartError, manage, start_web  # noqa: E402
from deploy.wsclient import WebSocket, watch_run  # noqa: E402

HOST = "127.0.0.1"
REQUEST_TIMEOUT_S = 60.0
HEALTHZ_EVERY_S = 0.5
LONG_SLOW_S = 5.0  # a /healthz answer this slow (or none) always gets its stacks taken, up to three times
PROBLEMS = ("silu:mini", "adamw:mini", "swiglu:mini", "rmsnorm_matmul:mini", "matmul:mini", "lora:mini")
CAMPAIGN_PROBLEMS = ["silu:mini", "swiglu:mini", "adamw:mini"]
RUN_SEARCH = {"iterations": 2, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1}
CAMPAIGN_SEARCH = {"iterations": 1, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1}
BROWSE = ("/", "/leaderboard/", "/problems/", "/runs/", "/campaigns/", "/kernels/", "/ops/evaluations/?format=json",
          "/api/problems", "/api/runs", "/api/campaigns", "/api/baselines", "/api/memory")
WATCHDOG_STARTED = "watchdog: logs every thread's stack"  # accelopt_site/watchdog.py, once SIGUSR1 is handled
RUN_END = ("succeeded", "failed", "cancelled", "stopped")

# Engineers with tokens, made in the server's database before it starts.
PEOPLE = """
import json
from django.contrib.auth import get_user_model
from accounts.roles import ENGINEER, grant_role
from accounts.services import create_token
tokens = []
for index in range(COUNT):
    user = get_user_model().objects.create_user(f"soak{index}", password="unused-soak-password")
    grant_role(user, ENGINEER)
    tokens.append(create_token(user, "soak").secret)
print(json.dumps(tokens))
"""


@dataclass
class Record:
    """Everything the clients saw, shared between their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: Counter = field(default_factory=Counter)
    seconds: dict[str, list[float]] = field(default_factory=dict)  # each answered request's time, by kind
    failures: list[str] = field(default_factory=list)
    healthz: list[tuple[float, float]] = field(default_factory=list)  # (when, seconds; inf: no answer)
    runs: set[int] = field(default_factory=set)
    campaigns: set[int] = field(default_factory=set)
    evaluations: set[int] = field(default_factory=set)
    frames: int = 0
    evidence: list[str] = field(default_factory=list)
    slow_healthz: list[str] = field(default_factory=list)  # when, how long, and the checks' own times

    def count(self, kind: str, number: int = 1) -> None:
        with self.lock:
            self.requests[kind] += number

    def fail(self, text: str) -> None:
        with self.lock:
            self.failures.append(f"{time.strftime('%H:%M:%S')} {text}")


class Soak:
    def __init__(self, port: int, tokens: list[str], record: Record, deadline: float, seed: int = 0) -> None:
        self.port, self.tokens, self.record, self.deadline = port, tokens, record, deadline
        self.base = f"http://{HOST}:{port}"
        self.seed = seed
        self.sources: dict[str, str] = {}

    def running(self) -> bool:
        return time.monotonic() < self.deadline

    # --- HTTP ------------------------------------------------------------------------------------------

    def call(self, kind: str, method: str, path: str, token: str | None = None, body: Any = None) -> tuple[int, Any]:
        """One request; counts it, records a 5xx or a missing answer as a failure. Returns (status, JSON or text)."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.base + path, method=method, headers=headers,
                                         data=json.dumps(body).encode() if body is not None else None)
        self.record.count(kind)
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                status, data = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, data = error.code, error.read()
        except OSError as error:
            self.record.fail(f"{method} {path}: no answer ({type(error).__name__}: {error})")
            return 0, None
        with self.record.lock:
            self.record.seconds.setdefault("page" if kind == "page" else "api", []).append(time.monotonic() - started)
        if status >= 500:
            self.record.fail(f"{method} {path}: {status}")
        try:
            return status, json.loads(data)
        except ValueError:
            return status, data.decode(errors="replace")

    def api(self, method: str, path: str, token: str, body: Any = None, expect: int = 200) -> Any:
        status, data = self.call(f"api {method} {path.split('/')[2] if path.count('/') > 1 else path}",
                                 method, path, token, body)
        if status != expect:
            if status:  # a missing answer is already recorded
                self.record.fail(f"{method} {path}: {status} {str(data)[:300]}")
            return None
        return data

    def source_of(self, problem: str, token: str) -> str:
        if problem not in self.sources:
            kernel_id = self.api("GET", f"/api/problems/{problem}", token)["baseline_kernel_id"]
            self.sources[problem] = self.api("GET", f"/api/kernels/{kernel_id}", token)["source"]
        return self.sources[problem]

    # --- what a client does ----------------------------------------------------------------------------

    def upload(self, token: str, rng: random.Random) -> None:
        problem = rng.choice(PROBLEMS)
        source = self.source_of(problem, token) + f"\n# soak upload {uuid.uuid4().hex}\n"
        created = self.api("POST", "/api/kernels", token, {"problem": problem, "source": source}, expect=201)
        if not created or not created.get("evaluation"):
            return
        evaluation_id = created["evaluation"]["id"]
        with self.record.lock:
            self.record.evaluations.add(evaluation_id)
        self.call("page", "GET", f"/kernels/{created['kernel']['id']}/")
        # Poll as the kernel page does, until it is done; the drain at the end waits for the rest.
        while self.running():
            evaluation = self.api("GET", f"/api/evaluations/{evaluation_id}", token)
            if not evaluation or evaluation["status"] == "done":
                return
            time.sleep(2)

    def run(self, token: str, rng: random.Random) -> None:
        body = {"problem": rng.choice(PROBLEMS), "search": {**RUN_SEARCH, "seed": rng.randrange(1000)},
                "is_public": True}
        run = self.api("POST", "/api/runs", token, body, expect=201)
        if not run:
            return
        with self.record.lock:
            self.record.runs.add(run["id"])
        self.call("page", "GET", f"/runs/{run['id']}/")
        received: list[dict[str, Any]] = []
        self.record.count("websocket run")
        try:
            # Until the run ends, or until the soak's time is up (the drain then waits on the database).
            asyncio.run(asyncio.wait_for(watch_run(HOST, self.port, run["id"], received),
                                         max(1.0, self.deadline - time.monotonic())))
        except TimeoutError:
            pass
        except (OSError, ConnectionError, asyncio.IncompleteReadError) as error:
            self.record.fail(f"websocket of run {run['id']}: {type(error).__name__}: {error}")
        with self.record.lock:
            self.record.frames += len(received)
        self.api("GET", f"/api/runs/{run['id']}", token)
        self.call("page", "GET", f"/runs/{run['id']}/")

    def browse(self, token: str, rng: random.Random) -> None:
        for path in rng.sample(BROWSE, 4):
            if path.startswith("/api/"):
                self.api("GET", path, token)
            else:
                status, _ = self.call("page", "GET", path)
                if status not in (200, 0):
                    self.record.fail(f"GET {path}: {status}")

    def client(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        token = self.tokens[index]
        actions: list[Callable[[str, random.Random], None]] = [self.upload, self.run, self.browse, self.browse]
        while self.running():
            action = rng.choice(actions)
            try:
                action(token, rng)
            except Exception as error:  # a client's own bug must show up, not end the soak silently
                self.record.fail(f"client {index} {action.__name__}: {type(error).__name__}: {error}")
                time.sleep(1)

    def campaigns(self) -> None:
        """One campaign at a time, for as long as the soak lasts, its websocket read like the page does."""
        token = self.tokens[-1]
        while self.running():
            campaign = self.api("POST", "/api/campaigns", token, {
                "name": f"soak {len(self.record.campaigns) + 1}", "problems": CAMPAIGN_PROBLEMS,
                "search": CAMPAIGN_SEARCH, "max_concurrent_runs": 2, "is_public": True}, expect=201)
            if not campaign:
                time.sleep(5)
                continue
            with self.record.lock:
                self.record.campaigns.add(campaign["id"])
            self.call("page", "GET", f"/campaigns/{campaign['id']}/")
            try:
                asyncio.run(self._follow_campaign(campaign["id"], token))
            except (OSError, ConnectionError, asyncio.IncompleteReadError) as error:
                self.record.fail(f"websocket of campaign {campaign['id']}: {type(error).__name__}: {error}")

    async def _follow_campaign(self, campaign_id: int, token: str) -> None:
        socket = await WebSocket.connect(HOST, self.port, f"/ws/campaigns/{campaign_id}/")
        self.record.count("websocket campaign")
        try:
            while self.running():
                with contextlib.suppress(TimeoutError):
                    if await asyncio.wait_for(socket.receive(), 5) is None:
                        return
                    with self.record.lock:
                        self.record.frames += 1
                    continue
                state = await asyncio.to_thread(self.api, "GET", f"/api/campaigns/{campaign_id}", token)
                if state and state["finished"]:
                    return
        finally:
            socket.close()

    # --- /healthz --------------------------------------------------------------------------------------

    def poll_healthz(self, stop: threading.Event, limit_s: float, on_slow: Callable[[float, str], None]) -> None:
        while not stop.is_set():
            started = time.monotonic()
            body: Any = {}
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=10) as response:
                    body = json.loads(response.read())
                    latency = time.monotonic() - started if response.status == 200 else float("inf")
            except (OSError, ValueError):
                latency = float("inf")
            with self.record.lock:
                self.record.healthz.append((started, latency))
                self.record.requests["healthz"] += 1
            if latency > limit_s:
                # The checks time themselves: a slow answer with fast checks waited before the view ran.
                inside = ", ".join(f"{part} {body[part]['latency_ms']:.0f} ms" for part in ("database", "channel_layer")
                                   if isinstance(body, dict) and "latency_ms" in body.get(part, {}))
                on_slow(latency, inside or "no answer")
            stop.wait(max(0.0, HEALTHZ_EVERY_S - (time.monotonic() - started)))


# --- evidence and the database's view ---------------------------------------------------------------------


def take_stacks(server: Server) -> str:
    """The server's stacks now: py-spy when installed, else SIGUSR1 (the watchdog's faulthandler dump, into
    the server's log)."""
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if py_spy:
        done = subprocess.run([py_spy, "dump", "--pid", str(server.pid)], capture_output=True, text=True, timeout=60)
        return f"py-spy dump of {server.pid}:\n{done.stdout}{done.stderr}"
    # SIGUSR1 ends a process that has no handler for it: only once the watchdog says it has one.
    if WATCHDOG_STARTED not in server.log.read_text(errors="replace"):
        return "no stacks: py-spy is not installed and the server's watchdog did not start (see its log)"
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, signal.SIGUSR1)
    return f"sent SIGUSR1 to {server.pid}: every thread's stack is in {server.log}"


def log_tail(path: Path, lines: int = 300) -> str:
    """The end of the server's log without daphne's access lines (the stacks and the application's messages)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as error:
        return f"(no log: {error})"
    return "\n".join([line for line in text if not re.match(r"^\S+:\d+ - - \[", line)][-lines:])


def query(database: Path, sql: str, *parameters: Any) -> list[tuple]:
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    try:
        return connection.execute(sql, parameters).fetchall()
    finally:
        connection.close()


def unfinished(database: Path, record: Record, last_evaluation_at_deadline: int) -> list[str]:
    """What the soak started, or found pending when its time was up, that has not ended."""
    with record.lock:
        runs, campaigns = sorted(record.runs), sorted(record.campaigns)
    left = []
    marks = ",".join("?" * len(runs))
    if runs:
        left += [f"run {pk} {status}" for pk, status in query(
            database, f"SELECT id, status FROM optimizer_run WHERE id IN ({marks}) AND status NOT IN "
            f"({','.join('?' * len(RUN_END))})", *runs, *RUN_END)]
    # A campaign's runs are the scheduler's; they are waited for through the campaign.
    left += [f"campaign run {pk} {status}" for pk, status in query(
        database, "SELECT r.id, r.status FROM optimizer_run r JOIN campaigns_campaignentry e ON e.run_id = r.id "
        f"WHERE r.status NOT IN ({','.join('?' * len(RUN_END))})", *RUN_END)]
    if campaigns:
        left += [f"campaign {pk} {status}" for pk, status in query(
            database, f"SELECT id, status FROM campaigns_campaign WHERE id IN ({','.join('?' * len(campaigns))}) "
            "AND finished IS NULL", *campaigns)]
    left += [f"evaluation {pk} {status} ({kind})" for pk, status, kind in query(
        database, "SELECT e.id, e.status, CASE WHEN k.run_id IS NULL THEN 'upload or baseline' ELSE 'run ' || k.run_id "
        "END FROM benchmark_evaluation e JOIN benchmark_kernel k ON k.id = e.kernel_id WHERE e.status != 'done' "
        "AND (e.id <= ? OR k.run_id IS NOT NULL)", last_evaluation_at_deadline)]
    return left


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))] if ordered else float("nan")


# --- the whole soak ---------------------------------------------------------------------------------------


def server_environment(var: Path, background: str, worker_concurrency: int) -> dict[str, str]:
    """The developer's environment without their site settings (the sandbox's stay), on a database of its own."""
    env = {key: value for key, value in os.environ.items()
           if not (key.startswith("ACCELOPT_") and not key.startswith("ACCELOPT_SANDBOX_"))
           and key not in ("DATABASE_URL", "REDIS_URL")}
    env.update({
        "DJANGO_SETTINGS_MODULE": "accelopt_site.settings", "ACCELOPT_VAR_DIR": str(var),
        "DATABASE_URL": f"sqlite:///{var / 'soak.sqlite3'}", "ACCELOPT_BACKGROUND_BASELINES": background,
        "ACCELOPT_WORKER_CONCURRENCY": str(worker_concurrency), "PYTHONUNBUFFERED": "1",
    })
    return env


def soak(minutes: float, clients: int, directory: Path, *, healthz_limit_s: float = 1.0, drain_minutes: float = 20,
         background: str = "mini,full", worker_concurrency: int = 2, seed: int = 0,
         out: Callable[[str], None] = print) -> list[str]:
    """Run the soak; returns the reasons it failed (empty: passed). Prints its progress and summary with `out`."""
    var = directory / "var"
    var.mkdir(parents=True, exist_ok=True)
    env = server_environment(var, background, worker_concurrency)
    started = time.monotonic()
    # As `make run`: the sandbox first (it checks that an isolated child starts), then prepare, then daphne.
    done = subprocess.run([sys.executable, "-m", "engine.evaluator.sandbox.setup"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise StartError(f"make sandbox's step failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    manage(env, "prepare")
    tokens = json.loads(manage(env, "shell", "-c", PEOPLE.replace("COUNT", str(clients + 1))).strip().splitlines()[-1])
    server, port = start_web(env, directory / "daphne.log")
    out(f"server pid {server.pid} on port {port}, log {server.log}; prepared and up in "
        f"{time.monotonic() - started:.0f} s")
    record = Record()
    deadline = time.monotonic() + minutes * 60
    runner = Soak(port, tokens, record, deadline, seed)
    stop_polling = threading.Event()
    last_dump = [0.0]
    long_dumps = [0]

    def on_slow(latency: float, inside: str) -> None:
        with record.lock:
            record.slow_healthz.append(f"{time.strftime('%H:%M:%S')} {latency:.2f} s ({inside})")
        # Stacks while it is slow: for the first three slow answers (at most one set a minute), and for up to
        # three long ones (over LONG_SLOW_S, or none within the poll's 10 s) whenever they come, since a long
        # stall is what needs its stacks most and may come after the first three are spent.
        long = latency >= LONG_SLOW_S
        first = len(record.evidence) < 3 and time.monotonic() - last_dump[0] > 60
        if first or (long and long_dumps[0] < 3):
            last_dump[0] = time.monotonic()
            long_dumps[0] += long and not first
            text = take_stacks(server)
            record.evidence.append(f"/healthz took {latency:.2f} s ({inside}) at {time.strftime('%H:%M:%S')}: {text}")
            out(record.evidence[-1].splitlines()[0])

    threads = [threading.Thread(target=runner.poll_healthz, args=(stop_polling, healthz_limit_s, on_slow),
                                name="healthz", daemon=True),
               threading.Thread(target=runner.campaigns, name="campaigns", daemon=True)]
    threads += [threading.Thread(target=runner.client, args=(index,), name=f"client-{index}", daemon=True)
                for index in range(clients)]
    for thread in threads:
        thread.start()
    database = var / "soak.sqlite3"
    next_report = time.monotonic() + 60
    while time.monotonic() < deadline and server.alive():
        time.sleep(1)
        if time.monotonic() >= next_report:
            next_report += 300 if minutes > 10 else 60
            with record.lock:
                latencies = [latency for _, latency in record.healthz]
                out(f"{(time.monotonic() - started) / 60:6.1f} min: {sum(record.requests.values())} requests, "
                    f"{len(record.runs)} runs, {len(record.campaigns)} campaigns, {len(record.evaluations)} uploads; "
                    f"/healthz max {max(latencies, default=0):.2f} s, over {healthz_limit_s:g} s: "
                    f"{sum(latency > healthz_limit_s for latency in latencies)}; failures {len(record.failures)}")
    last_evaluation = query(database, "SELECT COALESCE(MAX(id), 0) FROM benchmark_evaluation")[0][0]
    out(f"time is up after {(time.monotonic() - started) / 60:.1f} min; draining (at most {drain_minutes:g} min)")
    for thread in threads[1:]:
        thread.join(timeout=REQUEST_TIMEOUT_S * 2)
    drain_deadline = time.monotonic() + drain_minutes * 60
    left = unfinished(database, record, last_evaluation)
    while left and time.monotonic() < drain_deadline and server.alive():
        time.sleep(5)
        left = unfinished(database, record, last_evaluation)
    drained_s = time.monotonic() - deadline
    stop_polling.set()
    threads[0].join(timeout=15)

    reasons = []
    alive = server.alive()
    if not alive:
        reasons.append(f"the server exited ({server.process.returncode})")
    if left:
        reasons.append(f"{len(left)} not ended after {drain_minutes:g} min of draining: {', '.join(left[:20])}")
    # The summary reads the database while the server still runs; then SIGTERM, as Ctrl-C would.
    summary = summarize(database, record, minutes, clients, healthz_limit_s, drained_s, background)
    stop_started = time.monotonic()
    server.stop(timeout=30)
    terminated = server.process.returncode is not None and server.process.returncode != -signal.SIGKILL
    summary.append(f"server stop: {'SIGTERM' if terminated else 'SIGKILL (SIGTERM ignored for 30 s)'} "
                   f"in {time.monotonic() - stop_started:.1f} s")
    if alive and not terminated:
        reasons.append("the server ignored SIGTERM for 30 s")
    latencies = [latency for _, latency in record.healthz]
    slow = sum(latency > healthz_limit_s for latency in latencies)
    if slow:
        reasons.append(f"/healthz over {healthz_limit_s:g} s {slow} times (max {max(latencies):.2f} s)")
    if not latencies:
        reasons.append("/healthz was never polled")
    # Ordinary use on the suite's own kernels: nothing fails for our sake (a cancelled evaluation is stored
    # as an infrastructure error too, with its reason: not ours to count).
    ours = query(database, "SELECT COUNT(*), MIN(error_message) FROM benchmark_evaluation WHERE error_kind = "
                 "'infrastructure_error' AND error_message NOT LIKE 'cancelled%'")[0]
    if ours[0]:
        reasons.append(f"{ours[0]} evaluations ended as infrastructure errors, e.g. {str(ours[1])[:300]}")
    failed = query(database, "SELECT COUNT(*), MIN(error_message) FROM optimizer_run WHERE status = 'failed'")[0]
    if failed[0]:
        reasons.append(f"{failed[0]} runs failed, e.g. {str(failed[1])[:300]}")
    if record.failures:
        reasons.append(f"{len(record.failures)} failed requests: " + "; ".join(record.failures[:10]))
    for line in summary:
        out(line)
    if reasons:
        for text in record.evidence:
            out(text)
        out(f"--- end of the server's log ({server.log}) ---\n{log_tail(server.log)}")
    return reasons


def summarize(database: Path, record: Record, minutes: float, clients: int, limit_s: float, drained_s: float,
              background: str) -> list[str]:
    with record.lock:
        latencies = [latency for _, latency in record.healthz]
        requests = dict(sorted(record.requests.items()))
        runs, frames = sorted(record.runs), record.frames
        slowest = {kind: (percentile(values, 0.99), max(values)) for kind, values in sorted(record.seconds.items())}
        slow_polls = list(record.slow_healthz)
    answered = [latency for latency in latencies if latency != float("inf")]
    run_states = Counter(status for (status,) in query(database, "SELECT status FROM optimizer_run"))
    evaluations = query(database, "SELECT status, COALESCE(error_kind, ''), COUNT(*) FROM benchmark_evaluation "
                                  "GROUP BY 1, 2")
    done = {kind or "correct/measured": count for status, kind, count in evaluations if status == "done"}
    pending = sum(count for status, _, count in evaluations if status != "done")
    campaigns = Counter(status for (status,) in query(database, "SELECT status FROM campaigns_campaign"))
    return [
        "--- soak summary ---",
        f"duration {minutes:g} min of use from {clients} clients + 1 campaign thread, then {drained_s:.0f} s "
        f"draining; background baselines: {background}; load average at the end "
        f"{' '.join(f'{load:.1f}' for load in os.getloadavg())} on {os.cpu_count()} CPUs",
        f"requests: {sum(requests.values())} ({', '.join(f'{kind} {count}' for kind, count in requests.items())}); "
        f"websocket frames read: {frames}",
        f"runs: {len(runs)} started by clients; all runs by status: {dict(run_states)}; "
        f"campaigns: {dict(campaigns)}",
        f"evaluations: {sum(done.values())} finished ({done}), {pending} still pending "
        f"(uploads by clients: {len(record.evaluations)})",
        f"/healthz: {len(latencies)} polls, median {statistics.median(answered) * 1e3 if answered else float('nan'):.0f}"
        f" ms, p99 {percentile(answered, 0.99) * 1e3:.0f} ms, max {max(latencies, default=0) * 1e3:.0f} ms, "
        f"over {limit_s:g} s: {sum(latency > limit_s for latency in latencies)}, unanswered: "
        f"{len(latencies) - len(answered)}" + (f"; slow: {'; '.join(slow_polls[:10])}" if slow_polls else ""),
        "other requests' p99/max: " + ", ".join(f"{kind} {p99:.2f}/{top:.2f} s" for kind, (p99, top) in slowest.items()),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=120.0, help="how long the clients keep working")
    parser.add_argument("--clients", type=int, default=4, help="client threads besides the campaign's")
    parser.add_argument("--dir", type=Path, default=None, help="state directory (default: a new temporary one)")
    parser.add_argument("--drain-minutes", type=float, default=20.0, help="the longest wait for work to end")
    parser.add_argument("--healthz-limit", type=float, default=1.0, help="seconds /healthz must answer within")
    parser.add_argument("--background-baselines", default="mini,full", help="ACCELOPT_BACKGROUND_BASELINES")
    parser.add_argument("--worker-concurrency", type=int, default=2, help="ACCELOPT_WORKER_CONCURRENCY")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    directory = args.dir or Path(tempfile.mkdtemp(prefix="accelopt-soak-"))
    try:
        reasons = soak(args.minutes, args.clients, directory, healthz_limit_s=args.healthz_limit,
                       drain_minutes=args.drain_minutes, background=args.background_baselines,
                       worker_concurrency=args.worker_concurrency, seed=args.seed,
                       out=lambda line: print(line, flush=True))
    except StartError as error:
        print(f"FAILED: the server did not start: {error}", flush=True)
        return 1
    if reasons:
        print("FAILED:\n  " + "\n  ".join(reasons) + f"\n(state kept in {directory})", flush=True)
        return 1
    print("PASSED", flush=True)
    if args.dir is None:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
