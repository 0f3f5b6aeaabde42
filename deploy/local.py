"""The scale-out topology on one machine, without docker compose: PostgreSQL, Redis, a Ray head and Ray
worker nodes, several daphne web processes and several `run_worker` processes (embedded worker off).

    .venv/bin/python -m deploy.local up                     # 2 web, 2 run workers, Ray head + 1 worker node
    .venv/bin/python -m deploy.local up --web 1 --workers 1 --ray-workers 2 --dir /tmp/studio

`up` prints every URL and process, then stays in the foreground; Ctrl-C stops everything it started (in
reverse order) and leaves the state directory for inspection. The tests (tests/scale) and the
measurements (measurements/ray_throughput.py, measurements/ws_fanout_scaleout.py) start the same
pieces through the classes here, so the recipe in docs/operations.md is what they test.

Local only: PostgreSQL trusts connections from 127.0.0.1 and every server listens on 127.0.0.1. Each
server runs in a session of its own, so it can be stopped (or, in the tests, killed) as one process group.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
BIN = Path(PYTHON).parent
DATABASE = "accelopt"
DB_USER = "studio"


class StartError(RuntimeError):
    """A server did not come up; the message includes the end of its log."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, characters: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-characters:]
    except OSError:
        return ""


@dataclass
class Server:
    """One process group this module started, with its log."""

    name: str
    process: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_for_log(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in _tail(self.log, 200_000):
                return
            if not self.alive():
                raise StartError(f"{self.name} exited with {self.process.returncode}:\n{_tail(self.log)}")
            time.sleep(0.1)
        raise StartError(f"{self.name}: no {text!r} in its log after {timeout:.0f} s:\n{_tail(self.log)}")

    def kill(self) -> None:
        """SIGKILL the whole group at once: what a crash or a lost host looks like."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self, timeout: float = 20.0, signum: int = signal.SIGTERM) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signum)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        # Members that outlived their leader (a Ray node's agents and workers) go with the group, also when the
        # leader had already exited: the group id stays theirs while any of them lives.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


def spawn(name: str, command: Sequence[str], log: Path, *, env: dict[str, str] | None = None,
          user: str | None = None) -> Server:
    """Start `command` in a session of its own, output to `log`; as `user` (runuser) when given."""
    if user is not None:
        command = ["runuser", "-u", user, "--", *command]
    handle = log.open("ab")
    process = subprocess.Popen(list(command), cwd=REPO, env=env or os.environ.copy(), stdout=handle,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    handle.close()
    return Server(name, process, log)


# --- what is installed ---------------------------------------------------------------------------------


def postgres_bin() -> Path | None:
    """The directory of initdb/postgres: on PATH, else Debian's /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0)
    return Path(versions[-1]).parent if versions else None


def missing_services() -> list[str]:
    """What this topology needs and this machine lacks (apt: postgresql, redis-server; pip: the scale extra)."""
    import importlib.util

    missing = []
    if postgres_bin() is None:
        missing.append("PostgreSQL (apt-get install postgresql)")
    if shutil.which("redis-server") is None:
        missing.append("Redis (apt-get install redis-server)")
    for module, package in (("ray", "ray"), ("channels_redis", "channels-redis"), ("psycopg", "psycopg")):
        if importlib.util.find_spec(module) is None:
            missing.append(f"{package} (pip install -e '.[scale]')")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        missing.append("runuser (util-linux), to run PostgreSQL as its own user")
    return missing


# --- the servers -----------------------------------------------------------------------------------------


def start_postgres(directory: Path, *, durable: bool = False) -> tuple[Server, str]:
    """A fresh PostgreSQL cluster in `directory` on a free port; returns it and the DATABASE_URL.

    As root it runs as the `postgres` user (PostgreSQL refuses root). durable=False turns fsync off: fine
    for tests and measurements, never for data you keep.
    """
    binaries = postgres_bin()
    if binaries is None:
        raise StartError("PostgreSQL is not installed (apt-get install postgresql)")
    user = "postgres" if os.geteuid() == 0 else None
    directory.mkdir(parents=True, exist_ok=True)
    data, sockets = directory / "data", directory / "sockets"
    sockets.mkdir(exist_ok=True)
    if user is not None:
        shutil.chown(directory, user)
        shutil.chown(sockets, user)
        directory.chmod(0o700)
        # the postgres user must be able to reach its directory through the parents (mkdtemp makes 0700)
        for parent in directory.parents:
            if parent == Path("/"):
                break
            if not parent.stat().st_mode & 0o001:
                parent.chmod(parent.stat().st_mode | 0o001)
    prefix = ["runuser", "-u", user, "--"] if user else []
    done = subprocess.run([*prefix, str(binaries / "initdb"), "-D", str(data), "-U", DB_USER, "--auth=trust",
                           "-E", "UTF8", "--no-instructions"], capture_output=True, text=True, cwd="/")
    if done.returncode != 0:
        raise StartError(f"initdb failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    port = free_port()
    options = ["-c", "listen_addresses=127.0.0.1", "-p", str(port), "-k", str(sockets), "-c", "max_connections=200"]
    if not durable:
        options += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
    log = directory / "postgres.log"
    if user is not None:
        log.touch()
        shutil.chown(log, user)
    server = spawn("postgres", [str(binaries / "postgres"), "-D", str(data), *options], log, user=user)
    deadline = time.monotonic() + 60
    while subprocess.run([str(binaries / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                         capture_output=True).returncode != 0:
        if not server.alive() or time.monotonic() > deadline:
            raise StartError(f"postgres did not start:\n{_tail(log)}")
        time.sleep(0.2)
    subprocess.run([str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", DB_USER, DATABASE],
                   check=True, capture_output=True)
    return server, f"postgres://{DB_USER}@127.0.0.1:{port}/{DATABASE}"


def start_redis(directory: Path) -> tuple[Server, str]:
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = spawn("redis", ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(directory)], directory / "redis.log")
    server.wait_for_log("Ready to accept connections", 30)
    return server, f"redis://127.0.0.1:{port}/0"


def ray_environment() -> dict[str, str]:
    # No usage reports: CI machines reach nothing but package registries.
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}


def start_ray_head(directory: Path, *, num_cpus: int = 1, object_store_mb: int = 100) -> tuple[Server, str]:
    """`ray start --head --block`: the GCS, the head's raylet (with `num_cpus` for tasks; 0 makes a head that
    only schedules), no dashboard."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    server = spawn("ray-head", [str(BIN / "ray"), "start", "--head", "--block", f"--port={port}",
                                "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}", "--num-gpus=0",
                                "--include-dashboard=false", "--disable-usage-stats",
                                f"--object-store-memory={object_store_mb * 1024 * 1024}",
                                f"--temp-dir={directory}"], directory / "ray-head.log", env=ray_environment())
    server.wait_for_log("Ray runtime started", 120)
    return server, f"127.0.0.1:{port}"


def start_ray_worker(address: str, log: Path, *, num_cpus: int = 1, object_store_mb: int = 100,
                     resources: dict[str, float] | None = None) -> Server:
    """Another Ray node joining the head at `address` (on another host: the same command there)."""
    command = [str(BIN / "ray"), "start", "--block", f"--address={address}", "--node-ip-address=127.0.0.1",
               f"--num-cpus={num_cpus}", "--num-gpus=0", "--disable-usage-stats",
               f"--object-store-memory={object_store_mb * 1024 * 1024}"]
    if resources:
        command.append(f"--resources={json.dumps(resources)}")
    server = spawn(log.stem, command, log, env=ray_environment())
    server.wait_for_log("Ray runtime started", 120)
    return server


def site_environment(var_dir: Path, database_url: str, redis_url: str, ray_address: str = "",
                     **extra: str) -> dict[str, str]:
    """The environment every web and run-worker process shares (docs/operations.md, Scale-out)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ACCELOPT_")}
    env.update({
        "DJANGO_SETTINGS_MODULE": "accelopt_site.settings",
        "ACCELOPT_VAR_DIR": str(var_dir),  # holds the shared generated secret key
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "ACCELOPT_EMBEDDED_WORKER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        # No background pass over the suite's baselines (issue 20): these topologies carry tests and
        # measurements, which must see only their own evaluations; pass extra to turn it on.
        "ACCELOPT_BACKGROUND_BASELINES": "none",
    })
    if ray_address:
        env["ACCELOPT_RAY_ADDRESS"] = ray_address
    env.update(extra)
    return env


def manage(env: dict[str, str], *arguments: str, timeout: float = 600) -> str:
    done = subprocess.run([PYTHON, "manage.py", *arguments], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise StartError(f"manage.py {' '.join(arguments)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


PREPARE = """
from django.core.management import call_command
call_command("migrate", verbosity=0)
call_command("bootstrap_roles", verbosity=0)
call_command("load_suite", "nkibench", evaluate="none", verbosity=0)
"""


def prepare_database(env: dict[str, str]) -> None:
    """migrate, roles, the NKIBench problems (baselines not evaluated: runs evaluate what they need), in one
    process: each manage.py start costs seconds on a loaded machine."""
    manage(env, "shell", "-c", PREPARE)


def start_web(env: dict[str, str], log: Path, port: int | None = None,
              application: str = "accelopt_site.asgi:application") -> tuple[Server, int]:
    """A daphne process serving `application` (another one only for side-by-side measurements)."""
    port = port or free_port()
    server = spawn(log.stem, [PYTHON, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), application], log, env=env)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5):
                return server, port
        except OSError:
            if not server.alive():
                raise StartError(f"daphne on {port} exited:\n{_tail(log)}") from None
            time.sleep(0.3)
    raise StartError(f"daphne on {port}: /healthz not answering after 90 s:\n{_tail(log)}")


def start_run_worker(env: dict[str, str], log: Path) -> Server:
    server = spawn(log.stem, [PYTHON, "manage.py", "run_worker"], log, env=env)
    server.wait_for_log("waiting for queued runs", 90)
    return server


# --- the whole topology ----------------------------------------------------------------------------------


@dataclass
class Topology:
    directory: Path
    database_url: str = ""
    redis_url: str = ""
    ray_address: str = ""
    web_ports: list[int] = field(default_factory=list)
    servers: dict[str, Server] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def add(self, server: Server) -> Server:
        self.servers[server.name] = server
        return server

    def stop(self) -> None:
        """Web and run workers first (they hold runs and connections), then Ray workers, head, Redis, Postgres."""
        order = ("web", "run-worker", "ray-worker", "ray-head", "redis", "postgres")
        for prefix in order:
            for name, server in list(self.servers.items()):
                if name.startswith(prefix):
                    # PostgreSQL's fast shutdown is SIGINT; SIGTERM would wait for clients to leave. A Ray node
                    # that has not stopped after a few seconds is killed: it holds no state worth waiting for.
                    server.stop(timeout=5 if prefix.startswith("ray") else 20,
                                signum=signal.SIGINT if prefix == "postgres" else signal.SIGTERM)


@contextlib.contextmanager
def topology(directory: Path | None = None, *, web: int = 2, workers: int = 2, ray_workers: int = 1,
             head_cpus: int = 1, worker_cpus: int = 1, ray: bool = True, ray_address: str = "",
             durable: bool = False, extra_env: dict[str, str] | None = None) -> Iterator[Topology]:
    """Bring everything up (stopping whatever started if a later piece fails), yield it, stop it all.

    ray_address: use that running cluster instead of starting one (the tests share one between modules);
    ray=False: no Ray at all, evaluations in each process's local executor."""
    directory = Path(directory or tempfile.mkdtemp(prefix="accelopt-scale-"))
    directory.mkdir(parents=True, exist_ok=True)
    state = Topology(directory)
    pool = ThreadPoolExecutor(max_workers=4)  # the servers start in parallel: most of the wait is theirs
    started: list[Future] = []  # every start, so a failure half-way still stops what did come up

    def start(function: Any, *args: Any, **kwargs: Any) -> Future:
        future = pool.submit(function, *args, **kwargs)
        started.append(future)
        return future

    try:
        postgres = start(start_postgres, directory / "postgres", durable=durable)
        redis = start(start_redis, directory / "redis")
        head = start(start_ray_head, directory / "ray", num_cpus=head_cpus) if ray and not ray_address else None
        state.database_url, state.redis_url = postgres.result()[1], redis.result()[1]
        state.ray_address = head.result()[1] if head is not None else ray_address if ray else ""
        nodes = [start(start_ray_worker, state.ray_address, directory / f"ray-worker-{index + 1}.log",
                       num_cpus=worker_cpus) for index in range(ray_workers if head is not None else 0)]
        state.env = site_environment(directory / "var", state.database_url, state.redis_url, state.ray_address,
                                     **(extra_env or {}))
        prepare_database(state.env)
        for node in nodes:
            node.result()
        webs = [start(start_web, state.env, directory / f"web-{index + 1}.log") for index in range(web)]
        runners = [start(start_run_worker, state.env, directory / f"run-worker-{index + 1}.log")
                   for index in range(workers)]
        state.web_ports = [future.result()[1] for future in webs]
        for future in runners:
            future.result()
        _collect(state, started)
        yield state
    finally:
        pool.shutdown(wait=True)
        _collect(state, started)
        state.stop()


def _collect(state: Topology, started: list[Future]) -> None:
    """Register every server that came up, by its log's name (web-1, run-worker-2, ray-worker-1...)."""
    for future in started:
        if future.done() and future.exception() is None:
            result = future.result()
            server = result[0] if isinstance(result, tuple) else result
            state.servers.setdefault(server.name, server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up"])
    parser.add_argument("--dir", type=Path, default=None, help="state directory (default: a new one in /tmp)")
    parser.add_argument("--web", type=int, default=2, help="daphne processes")
    parser.add_argument("--workers", type=int, default=2, help="run_worker processes")
    parser.add_argument("--ray-workers", type=int, default=1, help="Ray worker nodes besides the head")
    parser.add_argument("--head-cpus", type=int, default=1, help="CPUs the head offers to evaluations")
    parser.add_argument("--worker-cpus", type=int, default=1, help="CPUs each Ray worker node offers")
    parser.add_argument("--no-ray", action="store_true", help="evaluations in the run workers' local executors")
    args = parser.parse_args()
    missing = missing_services()
    if missing:
        raise SystemExit("missing: " + "; ".join(missing))
    stop = {"now": False}
    # Both explicitly: a shell starting this in the background leaves SIGINT ignored, and Ctrl-C must still work.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.update(now=True))
    with topology(args.dir, web=args.web, workers=args.workers, ray_workers=args.ray_workers,
                  head_cpus=args.head_cpus, worker_cpus=args.worker_cpus, ray=not args.no_ray,
                  durable=True) as state:
        print(f"state directory   {state.directory}")
        print(f"DATABASE_URL      {state.database_url}")
        print(f"REDIS_URL         {state.redis_url}")
        if state.ray_address:
            print(f"ACCELOPT_RAY_ADDRESS {state.ray_address}")
        for port in state.web_ports:
            print(f"web               http://127.0.0.1:{port}/   (health: /healthz)")
        for name, server in state.servers.items():
            print(f"{name:<17} pid {server.pid}, log {server.log}")
        print("Create the first admin with:  "
              f"DATABASE_URL={state.database_url} ACCELOPT_VAR_DIR={state.directory / 'var'} "
              f"{PYTHON} manage.py create_admin")
        print("Ctrl-C stops everything.", flush=True)
        while not stop["now"]:
            dead = [name for name, server in state.servers.items() if not server.alive()]
            if dead:
                print(f"stopped unexpectedly: {', '.join(dead)}; stopping the rest")
                break
            time.sleep(1)
        print("stopping", flush=True)


if __name__ == "__main__":
    main()
