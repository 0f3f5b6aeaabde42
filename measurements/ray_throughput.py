"""Evaluations per minute of a batch of NKIBench mini kernels: the local executor against Ray with one and
with two worker nodes on this machine, and what Ray costs per evaluation next to the evaluation itself.

    .venv/bin/python measurements/ray_throughput.py                  # 14 mini baselines x 2, 2 local workers
    .venv/bin/python measurements/ray_throughput.py --copies 1 --sequential 5

For each configuration the batch (every mini baseline, `--copies` times, fixed seeds) is submitted at once
and timed from the first submit to the last result. The Ray cluster is a head that runs no evaluations
(--num-cpus=0: it only schedules) and N worker nodes of 1 CPU each (deploy/local.py starts them, as the
tests do); each node runs one evaluation first so its worker process exists (reported as the cold start).

The overhead per evaluation is measured one evaluation at a time on an idle cluster: the time from submit()
to the future's result minus the pipeline's own wall time (EvaluationResult.wall_time_s, measured inside
the worker), next to the round trip of an empty Ray task (Ray's floor) and the same figure for the local
executor.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deploy.local import start_ray_head, start_ray_worker  # noqa: E402
from engine.evaluator import EvaluationRequest, Limits, LocalExecutor  # noqa: E402
from engine.platforms.nki.suites import load_suite  # noqa: E402

LIMITS = Limits(wall_seconds=120, cpu_seconds=120, memory_bytes=2 * 1024**3)


def batch(copies: int) -> list[EvaluationRequest]:
    requests = []
    for spec in load_suite("nkibench").problems:
        counts = spec.peak_counts("mini")
        requests.append(EvaluationRequest(
            kernel_source=spec.baseline_for("mini"), reference_source=spec.reference_source("mini"),
            peak_counts=(counts.vector_flops, counts.matmul_flops, counts.hbm_bytes), tolerance=spec.tolerance,
            limits=LIMITS, seeds=(11, 12, 13),
        ))
    return requests * copies


def run_batch(executor, requests: list[EvaluationRequest]) -> tuple[float, int, float]:
    """Wall seconds of the batch, correct results, median seconds one evaluation took inside the pipeline."""
    started = time.monotonic()
    futures = [executor.submit(request) for request in requests]
    results = [future.result() for future in futures]
    wall = time.monotonic() - started
    return wall, sum(1 for r in results if r.correct), statistics.median(r.wall_time_s for r in results)


def overheads(executor, request: EvaluationRequest, count: int) -> list[float]:
    """End-to-end seconds minus the pipeline's own seconds, one evaluation at a time."""
    values = []
    for _ in range(count):
        started = time.monotonic()
        result = executor.submit(request).result()
        values.append(time.monotonic() - started - result.wall_time_s)
    return values


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def report(name: str, measured: tuple[float, int, float], total: int) -> None:
    wall, correct, each = measured
    print(f"{name:<28} {total:>4} evaluations ({correct} correct) in {wall:6.1f} s = "
          f"{total / wall * 60:6.1f} per minute; median pipeline time {each:.2f} s; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=2, help="times each of the 14 baselines is in the batch")
    parser.add_argument("--local-workers", type=int, default=2)
    parser.add_argument("--sequential", type=int, default=8, help="evaluations timed one at a time for overhead")
    args = parser.parse_args()
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    requests = batch(args.copies)
    print(f"batch: {len(requests)} mini evaluations; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    # The local executor before and after Ray: on a shared machine the load moves, and the two bracket it.
    with LocalExecutor(max_workers=args.local_workers) as local:
        report(f"local, {args.local_workers} workers", run_batch(local, requests), len(requests))
        local_overhead = overheads(local, requests[0], args.sequential)

    import ray

    from engine.evaluator.ray_executor import RayExecutor

    directory = Path(tempfile.mkdtemp(prefix="ray-throughput-"))
    head, address = start_ray_head(directory, num_cpus=0)
    nodes = []
    try:
        ray.init(address=address, namespace="accelopt", logging_level="WARNING", log_to_driver=False,
                 configure_logging=False)
        executor = RayExecutor(address)
        for count in (1, 2):
            nodes.append(start_ray_worker(address, directory / f"ray-worker-{count}.log"))
            while len([n for n in ray.nodes() if n["Alive"]]) < count + 1:
                time.sleep(0.2)
            cold_started = time.monotonic()
            run_batch(executor, requests[:count])  # one per node: its worker process starts here
            print(f"  cold start of {count} node(s) (first evaluation each): {time.monotonic() - cold_started:.1f} s")
            report(f"ray, {count} worker node(s)", run_batch(executor, requests), len(requests))
        ray_overhead = overheads(executor, requests[0], args.sequential)

        @ray.remote(num_cpus=0)
        def empty() -> None:
            return None

        ray.get(empty.remote())
        floor = []
        for _ in range(20):
            started = time.monotonic()
            ray.get(empty.remote())
            floor.append(time.monotonic() - started)
        executor.shutdown()
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for node in reversed(nodes):
            node.stop(timeout=5)
        head.stop(timeout=5)

    with LocalExecutor(max_workers=args.local_workers) as local:
        report(f"local, {args.local_workers} workers (again)", run_batch(local, requests), len(requests))

    def ms(values: list[float]) -> str:
        return f"median {statistics.median(values) * 1e3:6.1f} ms, p95 {p95(values) * 1e3:6.1f} ms"

    print(f"overhead per evaluation, local executor:     {ms(local_overhead)}")
    print(f"overhead per evaluation, Ray executor:       {ms(ray_overhead)}")
    print(f"empty Ray task round trip (Ray's own floor): {ms(floor)}")


if __name__ == "__main__":
    main()
