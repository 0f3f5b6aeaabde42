"""What the beam search is given, as protocols. Pure Python: no Django.

All methods are async, so a Django layer can wrap its ORM with `sync_to_async`:

* `Agents` (planner, executor, fixer, summarizer; see `engine.agents.base` for the request records),
* `Evaluator.evaluate_many(sources) -> results` bound to the run's problem, platform and backend; each
  result has `correct`, `latency_ms`, `peak_fraction`, `error_kind`, `error_message`, `profile` (the shape
  of `engine.evaluator.EvaluationResult`); an `error_kind` of "suspicious" keeps a kernel out of the
  beam and out of the optimization memory whatever its latency, an optional `review_accepted` (a
  curator accepted the result) exempts it from the `suspicious_speedup` bound, and an optional
  `cascade_stage` (`engine.search.cascade.STAGES`) says it was answered from the cache or by the mini stage,
  which the search counts in its totals,
* `OptimizationMemory.select(problem, k)` (the bounded Planner context, chosen by
  `engine.memory.selection.select_for_planner`) and `OptimizationMemory.add(item)`, which must be idempotent on
  `item.key` (a step interrupted after `add` is redone on resume),
* `EventSink.emit(kind, payload)` with kinds in `EVENT_KINDS`; `agent.call` carries a `CallRecord` dict
  for the `AgentCall` table, and `llm.error` is emitted for each failed call,
* `CheckpointStore.load() / save(state_dict)`: the search saves the whole `RunState` (a JSON-ready dict)
  after every step.

`optimizer.adapters` implements them over Django; `engine.search.standalone` without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from engine.agents.base import (
    AgentResult,
    FixRequest,
    KernelView,
    MemoryDraft,
    MemoryItem,
    PlanRequest,
    ProblemContext,
    SummaryRequest,
    WriteRequest,
)

EVENT_KINDS = (
    "run.started",
    "iteration.started",
    "plan.proposed",
    "candidate.written",
    "candidate.evaluated",
    "beam.selected",
    "memory.added",
    "iteration.finished",
    "run.finished",
    "run.failed",
    "run.stopped",
    "llm.error",
    "agent.call",
    "agent.unusable",
)


@runtime_checkable
class EvaluationLike(Protocol):
    correct: bool
    latency_ms: float | None
    peak_fraction: float | None
    error_kind: str | None
    error_message: str | None
    profile: Any


class Evaluator(Protocol):
    async def evaluate_many(self, sources: Sequence[str]) -> Sequence[EvaluationLike]:
        """Evaluate every source (concurrently if it can); one result per source, in order."""
        ...


class Agents(Protocol):
    label: str  # shown in the UI: e.g. "offline: search over known rewrites" or "llm: <models>"

    async def plan(self, request: PlanRequest) -> AgentResult[list[str]]: ...

    async def write(self, request: WriteRequest) -> AgentResult[str]: ...

    async def fix(self, request: FixRequest) -> AgentResult[str]: ...

    async def summarize(self, request: SummaryRequest) -> AgentResult[MemoryDraft]: ...


class OptimizationMemory(Protocol):
    """The store of lessons (slow -> fast rewrites) the Planner learns from: the memory app's entries."""

    async def select(
        self, problem: ProblemContext, k: int, *, kernel: KernelView | None = None
    ) -> Sequence[MemoryItem]:
        """At most `k` entries (pinned ones aside) for the Planner, ranked for `kernel` when given."""
        ...

    async def add(self, item: MemoryItem) -> None:
        """Store `item`; adding a key that is already stored must not create a second entry."""
        ...


class EventSink(Protocol):
    async def emit(self, kind: str, payload: dict[str, Any]) -> None: ...


class CheckpointStore(Protocol):
    async def load(self) -> dict[str, Any] | None: ...

    async def save(self, state: dict[str, Any]) -> None: ...
