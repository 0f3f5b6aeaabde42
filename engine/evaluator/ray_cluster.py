"""What the scale-out mode shares about a Ray cluster, without importing Ray at module level:

* the resources one evaluation of each backend reserves on a node (`ResourceSpec`, read from settings by
  `parse_resources`, pure Python, so `benchmark.conf` validates ACCELOPT_RAY_RESOURCES with no Ray installed);
* the queue board: entries in Ray's key-value store (in the GCS) that every `RayExecutor` keeps for the
  evaluations it has queued or running, so any process connected to the cluster can list the whole queue
  (`cluster_queue`: the evaluation-queue page);
* `cluster_status`: nodes and their total and free CPUs, GPUs, NeuronCores and memory (/healthz).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.evaluator.executors import EvaluationRequest

logger = logging.getLogger(__name__)

NAMESPACE = "accelopt"
BOARD_PREFIX = "accelopt/evaluations/"
DRIVER_PREFIX = "accelopt/drivers/"
DRIVER_HEARTBEAT_S = 5.0
DRIVER_STALE_S = 30.0  # a board entry whose process has not refreshed its heartbeat this long is ignored
MIB = 1024 * 1024


# --------------------------------------------------------------------------------------------------
# Resources per backend


@dataclass(frozen=True)
class ResourceSpec:
    """What one evaluation of a backend reserves on a Ray node.

    memory_mb None reserves the evaluation's own sandbox memory limit (the most its children may take,
    so a node is never overcommitted); 0 reserves none. `custom` holds other Ray resources, e.g.
    {"neuron_cores": 1}, which also makes Ray pin the cores (NEURON_RT_VISIBLE_CORES) for the task.
    """

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory_mb: int | None = None
    custom: Mapping[str, float] = field(default_factory=dict)

    def memory_bytes(self, request: EvaluationRequest) -> int:
        if self.memory_mb is None:
            return int(request.limits.memory_bytes)
        return int(self.memory_mb) * MIB

    def demand(self, request: EvaluationRequest) -> dict[str, float]:
        """The resources in Ray's own names (CPU, GPU, memory in bytes, custom ones), zero ones left out."""
        wanted = {"CPU": self.num_cpus, "GPU": self.num_gpus, "memory": float(self.memory_bytes(request)),
                  **{name: float(amount) for name, amount in self.custom.items()}}
        return {name: amount for name, amount in wanted.items() if amount > 0}

    def options(self, request: EvaluationRequest) -> dict[str, Any]:
        """Keyword arguments of Ray's `.options()` for one task."""
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        memory = self.memory_bytes(request)
        if memory > 0:
            options["memory"] = memory
        if self.custom:
            options["resources"] = dict(self.custom)
        return options


DEFAULT_RESOURCES: dict[str, ResourceSpec] = {
    "simulator": ResourceSpec(num_cpus=1),
    "neuron": ResourceSpec(num_cpus=1, custom={"neuron_cores": 1}),
    "cuda": ResourceSpec(num_cpus=1, num_gpus=1),  # one GPU: Ray places the task on a GPU node and pins it
    "null": ResourceSpec(num_cpus=1, memory_mb=0),
}
_SPEC_KEYS = {"num_cpus", "num_gpus", "memory_mb"}


def parse_resources(data: Mapping[str, Mapping[str, Any]]) -> dict[str, ResourceSpec]:
    """Per-backend specs from settings JSON, over the defaults:
    {"simulator": {"num_cpus": 1, "memory_mb": 2048}, "neuron": {"num_cpus": 1, "neuron_cores": 1}}.

    Keys other than num_cpus, num_gpus and memory_mb are custom Ray resources. ValueError names what is wrong.
    """
    specs = dict(DEFAULT_RESOURCES)
    if not isinstance(data, Mapping):
        raise ValueError(f"resources must map backend names to objects; got {data!r}")
    for backend, values in data.items():
        if not isinstance(values, Mapping):
            raise ValueError(f"resources for {backend!r} must be an object; got {values!r}")
        amounts: dict[str, float] = {}
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"resource {name!r} of {backend!r} must be a number >= 0; got {value!r}")
            amounts[name] = value
        memory = amounts.get("memory_mb")
        specs[str(backend)] = ResourceSpec(
            num_cpus=float(amounts.get("num_cpus", 1)),
            num_gpus=float(amounts.get("num_gpus", 0)),
            memory_mb=None if memory is None else int(memory),
            custom={name: float(value) for name, value in amounts.items() if name not in _SPEC_KEYS},
        )
    return specs


