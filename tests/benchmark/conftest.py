"""Fixtures for the benchmark app: the NKIBench suite loaded (without evaluating), and pipeline doubles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from benchmark import services
from benchmark.models import Problem
from engine.evaluator.result import ErrorKind, EvaluationResult


@pytest.fixture
def inline_evaluations(settings: Any) -> None:
    """Evaluations run in the calling thread, so a request's response already holds the result."""
    settings.ACCELOPT_EVALUATION_INLINE = True


@pytest.fixture
def nkibench(db: Any, inline_evaluations: None) -> list[Problem]:
    """The built-in suite's 28 problem rows and 14 baselines, nothing evaluated."""
    services.load_suite("nkibench", evaluate_cases=())
    return list(Problem.objects.filter(suite="nkibench"))


@pytest.fixture
def silu_mini(nkibench: list[Problem]) -> Problem:
    return Problem.objects.get(suite="nkibench", slug="silu", case="mini")


class FakePipeline:
    """Stands in for engine.evaluator.evaluate where a test is about our bookkeeping, not a kernel."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.next_results: list[EvaluationResult] = []

    def __call__(self, **kwargs: Any) -> EvaluationResult:
        self.calls.append(kwargs)
        if self.next_results:
            return self.next_results.pop(0)
        latency = 0.01 * len(self.calls)
        return EvaluationResult(
            status="ok", compiled=True, runnable=True, correct=True, latency_ms=latency,
            peak_fraction=0.005 / latency, profile={"hbm_read_bytes": 1024}, seeds=(1, 2, 3),
            output_errors=(1e-7,), relative_l2_errors=((1e-7,), (2e-7,), (1e-7,)), tolerance=2e-5,
            timeline={"scalar": [[0.0, 4.0]], "dma": [[0.0, 2.0], [3.0, 5.0]]},
            backend=kwargs.get("backend", ""), platform=kwargs.get("platform", ""), wall_time_s=0.1,
        )

    def fail_next(self, kind: ErrorKind, message: str) -> None:
        self.next_results.append(EvaluationResult.failure(kind, message))


@pytest.fixture
def fake_pipeline(monkeypatch: pytest.MonkeyPatch, inline_evaluations: None) -> FakePipeline:
    fake = FakePipeline()
    monkeypatch.setattr("engine.evaluator.evaluate", fake, raising=False)
    return fake


@pytest.fixture
def bearer(make_token: Callable[[Any], str]) -> Callable[[Any], dict[str, str]]:
    return lambda user: {"Authorization": f"Bearer {make_token(user)}"}
