"""Executors: where evaluations run. One interface; `LocalExecutor` is the default, Ray comes later.

Every evaluation already runs in its own sandboxed children, so the local executor is a thread pool
whose threads only drive children (they wait on pipes, not on the GIL).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from benchmark.evaluation.pipeline import evaluate
from benchmark.evaluation.result import EvaluationResult
from benchmark.evaluation.sandbox import Limits


@dataclass(frozen=True)
class EvaluationRequest:
    """Everything `evaluate()` takes, as one picklable value (Ray ships it to a worker as is)."""

    kernel_source: str
    reference_source: str
    platform: str = "trn1"
    backend: str = "simulator"
    peak_counts: Mapping[str, float] | Sequence[float] | None = None
    seeds: Sequence[int] | None = None
    kernel_name: str | None = None
    limits: Limits = field(default_factory=Limits)
    tolerance: float | None = None
    distributions: Sequence[str] | None = None

    def run(self) -> EvaluationResult:
        return evaluate(
            self.kernel_source, self.reference_source, platform=self.platform, backend=self.backend,
            peak_counts=self.peak_counts, seeds=self.seeds, kernel_name=self.kernel_name, limits=self.limits,
            tolerance=self.tolerance, distributions=self.distributions,
        )


class Executor:
    """submit() returns a Future of an EvaluationResult; the future never fails for a kernel's sake."""

    def submit(self, request: EvaluationRequest) -> Future[EvaluationResult]:
        raise NotImplementedError

    def map(self, requests: Iterable[EvaluationRequest]) -> Iterator[EvaluationResult]:
        """Results in request order."""
        futures = [self.submit(r) for r in requests]
        for future in futures:
            yield future.result()

    def shutdown(self, wait: bool = True) -> None:
        raise NotImplementedError

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


class LocalExecutor(Executor):
    def __init__(self, max_workers: int = 2) -> None:
        if max_workers < 1:
            raise ValueError(f"LocalExecutor needs at least 1 worker, got {max_workers}")
        self.max_workers = max_workers
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="accelopt-eval")

    def submit(self, request: EvaluationRequest) -> Future[EvaluationResult]:
        return self._pool.submit(request.run)

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