def cuda_unavailable_on(nodes: list[Mapping[str, float]], spec: ResourceSpec) -> str | None:
    """Why a cluster whose alive nodes have these total resources cannot run a cuda evaluation reserving
    `spec` (None: it can). On a cluster, where evaluations run decides, not the web host: a node must
    declare the GPUs (Ray's `GPU` resource) and CPUs one evaluation reserves."""
    if spec.num_gpus <= 0:
        return ("cuda evaluations reserve no GPU on the Ray cluster (ACCELOPT_RAY_RESOURCES gives cuda num_gpus 0), "
                "so Ray could place them on a node without one; reserve at least 1")
    if not nodes:
        return "the Ray cluster has no alive node"
    most = max(node.get("GPU", 0.0) for node in nodes)
    if not any(node.get("GPU", 0.0) >= spec.num_gpus and node.get("CPU", 0.0) >= spec.num_cpus for node in nodes):
        return (f"no node of the Ray cluster has {spec.num_gpus:g} GPU and {spec.num_cpus:g} CPU for a cuda evaluation "
                f"(the most GPUs on a node: {most:g}); start GPU nodes with `ray start --num-gpus N`")
    return None


# --------------------------------------------------------------------------------------------------
# The cluster-wide queue board and the cluster's state (for /healthz and the queue page)


class QueueBoard:
    """Entries in Ray's GCS key-value store, one per evaluation this process has queued or running, so any
    process connected to the cluster sees the whole queue. Each process refreshes a heartbeat; entries of
    a process that died without cleaning up are ignored once its heartbeat is DRIVER_STALE_S old."""

    def __init__(self, driver_id: str) -> None:
        self.driver_id = driver_id
        self._last_beat = 0.0

    def _key(self, job: Any) -> str:
        return f"{BOARD_PREFIX}{self.driver_id}/{job.board_key}"

    def put(self, job: Any, state: str) -> None:
        attempt = job.current
        entry = {
            "key": job.request.key, "state": state, "driver": self.driver_id, "queued_at": job.queued_at,
            "attempt": len(job.attempts), "backend": job.request.backend, "platform": job.request.platform,
            "node_id": attempt.node_id if attempt else "", "node_ip": attempt.node_ip if attempt else "",
            "worker_pid": attempt.worker_pid if attempt else None, "started_at": attempt.started if attempt else None,
        }
        _kv("put", self._key(job), json.dumps(entry))

    def delete(self, job: Any) -> None:
        _kv("del", self._key(job))

    def heartbeat(self) -> None:
        now = time.time()
        if now - self._last_beat >= DRIVER_HEARTBEAT_S:
            self._last_beat = now
            _kv("put", f"{DRIVER_PREFIX}{self.driver_id}", json.dumps({"updated": now}))

    def close(self) -> None:
        _kv("del", f"{BOARD_PREFIX}{self.driver_id}/", prefix=True)
        _kv("del", f"{DRIVER_PREFIX}{self.driver_id}")


