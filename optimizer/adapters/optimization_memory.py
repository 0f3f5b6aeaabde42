"""`DjangoOptimizationMemory`: the search's OptimizationMemory for one run, over the memory app.

`select` depends on the run's `memory_mode` (SearchConfig): "curated" is `memory.services.select_entries`
(the rule in `engine.memory.selection`, ranked for the kernel at hand: its operations and its profile's
bottleneck); "accelopt" is `engine.memory.selection.select_accelopt` over the lessons this run learned (the paper's
per-problem memory). `add` is `memory.learning.learn`: idempotent on the item's key, a repeated lesson
strengthens the entry it repeats, with the run and the candidate as provenance.
"""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import sync_to_async

from engine.agents.base import KernelView, MemoryItem, ProblemContext
from engine.memory.lessons import kernel_operations, profile_bottleneck
from engine.memory.selection import select_accelopt
from engine.search.config import ACCELOPT_MEMORY, CURATED
from memory import learning
from memory import services as memory_services
from memory.models import EntryStatus, MemoryEntry, MemoryEvidence
from optimizer.models import Candidate, Run


class DjangoOptimizationMemory:
    def __init__(self, run: Run) -> None:
        self.run_id = run.pk
        self.problem = run.problem
        search = (run.config or {}).get("search", {})
        self.mode = str(search.get("memory_mode") or CURATED)
        self.seed = int(search.get("seed") or 0)
        # The Planner's prompt is in the run's transcript, seen by whoever sees the run: a private run's by its
        # owner (and admins), a public one's by everyone. Its memory is what that audience may read.
        self.audience = None if run.is_public else run.owner_id

    async def select(
        self, problem: ProblemContext, k: int, *, kernel: KernelView | None = None
    ) -> Sequence[MemoryItem]:
        return await sync_to_async(self._select)(k, kernel)

    def _select(self, k: int, kernel: KernelView | None = None) -> list[MemoryItem]:
        if self.mode == ACCELOPT_MEMORY:
            return [_item(entry) for entry in self._accelopt(k)]
        entries = memory_services.select_entries(
            problem=self.problem, family=self.problem.family, limit=k,
            operations=kernel_operations(kernel.source) if kernel else (),
            bottleneck=profile_bottleneck(kernel.profile) if kernel else "",
            among=memory_services.shared_entries(self.audience, run_id=self.run_id),
        )
        return [_item(entry) for entry in entries]

    def _accelopt(self, k: int) -> list[MemoryEntry]:
        """The lessons this run learned, each at the latest iteration it was learned in; pruned ones left out."""
        latest: dict[int, int] = {}
        for entry_id, iteration in MemoryEvidence.objects.filter(source_run_id=self.run_id).values_list(
            "entry_id", "iteration"
        ):
            latest[entry_id] = max(latest.get(entry_id, 0), iteration or 0)
        entries = (memory_services.shared_entries(self.audience, run_id=self.run_id).select_related("problem")
                   .exclude(status=EntryStatus.PRUNED).in_bulk(list(latest)))
        learned = [(latest[pk], entries[pk]) for pk in sorted(latest) if pk in entries]
        return select_accelopt(learned, limit=k, seed=self.seed)

    async def add(self, item: MemoryItem) -> None:
        await sync_to_async(self._add)(item)

    def _add(self, item: MemoryItem) -> None:
        candidate_key = str(item.provenance.get("candidate", ""))
        candidate_id = (
            Candidate.objects.filter(iteration__run_id=self.run_id, key=candidate_key)
            .values_list("pk", flat=True)
            .first()
        )
        iteration = item.provenance.get("iteration")
        learning.learn(
            title=item.title,
            summary=item.summary,
            slow_kernel=item.slow_kernel,
            fast_kernel=item.fast_kernel,
            speedup=item.speedup,
            polarity=item.polarity,
            problem=self.problem,
            family=item.family,
            source_run_id=self.run_id,
            source_candidate_id=candidate_id,
            candidate_key=candidate_key,
            iteration=iteration if isinstance(iteration, int) else None,
            source_key=item.key,
            source_label=f"run {self.run_id}, candidate {candidate_key}",
            bottleneck=item.bottleneck,
        )


def _item(entry: MemoryEntry) -> MemoryItem:
    return MemoryItem(
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
        operations=tuple(entry.operations or ()),
        bottleneck=entry.bottleneck,
        evidence=entry.evidence_count,
    )
