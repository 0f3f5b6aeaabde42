"""`DjangoOptimizationMemory`: the search's OptimizationMemory for one run, over the memory app.

`select` is `memory.services.select_entries` (the rule in `memory.selection`) with each entry shown as a
`MemoryItem`; `add` is `memory.services.add_entry`, idempotent on the item's key, with the run and the
candidate as provenance.
"""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import sync_to_async

from memory import services as memory_services
from memory.models import EntryStatus, SourceKind
from optimizer.agents.base import KernelView, MemoryItem, ProblemContext
from optimizer.models import Candidate, Run


class DjangoOptimizationMemory:
    def __init__(self, run: Run) -> None:
        self.run_id = run.pk
        self.problem = run.problem

    async def select(
        self, problem: ProblemContext, k: int, *, kernel: KernelView | None = None
    ) -> Sequence[MemoryItem]:
        return await sync_to_async(self._select)(k)

    def _select(self, k: int) -> list[MemoryItem]:
        entries = memory_services.select_entries(problem=self.problem, family=self.problem.family, limit=k)
        return [
            MemoryItem(
                key=entry.source_key or f"memory:{entry.pk}",
                title=entry.title,
                summary=entry.summary,
                polarity=entry.polarity,
                speedup=entry.speedup,
                slow_kernel=entry.slow_kernel,
                fast_kernel=entry.fast_kernel,
                problem=entry.problem.slug if entry.problem_id else "",
                family=entry.family,
                provenance={"entry": entry.pk, "source": entry.source_kind, "label": entry.source_label},
                pinned=entry.status == EntryStatus.PINNED,
            )
            for entry in entries
        ]

    async def add(self, item: MemoryItem) -> None:
        await sync_to_async(self._add)(item)

    def _add(self, item: MemoryItem) -> None:
        candidate_key = str(item.provenance.get("candidate", ""))
        candidate_id = (
            Candidate.objects.filter(iteration__run_id=self.run_id, key=candidate_key)
            .values_list("pk", flat=True)
            .first()
        )
        memory_services.add_entry(
            title=item.title,
            summary=item.summary,
            slow_kernel=item.slow_kernel,
            fast_kernel=item.fast_kernel,
            speedup=item.speedup,
            polarity=item.polarity,
            problem=self.problem,
            family=item.family,
            source_kind=SourceKind.RUN,
            source_run_id=self.run_id,
            source_candidate_id=candidate_id,
            source_key=item.key,
            source_label=f"run {self.run_id}, candidate {candidate_key}",
        )