def _kv(operation: str, key: str, value: str = "", *, prefix: bool = False) -> Any:
    """Ray's internal KV (in the GCS, as Ray's own libraries use it); a failure only costs the board."""
    try:
        from ray.experimental import internal_kv  # lazy: ray is optional (the Ray executor's)

        if operation == "put":
            return internal_kv._internal_kv_put(key, value, overwrite=True, namespace=NAMESPACE)
        if operation == "del":
            return internal_kv._internal_kv_del(key, del_by_prefix=prefix, namespace=NAMESPACE)
        if operation == "list":
            return internal_kv._internal_kv_list(key, namespace=NAMESPACE)
        if operation == "get":
            return internal_kv._internal_kv_get(key, namespace=NAMESPACE)
    except Exception as error:
        logger.debug("ray kv %s %s: %s", operation, key, error)
    return None


def cluster_queue(ray: Any = None) -> list[dict[str, Any]]:
    """Every evaluation queued in, handed to or running on the cluster, from every connected process:
    dicts with key (EvaluationRequest.key), state (queued, submitted, running), driver, node_ip, node_id,
    worker_pid, attempt, queued_at, started_at, backend, platform. Oldest first."""
    if ray is None:
        import ray  # lazy: ray is optional (the Ray executor's)
    if not ray.is_initialized():
        return []
    now = time.time()
    alive_drivers: set[str] = set()
    for raw in _kv("list", DRIVER_PREFIX) or []:
        key = raw.decode() if isinstance(raw, bytes) else raw
        beat = _kv("get", key)
        if beat and now - json.loads(beat)["updated"] < DRIVER_STALE_S:
            alive_drivers.add(key[len(DRIVER_PREFIX):])
    entries = []
    for raw in _kv("list", BOARD_PREFIX) or []:
        key = raw.decode() if isinstance(raw, bytes) else raw
        value = _kv("get", key)
        if not value:
            continue
        entry = json.loads(value)
        if entry.get("driver") in alive_drivers:
            entries.append(entry)
    return sorted(entries, key=lambda entry: entry["queued_at"])


def cluster_status(ray: Any = None) -> dict[str, Any]:
    """The cluster as /healthz reports it: alive and dead nodes, total and free CPUs, GPUs, NeuronCores and
    memory, per node and in all."""
    if ray is None:
        import ray  # lazy: ray is optional (the Ray executor's)
    per_node_free = available_per_node()
    nodes = []
    dead = 0
    for node in ray.nodes():
        if not node.get("Alive"):
            dead += 1
            continue
        total, free = node.get("Resources", {}), per_node_free.get(node["NodeID"], {})
        nodes.append({"node_id": node["NodeID"], "ip": node.get("NodeManagerAddress", ""),
                      "head": "node:__internal_head__" in total, **_counts(total, free)})
    totals, free = ray.cluster_resources(), ray.available_resources()
    return {"nodes": nodes, "alive_nodes": len(nodes), "dead_nodes": dead, **_counts(totals, free)}


def _counts(total: Mapping[str, float], free: Mapping[str, float]) -> dict[str, Any]:
    return {
        "cpus": total.get("CPU", 0.0), "free_cpus": free.get("CPU", 0.0),
        "gpus": total.get("GPU", 0.0), "free_gpus": free.get("GPU", 0.0),
        "neuron_cores": total.get("neuron_cores", 0.0), "free_neuron_cores": free.get("neuron_cores", 0.0),
        "memory_gib": round(total.get("memory", 0.0) / 1024**3, 2),
        "free_memory_gib": round(free.get("memory", 0.0) / 1024**3, 2),
    }


def short(resources: Mapping[str, float]) -> str:
    shown = []
    for name, amount in sorted(resources.items()):
        if name.startswith("node:") or name == "object_store_memory":
            continue
        shown.append(f"{name} {amount / MIB / 1024:.1f} GiB" if name == "memory" else f"{name} {amount:g}")
    return ", ".join(shown)


def available_per_node() -> dict[str, dict[str, float]]:
    """Free resources of each alive node, by node id (a Ray developer API; the extra pins Ray's minor)."""
    from ray._private.state import available_resources_per_node  # lazy: ray is optional (the Ray executor's)

    return available_resources_per_node()
