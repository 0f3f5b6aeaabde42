"""A real Ray cluster answers whether the cuda backend can run (issue 24): the cluster started here (a head
and a worker, `--num-gpus=0`) declares no `GPU`, so cuda is refused naming the cluster, even on a web host
with a GPU; the reservation a cuda evaluation makes is one GPU."""

from __future__ import annotations

import glob

import pytest

from engine.evaluator.ray_cluster import ResourceSpec, parse_resources

pytestmark = pytest.mark.scale


def test_a_gpu_less_cluster_refuses_cuda_whatever_this_host_has(ray_cluster, monkeypatch):
    from engine.evaluator.ray_executor import RayExecutor

    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia0"])  # this host: a GPU
    executor = RayExecutor(ray_cluster.address, resources=parse_resources({}))
    try:
        assert executor.resources["cuda"] == ResourceSpec(num_cpus=1, num_gpus=1)
        reason = executor.cuda_unavailable()
        assert reason is not None and "no node of the Ray cluster has 1 GPU" in reason
        assert f"Ray cluster at {ray_cluster.address}" in reason
    finally:
        executor.shutdown(wait=False)
