"""The scale-out mode as a whole, for real: PostgreSQL, the Redis channel layer, two daphne processes (A, B),
two `run_worker` processes (embedded worker off on the web processes), evaluations on the Ray cluster (a
head and one worker node). Every process is started by deploy.local, as docs/operations.md tells a team.

* /healthz on both web processes reports PostgreSQL, Redis and the Ray cluster's nodes and free CPUs;
* a run launched through A streams all its events, in order, to a websocket client connected to B;
* SIGKILL of the run worker driving a run: the other worker takes it over and finishes it, with no
  evaluation lost and none done twice (counted from the database);
* a run cancelled while its evaluation runs on the cluster: the task is killed at once, nothing is left
  running in the cluster, and the evaluation-queue page showed where it ran and for which run before.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections import Counter
from typing import Any

import pytest

from deploy.local import manage, topology
from deploy.wsclient import watch_run
from tests.scale.conftest import wait_for
from tests.scale.kernels import slow_kernel

pytestmark = pytest.mark.scale

WORKER_ENV = {
    # A dead worker's run is taken over after 4 s without a heartbeat (the default 60 s would only wait).
    "ACCELOPT_WORKER_STALE_S": "4", "ACCELOPT_WORKER_HEARTBEAT_S": "1", "ACCELOPT_WORKER_POLL_MS": "200",
}
MAKE_ENGINEER = """
from accounts.roles import ENGINEER, grant_role
from accounts.services import create_token
from django.contrib.auth import get_user_model
user = get_user_model().objects.create_user("scale", password="unused")
grant_role(user, ENGINEER)
print(create_token(user, "scale-out tests").secret)
"""


class Site:
    def __init__(self, state: Any, token: str) -> None:
        self.state, self.token = state, token
        self.a, self.b = state.web_ports

    def api(self, port: int, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def get(self, port: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def sql(self, query: str, *params: Any) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.state.database_url, autocommit=True) as connection:
            return connection.execute(query, params).fetchall()

    def run_status(self, run_id: int) -> str:
        return self.sql("SELECT status FROM optimizer_run WHERE id = %s", run_id)[0][0]

    def run_evaluations(self, run_id: int) -> list[tuple]:
        """(sha, status, attempts, error_kind) of every evaluation of the run's kernels and its start kernel."""
        return self.sql(
            "SELECT k.sha256, e.status, e.attempts, e.error_kind FROM benchmark_evaluation e "
            "JOIN benchmark_kernel k ON k.id = e.kernel_id JOIN optimizer_run r ON r.id = %s "
            "WHERE k.run_id = r.id OR k.id = r.start_kernel_id", run_id)

    def events(self, run_id: int) -> list[tuple[int, str, dict]]:
        return self.sql("SELECT seq, kind, payload FROM optimizer_runevent WHERE run_id = %s ORDER BY seq", run_id)


@pytest.fixture(scope="module")
def site(ray_cluster, tmp_path_factory):
    with topology(tmp_path_factory.mktemp("site"), web=2, workers=2, ray_address=ray_cluster.address,
                  extra_env=WORKER_ENV) as state:
        token = manage(state.env, "shell", "-c", MAKE_ENGINEER).strip().splitlines()[-1]
        yield Site(state, token)


def test_healthz_reports_postgres_redis_and_the_ray_cluster(site) -> None:
    for port in (site.a, site.b):
        status, body = site.get(port, "/healthz")
        report = json.loads(body)
        assert status == 200, report
        assert report["database"]["vendor"] == "postgresql"
        assert report["channel_layer"]["backend"] == "RedisChannelLayer"
        ray = report["ray"]
        assert ray["ok"] and ray["kind"] == "ray" and ray["alive_nodes"] == 2
        assert ray["cpus"] == 2 and 0 <= ray["free_cpus"] <= 2 and "free_neuron_cores" in ray
        assert {node["head"] for node in ray["nodes"]} == {True, False}


def test_a_run_launched_through_a_streams_to_a_client_on_b(site, ray_cluster) -> None:
    run = site.api(site.a, "POST", "runs", {"problem": "silu:mini", "is_public": True, "search": {
        "iterations": 1, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1}})
    received: list[dict] = []
    asyncio.run(asyncio.wait_for(watch_run("127.0.0.1", site.b, run["id"], received), 240))
    stored = site.events(run["id"])
    assert site.run_status(run["id"]) == "succeeded", stored[-1]
    # Every event, once, in order, as the database has them: published by a run worker through Redis and
    # delivered by B, which neither launched nor drove the run.
    assert [e["seq"] for e in received] == [seq for seq, _, _ in stored] == list(range(1, len(stored) + 1))
    assert [e["kind"] for e in received] == [kind for _, kind, _ in stored]
    assert received[-1]["kind"] == "run.finished"
    assert any(kind == "candidate.evaluated" for _, kind, _ in stored)
    wait_for(ray_cluster.idle, 30, "the cluster to be idle after the run")


