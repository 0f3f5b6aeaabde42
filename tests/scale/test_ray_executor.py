"""The Ray executor against a real cluster (a head and one worker node, 1 CPU each; this process drives it).

* an evaluation on Ray is the local pipeline's record, field for field;
* back-pressure: no more tasks are handed to Ray than the cluster can start;
* cancelling withdraws queued requests and kills running tasks: the cluster is idle again;
* a worker node killed mid-evaluation: that attempt is an infrastructure error, the evaluation is retried
  on the other node and gives the correct result, never a kernel verdict from the dead attempt.
"""

from __future__ import annotations

import threading
import time

import pytest

from engine.evaluator import ErrorKind, LocalExecutor
from engine.evaluator.ray_cluster import ResourceSpec, cluster_queue, parse_resources
from tests.scale.conftest import wait_for
from tests.scale.kernels import request, slow_kernel

pytestmark = pytest.mark.scale

# Fields that say how long or where, not what: everything else must be identical.
CIRCUMSTANTIAL = {"wall_time_s", "attempts"}
# The error norms are computed in the evaluating process (the Ray worker here), where Ray sets
# OMP_NUM_THREADS to the task's CPUs: numpy's reductions then sum in another order, and the norms differ
# from a local evaluation's in the last bits (1e-15 relative). Everything the kernel is judged on is equal.
ERROR_NORMS = {"relative_l2_errors", "output_errors"}


def _flat(values) -> list[float]:
    return [x for row in values for x in (row if isinstance(row, list) else [row])]


@pytest.fixture
def executor(ray_cluster):
    from engine.evaluator.ray_executor import RayExecutor

    pool = RayExecutor(ray_cluster.address, max_retries=2)
    yield pool
    pool.shutdown(wait=False)
    wait_for(ray_cluster.idle, 30, "the cluster to be idle after the test")


def _started(future) -> bool:
    return any(attempt.started for attempt in future.attempts)


def test_an_evaluation_on_ray_is_the_local_record(executor, ray_cluster) -> None:
    on_ray = executor.submit(request())
    with LocalExecutor(max_workers=1) as local:
        here = local.submit(request()).result(timeout=120)
    there = on_ray.result(timeout=120)
    assert there.correct and there.error_kind is None
    ray_fields = {k: v for k, v in there.to_dict().items() if k not in CIRCUMSTANTIAL | ERROR_NORMS}
    local_fields = {k: v for k, v in here.to_dict().items() if k not in CIRCUMSTANTIAL | ERROR_NORMS}
    assert ray_fields == local_fields
    for name in ERROR_NORMS:  # the same to the last few bits (see ERROR_NORMS)
        assert _flat(there.to_dict()[name]) == pytest.approx(_flat(here.to_dict()[name]), rel=1e-9)
    (attempt,) = on_ray.attempts
    assert attempt.outcome == "ok" and attempt.node_id in {n["NodeID"] for n in ray_cluster.alive_nodes()}
    assert attempt.worker_pid and attempt.started is not None


def test_never_more_tasks_in_the_cluster_than_it_can_start(executor, ray_cluster) -> None:
    capacity = ray_cluster.ray.cluster_resources()["CPU"]
    assert capacity == 2
    futures = [executor.submit(request()) for _ in range(5)]
    handed_over: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            handed_over.append(executor.counts()["handed_over"])
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        results = [future.result(timeout=240) for future in futures]
    finally:
        stop.set()
        sampler.join()
    assert all(r.correct for r in results)
    assert max(handed_over) == capacity  # the cluster was used fully ...
    assert all(n <= capacity for n in handed_over)  # ... and never given more than it could start
    assert sum(1 for n in handed_over if n < capacity) > 0  # the queue drained at the end


def test_cancelling_leaves_no_task_in_the_cluster(executor, ray_cluster) -> None:
    futures = [executor.submit(request(slow_kernel())) for _ in range(3)]  # two run, one waits here
    wait_for(lambda: sum(_started(f) for f in futures) == 2, 60, "two evaluations to start")
    assert [e["state"] for e in cluster_queue()].count("running") == 2
    assert [f.cancel() for f in futures] == [True, True, True]
    assert all(f.cancelled() for f in futures)
    wait_for(ray_cluster.idle, 15, "the killed tasks to release their CPUs")
    assert [a.outcome for f in futures for a in f.attempts] == ["cancelled", "cancelled"]


def test_a_killed_worker_node_is_an_infrastructure_error_retried_elsewhere(executor, ray_cluster) -> None:
    worker_node = ray_cluster.worker_node_id()
    futures = [executor.submit(request(slow_kernel())) for _ in range(2)]  # one on each node
    wait_for(lambda: all(_started(f) for f in futures), 60, "both evaluations to start")
    victim = next(f for f in futures if f.attempts[0].node_id == worker_node)
    survivor = next(f for f in futures if f is not victim)
    ray_cluster.worker.kill()  # raylet, its workers and (die-with-parent) their sandbox children
    try:
        retried, other = victim.result(timeout=180), survivor.result(timeout=180)
        first, second = victim.attempts
        assert first.node_id == worker_node and first.outcome == "infrastructure_error"
        assert any(name in first.error for name in ("NodeDiedError", "WorkerCrashedError", "ObjectLostError"))
        assert second.outcome == "ok" and second.node_id != worker_node  # retried on the head
        # The correct result, the same as the evaluation nobody disturbed; the dead attempt is counted.
        assert retried.correct and retried.error_kind is None
        assert retried.latency_ms == other.latency_ms and retried.output_errors == other.output_errors
        assert retried.attempts == other.attempts + 1
    finally:
        ray_cluster.restart_worker()


def test_an_evaluation_that_keeps_dying_is_an_infrastructure_error(ray_cluster) -> None:
    """With no retries left, a dead node's evaluation ends as infrastructure_error: never a kernel verdict."""
    from engine.evaluator.ray_executor import RayExecutor

    worker_node = ray_cluster.worker_node_id()
    pool = RayExecutor(ray_cluster.address, max_retries=0)
    try:
        futures = [pool.submit(request(slow_kernel())) for _ in range(2)]
        wait_for(lambda: all(_started(f) for f in futures), 60, "both evaluations to start")
        victim = next(f for f in futures if f.attempts[0].node_id == worker_node)
        ray_cluster.worker.kill()
        result = victim.result(timeout=120)
        assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and not result.is_kernel_result
        assert "not the kernel's fault" in result.error_message and result.attempts == 1
    finally:
        pool.shutdown(wait=False)
        ray_cluster.restart_worker()


def test_resources_per_backend_come_from_settings_json() -> None:
    specs = parse_resources({"simulator": {"num_cpus": 2, "memory_mb": 512}, "neuron": {"neuron_cores": 1}})
    assert specs["simulator"] == ResourceSpec(num_cpus=2, memory_mb=512)
    assert specs["neuron"].custom == {"neuron_cores": 1.0}
    assert specs["neuron"].options(request()) == {"num_cpus": 1.0, "num_gpus": 0.0, "memory": 2 * 1024**3,
                                                   "resources": {"neuron_cores": 1.0}}
    with pytest.raises(ValueError, match="num_cpus"):
        parse_resources({"simulator": {"num_cpus": "two"}})
