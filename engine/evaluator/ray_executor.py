"""`RayExecutor`: evaluations as Ray tasks on a cluster (the `scale` extra; docs/operations.md, Scale-out).

Each evaluation is one Ray task with declared resources (`ResourceSpec`, per backend: CPUs and memory for
the simulator, a `neuron_cores` for the hardware backend). The task calls `EvaluationRequest.run()`, the
same pure pipeline entry point the local executor calls, so the sandboxed children, the checks and the
typed `EvaluationResult` are exactly the local ones; Ray only decides on which host they happen.

What this module adds around Ray:

* **Where it runs.** The task is a generator: it first yields where it started (node, worker pid), then the
  result. The executor thereby knows what is running where, and writes it to a board in Ray's own
  key-value store (GCS), so any process connected to the cluster can list the queue (`cluster_queue`).
* **Failures, as the taxonomy says.** A worker or node that dies mid-evaluation is an infrastructure
  failure, never a kernel result: the evaluation is retried, preferably on another node, at most
  `max_retries` times; after that the future's result is an `infrastructure_error`. An exception raised by
  the pipeline itself fails the future, as it does locally (the caller records it as ours).
* **Back-pressure.** Requests wait in this process until a node has the free resources to start them; no
  more tasks are handed to Ray than the cluster can start now, so cancelling a run only has to withdraw
  queued requests here and kill the few tasks that really run.
* **Cancellation.** `future.cancel()` works until the result is in: a queued request is dropped, a running
  task is force-cancelled (Ray kills its worker; the sandbox's bwrap children die with their parent).

Ray is imported here only; `make run` never imports this module.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from engine.evaluator.executors import EvaluationRequest, Executor
from engine.evaluator.ray_cluster import (
    DEFAULT_RESOURCES,
    NAMESPACE,
    QueueBoard,
    ResourceSpec,
    available_per_node,
    cluster_status,
    cuda_unavailable_on,
    short,
)
from engine.evaluator.result import ErrorKind, EvaluationResult

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# The task


def evaluate_in_worker(request: EvaluationRequest) -> Iterator[Any]:
    """The Ray task body: say where it started, then run the pipeline exactly as the local executor does."""
    import ray  # lazy: ray is optional (the Ray executor's)

    context = ray.get_runtime_context()
    yield {"started": True, "node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address(),
           "pid": os.getpid(), "host": socket.gethostname()}
    yield request.run()


# --------------------------------------------------------------------------------------------------
# Bookkeeping


@dataclass
class RayAttempt:
    """One try of an evaluation on the cluster: where it ran and how it ended."""

    number: int
    submitted: float
    node_id: str = ""
    node_ip: str = ""
    worker_pid: int | None = None
    started: float | None = None
    finished: float | None = None
    outcome: str = "submitted"  # submitted, running, ok, infrastructure_error, pipeline_error, cancelled
    error: str = ""


class RayFuture(Future):
    """A Future whose cancel() also stops a task that already runs on the cluster.

    The executor never marks it "running" (it sets the result directly), so cancel() can succeed until
    the result is in; the evaluation's callbacks then see a cancelled future.
    """

    def __init__(self, executor: RayExecutor, job: _Job) -> None:
        super().__init__()
        self._executor = executor
        self._job = job

    @property
    def attempts(self) -> list[RayAttempt]:
        with self._executor._lock:
            return [replace(attempt) for attempt in self._job.attempts]

    @property
    def key(self) -> str:
        return self._job.request.key

    def cancel(self) -> bool:
        return self._executor._cancel(self._job)


@dataclass(eq=False)
class _Job:
    request: EvaluationRequest
    spec: ResourceSpec
    queued_at: float
    board_key: str
    future: RayFuture | None = None
    attempts: list[RayAttempt] = field(default_factory=list)
    generator: Any = None  # the Ray ObjectRefGenerator of the attempt in flight
    avoid_node: str = ""  # the node the last attempt died on: the retry prefers another one
    cancelled: bool = False

    @property
    def current(self) -> RayAttempt | None:
        return self.attempts[-1] if self.attempts else None


# --------------------------------------------------------------------------------------------------
# The executor


class RayExecutor(Executor):
    """Runs each evaluation as a Ray task on the cluster at `address` ("host:port" of the head, or "auto")."""

    kind = "ray"

    def __init__(
        self,
        address: str,
        *,
        resources: Mapping[str, ResourceSpec] | None = None,
        max_retries: int = 2,
        poll_s: float = 0.05,
        unschedulable_after_s: float = 120.0,
    ) -> None:
        import ray  # lazy: ray is optional (the Ray executor's)

        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self._ray = ray
        self.address = address
        self.resources = dict(resources or DEFAULT_RESOURCES)
        self.max_retries = max_retries
        self.poll_s = poll_s
        self.unschedulable_after_s = unschedulable_after_s
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING, log_to_driver=False,
                     configure_logging=False)
        # max_retries=0: Ray must not retry on its own; a retry is ours to count, place and report.
        self._remote = ray.remote(max_retries=0)(evaluate_in_worker)
        self.driver_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._queue: deque[_Job] = deque()
        self._running: dict[Any, _Job] = {}  # generator -> job
        self._closed = False
        self._changed = False  # submitted, finished or cancelled since the last look for free room
        self._looked_at = 0.0
        self._nodes_cache: tuple[float, list[dict[str, Any]]] = (0.0, [])
        self._board = QueueBoard(self.driver_id)
        self._thread = threading.Thread(target=self._loop, name="accelopt-ray-dispatch", daemon=True)
        self._thread.start()

    # -- the interface -------------------------------------------------------------------------------

    def submit(self, request: EvaluationRequest) -> RayFuture:
        spec = self.resources.get(request.backend, DEFAULT_RESOURCES["simulator"])
        job = _Job(request=request, spec=spec, queued_at=time.time(), board_key=uuid.uuid4().hex[:12])
        future = RayFuture(self, job)
        job.future = future
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot submit to a RayExecutor that was shut down")
            self._queue.append(job)
            self._board.put(job, "queued")
            self._changed = True
            self._wake.notify_all()
        return future

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            self._closed = True
            jobs = list(self._queue) + list(self._running.values())
        if not wait:
            for job in jobs:
                self._cancel(job)
        with self._lock:
            self._wake.notify_all()
        self._thread.join(timeout=None if wait else 10)
        self._board.close()
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()

    def describe(self) -> dict[str, Any]:
        counts = self.counts()
        return {"kind": self.kind, "address": self.address, "queued_here": counts["queued"],
                "handed_over_here": counts["handed_over"], "max_retries": self.max_retries,
                **cluster_status(self._ray)}

    def cuda_unavailable(self) -> str | None:
        """Whether the cluster's alive nodes (not this host) can take a cuda evaluation's reservation."""
        spec = self.resources.get("cuda", DEFAULT_RESOURCES["cuda"])
        reason = cuda_unavailable_on([dict(node.get("Resources", {})) for node in self._alive_nodes()], spec)
        return f"{reason} (Ray cluster at {self.address})" if reason else None

    def counts(self) -> dict[str, int]:
        """This process's evaluations: waiting here for room ("queued") and handed to Ray ("handed_over")."""
        with self._lock:
            return {"queued": len(self._queue), "handed_over": len(self._running)}

    # -- cancelling ----------------------------------------------------------------------------------

    def _cancel(self, job: _Job) -> bool:
        future = job.future
        assert future is not None
        with self._lock:
            if future.done():
                return future.cancelled()
            job.cancelled = True
            if job in self._queue:
                self._queue.remove(job)
            elif job.generator is not None:
                # force: kill the worker process; a running evaluation cannot be interrupted politely
                try:
                    self._ray.cancel(job.generator, force=True)
                except Exception as error:  # already finished or its node is gone: nothing left to stop
                    logger.debug("ray.cancel of %s: %s", job.request.key, error)
                self._running.pop(job.generator, None)
                if job.current is not None:
                    job.current.outcome, job.current.finished = "cancelled", time.time()
            self._board.delete(job)
            self._changed = True
            self._wake.notify_all()
        # Future.cancel runs the done-callbacks, which may call back into services: outside the lock.
        return Future.cancel(future)

    # -- the dispatch loop ---------------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._lock:
                if self._closed and not self._running and not self._queue:
                    return
                # Look for room when something changed here, and twice a second for room freed elsewhere.
                if self._queue and (self._changed or time.monotonic() - self._looked_at > 0.5):
                    self._changed, self._looked_at = False, time.monotonic()
                    try:
                        self._start_what_fits()
                    except Exception:  # a GCS hiccup must not stop the dispatcher: try again next round
                        logger.exception("ray executor: could not schedule queued evaluations")
                generators = list(self._running)
                if not generators:
                    self._wake.wait(timeout=1.0 if not self._queue else 0.2)
            self._board.heartbeat()
            if not generators:
                continue
            try:
                ready, _ = self._ray.wait(generators, num_returns=1, timeout=self.poll_s, fetch_local=False)
            except Exception:
                logger.exception("ray executor: ray.wait failed")
                time.sleep(self.poll_s)
                continue
            for generator in ready:
                self._advance(generator)

    def _advance(self, generator: Any) -> None:
        """The next thing a task yielded: its start, its result, or how it failed."""
        with self._lock:
            job = self._running.get(generator)
        if job is None:  # cancelled meanwhile
            return
        try:
            value = self._ray.get(next(generator))
        except StopIteration:
            value = RuntimeError("the evaluation task ended without a result")
        except Exception as error:
            value = error
        if isinstance(value, dict) and value.get("started"):
            with self._lock:
                attempt = job.current
                if attempt is not None and not job.cancelled:
                    attempt.node_id, attempt.node_ip = value["node_id"], value["node_ip"]
                    attempt.worker_pid, attempt.started, attempt.outcome = value["pid"], time.time(), "running"
                    self._board.put(job, "running")
            return
        with self._lock:
            if self._running.pop(generator, None) is None or job.cancelled:
                return
            self._changed = True
        if isinstance(value, EvaluationResult):
            self._finish(job, "ok", result=value)
        else:
            self._failed(job, value)

    def _failed(self, job: _Job, error: BaseException) -> None:
        ray = self._ray
        if isinstance(error, ray.exceptions.RayTaskError):
            # The pipeline itself raised inside the worker: our bug, as locally; not retried.
            cause = getattr(error, "cause", None) or error
            self._finish(job, "pipeline_error", error=cause)
            return
        attempt = job.current
        detail = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        where = f" on node {attempt.node_ip} {attempt.node_id[:12]}" if attempt and attempt.node_id else ""
        logger.warning("evaluation %s: attempt %s failed%s: %s", job.request.key, len(job.attempts), where, detail)
        with self._lock:
            if attempt is not None:
                attempt.outcome, attempt.error, attempt.finished = "infrastructure_error", detail, time.time()
                job.avoid_node = attempt.node_id
            if len(job.attempts) <= self.max_retries and not self._closed:
                job.generator = None
                self._queue.appendleft(job)  # a retry goes first: it has waited longest
                self._board.put(job, "queued")
                self._changed = True
                self._wake.notify_all()
                return
        tries = ", ".join(f"{a.node_ip or '?'} {a.node_id[:8]}: {a.error}" for a in job.attempts)
        result = EvaluationResult.failure(
            ErrorKind.INFRASTRUCTURE_ERROR,
            f"the Ray worker running this evaluation failed {len(job.attempts)} times ({tries}); "
            "this is not the kernel's fault and it will be retried",
            backend=job.request.backend, platform=job.request.platform, attempts=len(job.attempts),
        )
        self._finish(job, "infrastructure_error", result=result)

    def _finish(self, job: _Job, outcome: str, *, result: EvaluationResult | None = None,
                error: BaseException | None = None) -> None:
        with self._lock:
            attempt = job.current
            if attempt is not None and attempt.outcome in ("submitted", "running"):
                attempt.outcome, attempt.finished = outcome, time.time()
            self._board.delete(job)
        future = job.future
        assert future is not None
        failed_tries = sum(1 for a in job.attempts if a.outcome == "infrastructure_error")
        if result is not None and outcome == "ok" and failed_tries:
            # attempts counts launches, including the ones a dead worker or node took with it.
            result = replace(result, attempts=result.attempts + failed_tries)
        try:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)
        except Exception:  # cancelled in the meantime: the result is no longer wanted
            pass

    # -- back-pressure -------------------------------------------------------------------------------

    def _start_what_fits(self) -> None:
        """Hand queued requests to Ray while some node has the free resources to start them (lock held)."""
        if not self._queue:
            return
        nodes = self._alive_nodes()
        free = self._free_per_node(nodes)
        now = time.time()
        blocked: set[tuple[tuple[str, float], ...]] = set()
        for job in list(self._queue):
            demand = job.spec.demand(job.request)
            shape = tuple(sorted(demand.items()))
            if shape in blocked:  # an older request of the same shape waits: keep their order
                continue
            if not any(_fits(node["Resources"], demand) for node in nodes):
                if now - job.queued_at > self.unschedulable_after_s:
                    self._queue.remove(job)
                    self._unschedulable(job, demand, nodes)
                blocked.add(shape)
                continue
            node_id = _take(free, demand, prefer_not=job.avoid_node)
            if node_id is None:
                blocked.add(shape)
                continue
            self._queue.remove(job)
            self._launch(job, node_id if job.avoid_node else None)

    def _launch(self, job: _Job, node_id: str | None) -> None:
        options = job.spec.options(job.request)
        if node_id:
            # lazy: ray is optional (the Ray executor's)
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # soft: prefer the chosen (other) node, but run anywhere rather than not at all
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node_id, soft=True)
        job.attempts.append(RayAttempt(number=len(job.attempts) + 1, submitted=time.time()))
        job.generator = self._remote.options(**options).remote(job.request)
        self._running[job.generator] = job
        self._board.put(job, "submitted")

    def _unschedulable(self, job: _Job, demand: dict[str, float], nodes: list[dict[str, Any]]) -> None:
        offered = "; ".join(f"{n.get('NodeManagerAddress')}: {short(n['Resources'])}" for n in nodes) or "no node"
        result = EvaluationResult.failure(
            ErrorKind.INFRASTRUCTURE_ERROR,
            f"no node of the Ray cluster can start this evaluation: it needs {short(demand)}, the nodes offer "
            f"{offered} (waited {self.unschedulable_after_s:.0f} s); this is not the kernel's fault",
            backend=job.request.backend, platform=job.request.platform, attempts=0,
        )
        self._board.delete(job)
        future = job.future
        assert future is not None
        threading.Thread(target=lambda: _settle(future, result), daemon=True).start()

    def _alive_nodes(self) -> list[dict[str, Any]]:
        cached_at, nodes = self._nodes_cache
        if time.monotonic() - cached_at > 1.0:
            nodes = [node for node in self._ray.nodes() if node.get("Alive")]
            self._nodes_cache = (time.monotonic(), nodes)
        return nodes

    def _free_per_node(self, nodes: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
        """Room per node for one more task: the smaller of Ray's view (which counts other processes' tasks
        but lags a moment behind tasks that just started) and this process's own count (the node's total
        minus the tasks it runs there), then less the tasks handed over and not started yet (placed where
        they would fit first: Ray has not said where they go)."""
        ray_view = available_per_node()
        free: dict[str, dict[str, float]] = {}
        for node in nodes:
            node_id = node["NodeID"]
            if node_id not in ray_view:  # died since the node list was read
                continue
            own = dict(node["Resources"])
            for job in self._running.values():
                attempt = job.current
                if attempt is not None and attempt.started is not None and attempt.node_id == node_id:
                    for name, amount in job.spec.demand(job.request).items():
                        own[name] = own.get(name, 0.0) - amount
            free[node_id] = {name: min(amount, ray_view[node_id].get(name, 0.0)) for name, amount in own.items()}
        for job in self._running.values():
            if job.current is not None and job.current.started is None:
                _take(free, job.spec.demand(job.request))
        return free


def _settle(future: Future, result: EvaluationResult) -> None:
    try:
        future.set_result(result)
    except Exception:  # cancelled meanwhile
        pass


def _fits(free: Mapping[str, float], demand: Mapping[str, float]) -> bool:
    return all(free.get(name, 0.0) + 1e-9 >= amount for name, amount in demand.items())


def _take(free: dict[str, dict[str, float]], demand: Mapping[str, float], prefer_not: str = "") -> str | None:
    """Reserve `demand` on the first node with room (another node than `prefer_not` if one has room)."""
    order = sorted(free, key=lambda node_id: node_id == prefer_not)
    for node_id in order:
        if _fits(free[node_id], demand):
            for name, amount in demand.items():
                free[node_id][name] = free[node_id].get(name, 0.0) - amount
            return node_id
    return None


