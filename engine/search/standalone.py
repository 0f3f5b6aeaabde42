"""Implementations of the search's interfaces without Django: for tests and for the offline measurement
(measurements/offline_search_mini.py), which run the search with no database.

    PipelineEvaluator        Evaluator over `engine.evaluator` (the sandboxed pipeline, no database)
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
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.agents.base import KernelView, MemoryItem, ProblemContext
from engine.memory.lessons import kernel_operations, lesson_digest, profile_bottleneck
from engine.memory.selection import select_accelopt, select_for_planner
from engine.search.interfaces import EvaluationLike


class PipelineEvaluator:
    """`Evaluator` over `engine.evaluator`: each source is one `EvaluationRequest` on an executor (the
    local process pool by default), all submitted at once and awaited together. Pass fixed `seeds` for a
    reproducible run (the same inputs for every candidate)."""

    def __init__(self, reference_source: str, *, platform: str = "trn1", backend: str = "simulator",
                 peak_counts: dict[str, float] | None = None, seeds: Sequence[int] | None = None,
                 kernel_name: str | None = None, executor: Any = None) -> None:
        # lazy: the executor loads numpy and the sandbox; the search core needs neither
        from engine.evaluator import LocalExecutor

        self.reference_source = reference_source
        self.options = {"platform": platform, "backend": backend, "peak_counts": peak_counts,
                        "seeds": tuple(seeds) if seeds is not None else None, "kernel_name": kernel_name}
        self.executor = executor or LocalExecutor()

    async def evaluate_many(self, sources: Sequence[str]) -> Sequence[EvaluationLike]:
        # lazy: the executor loads numpy and the sandbox; the search core needs neither
        from engine.evaluator import EvaluationRequest

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
    """The optimization memory without a database, selected by the same rules as the memory app's
    (`engine.memory.selection`), the items in the order they were added standing for their age.

    Adding an existing key changes nothing (idempotent); adding the same lesson again (`lessons.lesson_digest`)
    strengthens the item already held (evidence + 1) instead of adding a copy, as the memory app does.
    `mode="accelopt"` selects as the paper's scripts do (`selection.select_accelopt`, seeded by `seed`)."""

    def __init__(self, items: Sequence[MemoryItem] = (), *, mode: str = "curated", seed: int = 0) -> None:
        self.items: list[MemoryItem] = list(items)
        self.mode, self.seed = mode, seed
        self.learned: list[tuple[int, MemoryItem]] = []  # (iteration, item) of every add, repeats included

    async def select(
        self, problem: ProblemContext, k: int, *, kernel: KernelView | None = None
    ) -> Sequence[MemoryItem]:
        if self.mode == "accelopt":
            return select_accelopt(self.learned, limit=k, seed=self.seed)
        return select_for_planner(
            reversed(self.items), limit=k, problem=problem.slug, family=problem.family,
            operations=kernel_operations(kernel.source) if kernel else (),
            bottleneck=profile_bottleneck(kernel.profile) if kernel else "",
        )

    async def add(self, item: MemoryItem) -> None:
        if any(existing.key == item.key for existing in self.items):
            return
        iteration = item.provenance.get("iteration", 0)
        self.learned.append((iteration if isinstance(iteration, int) else 0, item))
        digest = _digest(item)
        for index, existing in enumerate(self.items):
            if _digest(existing) == digest:
                self.items[index] = replace(existing, evidence=existing.evidence + item.evidence)
                return
        operations = tuple(sorted(kernel_operations(item.slow_kernel) | kernel_operations(item.fast_kernel)))
        self.items.append(replace(item, operations=item.operations or operations))


def _digest(item: MemoryItem) -> str:
    return lesson_digest(item.title, item.summary, polarity=item.polarity, problem_slug=item.problem)
