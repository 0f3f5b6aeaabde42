"""The scale-out engines, started for real: a Ray head and one Ray worker node (session-scoped, shared by
every module here), and per module PostgreSQL, Redis, daphne and run_worker processes (deploy/local.py).

Each server runs in a process group of its own, so a test can SIGKILL one as a crash would, and the
fixtures stop every group they started. The tests are skipped only when PostgreSQL, Redis or the `scale`
extra is missing (`.ci/run` installs them); select them with `pytest -m scale`.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deploy.local import Server, missing_services, start_ray_head, start_ray_worker

MISSING = missing_services()


def require_services() -> None:
    if MISSING:
        pytest.skip("scale-out services not installed: " + "; ".join(MISSING))


@dataclass
class RayCluster:
    """The head (1 CPU for evaluations) and one worker node (1 CPU), with this test process as a driver."""

    directory: Path
    address: str
    head: Server
    worker: Server | None

    @property
    def ray(self) -> Any:
        import ray

        return ray

    def alive_nodes(self) -> list[dict[str, Any]]:
        return [node for node in self.ray.nodes() if node.get("Alive")]

    def worker_node_id(self) -> str:
        return next(node["NodeID"] for node in self.alive_nodes()
                    if "node:__internal_head__" not in node.get("Resources", {}))

    def restart_worker(self) -> None:
        """A new worker node after a test killed the old one; returns once the cluster has two nodes again."""
        if self.worker is not None:
            self.worker.stop(timeout=5)
        self.worker = start_ray_worker(self.address, self.directory / f"ray-worker-{time.monotonic_ns()}.log")
        wait_for(lambda: len(self.alive_nodes()) == 2, 60, "the restarted worker node to join")

    def idle(self) -> bool:
        """No task holds a CPU anywhere and no process has an evaluation on the queue board."""
        from engine.evaluator.ray_cluster import cluster_queue

        total = self.ray.cluster_resources().get("CPU", 0.0)
        return total > 0 and self.ray.available_resources().get("CPU", 0.0) == total and not cluster_queue()


def wait_for(condition: Any, timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    require_services()
    import ray

    # Short: Ray puts its sockets under the temp dir, and an AF_UNIX path may not exceed 107 bytes (pytest's
    # own temp dirs, one more level deep under pytest-xdist, pass that).
    directory = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    head, address = start_ray_head(directory)
    cluster = RayCluster(directory, address, head, worker=None)
    try:
        cluster.worker = start_ray_worker(address, directory / "ray-worker-1.log")
        ray.init(address=address, namespace="accelopt", logging_level="WARNING", log_to_driver=False,
                 configure_logging=False)
        wait_for(lambda: len(cluster.alive_nodes()) == 2, 60, "two Ray nodes")
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        # cluster.worker: the node running now, which a test may have restarted
        for server in (cluster.worker, head):
            if server is not None:
                server.stop(timeout=5)
        shutil.rmtree(directory, ignore_errors=True)
