"""Implementations of the search's interfaces without Django: for tests and for the offline measurement
(measurements/offline_search_mini.py), which run the search with no database.

    PipelineEvaluator        Evaluator over `benchmark.evaluation` (the sandboxed pipeline, no database)
    ListEventSink            EventSink that keeps the events in a list, as a JSON column would hold them
    InMemoryCheckpoint       CheckpointStore in a variable; JsonFileCheckpoint in one file
    ListOptimizationMemory   OptimizationMemory over a list, selecting as the memory app does
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory.selection import select_for_planner
from optimizer.agents.base import MemoryItem, ProblemContext
from optimizer.search.interfaces import EvaluationLike


class PipelineEvaluator:
    """`Evaluator` over `benchmark.evaluation`: each source is one `EvaluationRequest` on an executor (the
    local process pool by default), all submitted at once and awaited together. Pass fixed `seeds` for a
    reproducible run (the same inputs for every candidate)."""

    def __init__(self, reference_source: str, *, platform: str = "trn1", backend: str = "simulator",
                 peak_counts: dict[str, float] | None = None, seeds: Sequence[int] | None = None,
                 kernel_name: str | None = None, executor: Any = None) -> None:
        from benchmark.evaluation import LocalExecutor

        self.reference_source = reference_source
        self.options = {"platform": platform, "backend": backend, "peak_counts": peak_counts,
                        "seeds": tuple(seeds) if seeds is not None else None, "kernel_name": kernel_name}
        self.executor = executor or LocalExecutor()

    async def evaluate_many(self, sources: Sequence[str]) -> Sequence[EvaluationLike]:
        from benchmark.evaluation import EvaluationRequest

        futures = [self.executor.submit(EvaluationRequest(kernel_source=s, reference_source=self.reference_source,
                                                          **self.options)) for s in sources]
        return await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))


class ListEventSink:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, kind: str, payload: dict[str, Any]) -> None:
        self.events.append((kind, json.loads(json.dumps(payload))))  # what a JSON column would hold

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]


class InMemoryCheckpoint:
    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self.state = state
        self.saves = 0

    async def load(self) -> dict[str, Any] | None:
        return None if self.state is None else json.loads(json.dumps(self.state))

    async def save(self, state: dict[str, Any]) -> None:
        self.state = json.loads(json.dumps(state))  # proves the state is JSON-ready
        self.saves += 1


class JsonFileCheckpoint:
    """The state in one JSON file, replaced atomically (a crash leaves the old or the new file)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    async def load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        return json.loads(self.path.read_text(encoding="utf-8"))

    async def save(self, state: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f)
        os.replace(tmp, self.path)


class ListOptimizationMemory:
    """The optimization memory without a database, selected by the same rule as the memory app's
    (`memory.selection.select_for_planner`), the items in the order they were added standing for their
    age. Adding an existing key replaces nothing (idempotent)."""

    def __init__(self, items: Sequence[MemoryItem] = ()) -> None:
        self.items: list[MemoryItem] = list(items)

    async def select(self, problem: ProblemContext, k: int) -> Sequence[MemoryItem]:
        return select_for_planner(reversed(self.items), limit=k, problem=problem.slug, family=problem.family)

    async def add(self, item: MemoryItem) -> None:
        if all(existing.key != item.key for existing in self.items):
            self.items.append(item)
