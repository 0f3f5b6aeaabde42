"""Campaigns against the real database, scheduler and worker, with the optimizer tests' fake pipeline and agents:
a fake kernel declares its latency (tests/optimizer/fakes.py) and the fake agents' calls cost $0.001 each."""

from __future__ import annotations

import pytest

import optimizer.worker
from accounts.roles import ENGINEER
from benchmark.models import Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256
from tests.optimizer.fakes import fake_kernel
from tests.optimizer_django.conftest import FakePipeline, fake_agents_factory, fake_pipeline  # noqa: F401

# Every run small: 2 iterations of a beam of 1 with 2 plans ("faster", "slower").
TINY = {"iterations": 2, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1, "fix_attempts": 0,
        "memory_size": 2, "rewrites_per_iteration": 2, "agent_batch": 2, "evaluation_batch": 2}
BASELINES = {"double": 10.0, "triple": 20.0, "quad": 40.0}


def make_problem(slug: str, latency: float, case: str = "mini") -> Problem:
    problem = Problem.objects.create(slug=slug, case=case, family="elementwise", reference_source=f"# {slug}")
    source = fake_kernel(latency, lineage=slug)
    problem.baseline_kernel = Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                                                    origin=KernelOrigin.BASELINE, name=f"{slug} baseline")
    problem.save(update_fields=["baseline_kernel"])
    return problem


@pytest.fixture
def problems(db) -> list[Problem]:
    return [make_problem(slug, latency) for slug, latency in BASELINES.items()]


@pytest.fixture
def owner(make_user):
    return make_user("olga", role=ENGINEER)


@pytest.fixture
def fake_agents(monkeypatch, fake_agents_factory):  # noqa: F811
    monkeypatch.setattr(optimizer.worker, "default_agents", fake_agents_factory)
    return fake_agents_factory
