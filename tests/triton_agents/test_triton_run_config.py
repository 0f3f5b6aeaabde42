"""A run evaluated on the Triton interpreter is a correctness-only search; one on a GPU or on NKI is not."""

from __future__ import annotations

from benchmark.models import Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256
from optimizer import services as run_services
from tests.triton_agents.kernels import ADD


def _triton_problem() -> Problem:
    problem = Problem.objects.create(
        suite="flashinfer", slug="studio_add", case="workloads", family="elementwise", language="triton",
        reference_source="import torch\n\n\ndef run(x, y):\n    return x + y\n",
        definition={"name": "studio_add"}, workloads=[{"uuid": "w1", "axes": {"n": 1000}, "inputs": {}}],
    )
    problem.baseline_kernel = Kernel.objects.create(problem=problem, source=ADD, sha256=source_sha256(ADD),
                                                    origin=KernelOrigin.IMPORTED, name="add",
                                                    entry_point="main.py::run")
    problem.save(update_fields=["baseline_kernel"])
    return problem


def test_an_interpreter_run_ranks_by_correctness_and_a_gpu_run_by_latency(engineer, monkeypatch):
    problem = _triton_problem()
    interpreted = run_services.create_run(engineer, problem, agent="offline")
    assert interpreted.backend == "triton-interpreter"
    assert interpreted.config["search"]["correctness_only"] is True
    # This host has no GPU, so create_run refuses the cuda backend (tested where that refusal lives); here the
    # question is only what a GPU run's search is told, as on a host that has one.
    monkeypatch.setattr("optimizer.services.launch.backend_unavailable", lambda backend, platform: None)
    measured = run_services.create_run(engineer, problem, agent="offline", backend="cuda")
    assert measured.config["search"]["correctness_only"] is False


def test_an_nki_run_is_measured_as_before(engineer):
    problem = Problem.objects.create(slug="double", case="mini", family="elementwise", reference_source="# ref")
    kernel = Kernel.objects.create(problem=problem, source="def k(x):\n    return x\n", sha256="0" * 64,
                                   origin=KernelOrigin.BASELINE, name="double baseline")
    run = run_services.create_run(engineer, problem, start_kernel=kernel, agent="offline")
    assert run.config["search"]["correctness_only"] is False
