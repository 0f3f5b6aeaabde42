"""Whether the cuda backend can run is decided where evaluations run (issue 24): this host's GPUs with the
local executor; the Ray cluster's `GPU` resources with a cluster, whatever the web host has. The deciding
function with both inputs here; tests/scale/test_cuda_on_cluster.py asks a real (GPU-less) Ray cluster."""

from __future__ import annotations

import glob

import pytest
from django.core.exceptions import ValidationError

from benchmark import services
from benchmark.services.evaluations import backend_unavailable
from engine.evaluator.ray_cluster import ResourceSpec, cuda_unavailable_on

ONE_GPU = ResourceSpec(num_cpus=1, num_gpus=1)
CPU_NODE = {"CPU": 8.0, "memory": 3e10}
GPU_NODE = {"CPU": 16.0, "GPU": 8.0, "memory": 1e11}


def test_a_cluster_runs_cuda_when_a_node_declares_the_gpus_an_evaluation_reserves():
    assert cuda_unavailable_on([CPU_NODE, GPU_NODE], ONE_GPU) is None
    assert "no node of the Ray cluster has 1 GPU" in cuda_unavailable_on([CPU_NODE, CPU_NODE], ONE_GPU)
    assert "has 2 GPU" in cuda_unavailable_on([{"CPU": 4.0, "GPU": 1.0}], ResourceSpec(num_gpus=2))
    assert "reserve no GPU" in cuda_unavailable_on([GPU_NODE], ResourceSpec(num_gpus=0))
    assert "no alive node" in cuda_unavailable_on([], ONE_GPU)


class _Cluster:
    """A Ray executor as the service sees it: its kind and its answer about the cluster's nodes."""

    kind = "ray"

    def __init__(self, nodes: list[dict[str, float]]) -> None:
        self.nodes = nodes

    def cuda_unavailable(self) -> str | None:
        return cuda_unavailable_on(self.nodes, ONE_GPU)


@pytest.fixture
def cluster():
    def use(nodes: list[dict[str, float]]) -> None:
        previous.append(services.set_executor(_Cluster(nodes)))

    previous: list = []
    yield use
    for executor in previous[:1]:
        services.set_executor(executor)


def test_a_gpu_less_web_host_offers_cuda_when_the_cluster_has_gpus(cluster, monkeypatch):
    monkeypatch.setattr(glob, "glob", lambda pattern: [])  # this host: no GPU
    cluster([CPU_NODE, GPU_NODE])
    assert backend_unavailable("cuda", "h100") is None


def test_a_web_host_with_a_gpu_refuses_cuda_when_the_cluster_has_none(cluster, monkeypatch, triton_problem):
    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia0"])  # this host: a GPU
    cluster([CPU_NODE])
    reason = backend_unavailable("cuda", "h100")
    assert reason.startswith("the cuda backend cannot run on the cluster: no node of the Ray cluster has 1 GPU")
    with pytest.raises(ValidationError, match="no node of the Ray cluster has 1 GPU"):
        services.request_evaluation(triton_problem.baseline_kernel, "h100", "cuda")


def test_the_local_executor_asks_this_host(monkeypatch):
    previous = services.set_executor(None)  # the configured one: local (no ACCELOPT_RAY_ADDRESS in tests)
    try:
        monkeypatch.setattr(glob, "glob", lambda pattern: [])
        assert backend_unavailable("cuda", "h100") == ("the cuda backend cannot run here: this host has no NVIDIA "
                                                      "GPU (/dev/nvidia*)")
        monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia0"])
        assert backend_unavailable("cuda", "h100") is None
    finally:
        services.set_executor(previous)


def test_the_sandboxed_child_keeps_the_gpu_ray_gave_the_task(monkeypatch):
    from engine.evaluator.sandbox.process import Limits
    from engine.platforms.triton.pipeline import cuda_placement

    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # what Ray sets for a task reserving one GPU
    _, extras = cuda_placement(Limits())
    assert dict(extras.environment)["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert "CUDA_VISIBLE_DEVICES" not in dict(cuda_placement(Limits())[1].environment)