def test_killing_the_run_worker_hands_the_run_over_without_losing_or_repeating_evaluations(site, ray_cluster) -> None:
    run = site.api(site.a, "POST", "runs", {"problem": "adamw:mini", "is_public": True, "search": {
        "iterations": 2, "beam_width": 1, "plans_per_candidate": 3, "samples_per_plan": 1}})
    run_id = run["id"]

    def mid_run() -> bool:  # past the start kernel, with a generated kernel being evaluated
        rows = site.run_evaluations(run_id)
        return sum(status == "done" for _, status, _, _ in rows) >= 1 and any(
            status == "running" for _, status, _, _ in rows)

    wait_for(mid_run, 120, "the run to be evaluating generated kernels")
    (claimed_by,) = site.sql("SELECT claimed_by FROM optimizer_run WHERE id = %s", run_id)[0]
    workers = {server.pid: server for name, server in site.state.servers.items() if name.startswith("run-worker")}
    victim = workers[int(claimed_by.split(":")[1])]
    victim.kill()
    try:
        _the_run_is_taken_over(site, ray_cluster, run_id, victim.pid)
    finally:  # the killed worker is replaced, as a supervisor would, for the tests that follow
        from deploy.local import start_run_worker

        site.state.servers[f"run-worker-{victim.pid}"] = start_run_worker(
            site.state.env, site.state.directory / f"run-worker-after-{victim.pid}.log")


def _the_run_is_taken_over(site: Site, ray_cluster: Any, run_id: int, victim_pid: int) -> None:
    at_kill = site.run_evaluations(run_id)
    # Handed to the cluster by the dead worker (queued behind others, or running): their Ray tasks died with
    # their driver, so these, and only these, run a second time. A row not yet handed over has no attempt.
    interrupted = {sha for sha, status, attempts, _ in at_kill if status != "done" and attempts >= 1}
    finished_before = {sha for sha, status, _, _ in at_kill if status == "done"}

    wait_for(lambda: site.run_status(run_id) in ("succeeded", "failed"), 240, "the other worker to finish the run")
    events = site.events(run_id)
    assert site.run_status(run_id) == "succeeded", events[-1]
    (taker,) = site.sql("SELECT claimed_by FROM optimizer_run WHERE id = %s", run_id)[0] or ("",)
    assert any(kind == "run.resumed_after_crash" for _, kind, _ in events)
    assert not taker or int(taker.split(":")[1]) != victim_pid

    rows = site.run_evaluations(run_id)
    by_sha = {sha: (status, attempts, error) for sha, status, attempts, error in rows}
    # Nothing lost: every kernel the run wrote or started from has one finished evaluation, not ours to retry.
    assert len(by_sha) == len(rows) and all(s == "done" and e != "infrastructure_error" for s, _, e in by_sha.values())
    evaluated = [p["sha"] for _, kind, p in events if kind == "candidate.evaluated" and not p.get("retrying")]
    assert sorted(evaluated) == sorted(by_sha)  # each evaluation reached the search exactly once
    # Nothing done twice: an evaluation finished before the kill ran once; only those the kill interrupted ran twice.
    assert all(by_sha[sha][1] == 1 for sha in finished_before)
    assert all(by_sha[sha][1] == 2 for sha in interrupted)
    assert sum(attempts for _, attempts, _ in by_sha.values()) == len(by_sha) + len(interrupted)
    assert Counter(seq for seq, _, _ in events) == Counter(range(1, len(events) + 1))  # gapless, no repeats
    wait_for(ray_cluster.idle, 30, "the cluster to be idle after the run")


def test_a_cancelled_run_leaves_no_task_running_in_the_cluster(site, ray_cluster) -> None:
    from engine.evaluator.ray_cluster import cluster_queue

    kernel = site.api(site.a, "POST", "kernels", {"problem": "silu:mini", "source": slow_kernel(4000),
                                                   "name": "slow silu", "evaluate": False})["kernel"]
    run = site.api(site.a, "POST", "runs", {"problem": "silu:mini", "start_kernel_id": kernel["id"], "is_public": True})
    run_id = run["id"]
    wait_for(lambda: any(e["state"] == "running" for e in cluster_queue()), 60, "the start kernel to run on Ray")
    (entry,) = cluster_queue()
    # The evaluation-queue page (web B) says what runs where, for which run.
    status, page = site.get(site.b, "/ops/evaluations/?format=json")
    assert status == 200, page
    (row,) = [r for r in json.loads(page)["evaluations"] if r["state"] == "running"]
    assert row["run_ids"] == [run_id] and row["kernel_id"] == kernel["id"]
    assert (row["node_id"], row["worker_pid"]) == (entry["node_id"], entry["worker_pid"]) and row["worker_pid"]

    site.api(site.b, "POST", f"runs/{run_id}/cancel")
    wait_for(lambda: site.run_status(run_id) == "cancelled", 30, "the run to stop")
    wait_for(ray_cluster.idle, 15, "the cancelled evaluation's task to be killed")
    ((status, error_kind, message),) = site.sql(
        "SELECT e.status, e.error_kind, e.error_message FROM benchmark_evaluation e WHERE e.kernel_id = %s",
        kernel["id"])
    assert (status, error_kind) == ("done", "infrastructure_error") and "cancelled" in message.lower()
    assert [kind for _, kind, _ in site.events(run_id)][-1] == "run.cancelled"
