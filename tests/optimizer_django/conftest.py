"""Runs against the real database, benchmark services and memory, with a fake evaluation pipeline.

The fake pipeline reads the latency a kernel declares (`latency=<ms>`, the fake kernels of
tests/optimizer/fakes.py) instead of simulating it, and counts how often each source is evaluated.
"""

from __future__ import annotations

from collections import Counter

import pytest

import engine.evaluator as pipeline
from accounts.roles import ENGINEER
from benchmark.models import Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256
from tests.optimizer.fakes import FakeAgents, fake_kernel, read_kernel


class FakePipeline:
    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()  # (reference, kernel) -> evaluations

    def __call__(self, kernel_source: str, reference_source: str, **kwargs) -> dict:
        self.calls[reference_source, kernel_source] += 1
        kernel = read_kernel(kernel_source)
        latency = float(kernel["latency"])
        if kernel.get("broken"):
            return {"status": "failed", "compiled": True, "runnable": True, "correct": False,
                    "error_kind": "incorrect", "error_message": "relative L2 error 0.5 > 2e-05"}
        return {"status": "ok", "compiled": True, "runnable": True, "correct": True, "latency_ms": latency,
                "peak_fraction": 1.0 / latency, "profile": {"hbm_read_bytes": 1000.0 * latency}}

    @property
    def evaluated_twice(self) -> list[tuple[str, str]]:
        return [key for key, count in self.calls.items() if count > 1]


@pytest.fixture
def fake_pipeline(monkeypatch, settings) -> FakePipeline:
    settings.ACCELOPT_EVALUATION_INLINE = True
    fake = FakePipeline()
    monkeypatch.setattr(pipeline, "evaluate", fake, raising=False)
    return fake


@pytest.fixture
def problem(db) -> Problem:
    problem = Problem.objects.create(slug="double", case="mini", family="elementwise", reference_source="# ref")
    baseline = Kernel.objects.create(
        problem=problem, source=fake_kernel(10.0), sha256=source_sha256(fake_kernel(10.0)),
        origin=KernelOrigin.BASELINE, name="double baseline",
    )
    problem.baseline_kernel = baseline
    problem.save(update_fields=["baseline_kernel"])
    return problem


@pytest.fixture
def owner(make_user):
    """The engineer who launches the runs (tests/conftest.py's `teammate` is the other engineer)."""
    return make_user("olga", role=ENGINEER)


@pytest.fixture
def fake_agents_factory():
    """A factory the worker calls per run; `.agents` is the last instance made (to inspect requests)."""

    def factory(run):
        factory.agents = FakeAgents(plans=("faster", "slower", "broken"))
        return factory.agents

    return factory


SMALL_SEARCH = {"iterations": 2, "beam_width": 2, "plans_per_candidate": 3, "samples_per_plan": 1, "fix_attempts": 1,
                "memory_size": 4, "rewrites_per_iteration": 4, "agent_batch": 2, "evaluation_batch": 2}
