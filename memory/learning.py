"""Keeping the memory clean as runs learn: strengthen a repeated lesson, merge near-duplicates, undo merges.

* `learn` is how a run files a lesson. The same lesson (`lessons.lesson_digest`: normalised text, polarity,
  language) already held adds one `MemoryEvidence` row to that entry (its evidence count, speedup range,
  problems and source pairs grow) instead of a copy. A new lesson becomes an entry; if it reads almost like
  an entry already held (`lessons.similarity` >= AUTO_MERGE_SIMILARITY, same polarity and language) it is
  merged into that one at once, and if it is only close (>= PROPOSE_SIMILARITY) a merge is proposed to
  curators on the memory page.
* `merge_entries` / `unmerge_entry`: a merged entry keeps its row, status `merged` and `merged_into`; its
  evidence counts for the entry it went into. Undoing moves its evidence back and restores the status its
  version history says it had (MemoryEntryVersion records both sides of every merge and undo).
* `accept_proposal` / `reject_proposal`: the curators' decision on a proposed merge.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Min, QuerySet
from django.utils import timezone

from benchmark.provenance import audience_owner
from engine.memory import lessons
from memory.models import (
    ChangeKind,
    EntryStatus,
    MemoryEntry,
    MemoryEvidence,
    MergeProposal,
    ProposalStatus,
    SourceKind,
)
from memory.services import (
    _record_version,
    add_entry,
    content_sha256,
    learned_where_visible,
    same_audience_entries,
    visible_entries,
)

# Entries a new lesson is compared with: what the Planner may be shown.
_COMPARABLE = (EntryStatus.ACTIVE, EntryStatus.PINNED)


@dataclass(frozen=True)
class Learned:
    """What `learn` did: `entry` holds the lesson now; `action` is "created", "strengthened", "merged"
    (created, then merged into a near-duplicate: `entry` is the one it went into) or "repeat" (this source
    pair was filed before: nothing changed); `proposal` when a merge was proposed to curators."""

    entry: MemoryEntry
    action: str
    proposal: MergeProposal | None = None


def _language(entry_or_problem: Any) -> str:
    # The language field comes with the Triton platforms (issue 24); before it every entry is NKI.
    return str(getattr(entry_or_problem, "language", "") or "")


def _digest(entry: MemoryEntry) -> str:
    slug = entry.problem.slug if entry.problem_id and entry.problem else ""
    return lessons.lesson_digest(entry.title, entry.summary, polarity=entry.polarity, language=_language(entry),
                                 problem_slug=slug)


def _text(entry: MemoryEntry) -> str:
    slug = entry.problem.slug if entry.problem_id and entry.problem else ""
    return lessons.lesson_text(entry.title, entry.summary, problem_slug=slug)


def _holder(entry: MemoryEntry) -> MemoryEntry:
    """The entry a lesson counts for now: `entry`, or the one it was merged into (followed to the end)."""
    seen = {entry.pk}
    while entry.status == EntryStatus.MERGED and entry.merged_into_id and entry.merged_into_id not in seen:
        seen.add(entry.merged_into_id)
        entry = MemoryEntry.objects.get(pk=entry.merged_into_id)
    return entry


def _own_evidence(entry: MemoryEntry) -> None:
    """An entry written before evidence existed, or by a person, gets the row for its own pair first."""
    if not MemoryEvidence.objects.filter(original_entry=entry).exists():
        MemoryEvidence.objects.create(
            entry=entry, original_entry=entry, speedup=entry.speedup, problem_id=entry.problem_id,
            source_kind=entry.source_kind, source_run_id=entry.source_run_id,
            source_candidate_id=entry.source_candidate_id, source_key=entry.source_key,
            content_sha256=entry.content_sha256,
        )


def _recount(entry: MemoryEntry, known_problems: Iterable[str] = ()) -> None:
    """Count the entry's evidence, and make its title and family name every problem that evidence comes from
    (`known_problems`: slugs its title may still name that the evidence no longer has, after an undone merge)."""
    entry.evidence_count = max(1, entry.evidence.count())
    slugs, families = _evidence_problems(entry)
    entry.title = lessons.title_for_problems(entry.title, slugs, known_problems)
    if families:
        entry.family = lessons.family_text(families)
    entry.save(update_fields=["evidence_count", "title", "family", "updated_at"])


def _evidence_problems(entry: MemoryEntry) -> tuple[list[str], list[str]]:
    """The slugs and families of the problems the entry's evidence comes from, its own problem first (none
    for an entry a person wrote without a problem: its family is left as they wrote it)."""
    slugs: list[str] = []
    families: list[str] = []
    problems = [entry.problem] if entry.problem_id and entry.problem else []
    problems += [row.problem for row in entry.evidence.select_related("problem").order_by("created_at", "id")
                 if row.problem_id and row.problem]
    for problem in problems:
        if problem.slug not in slugs:
            slugs.append(problem.slug)
        if problem.family:
            families.append(problem.family)
    return slugs, families


def learn(
    *,
    title: str,
    summary: str,
    slow_kernel: str,
    fast_kernel: str,
    speedup: float,
    polarity: str,
    problem: Any = None,
    family: str = "",
    source_run_id: int | None = None,
    source_candidate_id: int | None = None,
    candidate_key: str = "",
    iteration: int | None = None,
    source_key: str = "",
    source_label: str = "",
    bottleneck: str = "",
) -> Learned:
    """File a lesson a run learned (see the module docstring). Idempotent per `source_key`."""
    if source_key:
        filed = MemoryEvidence.objects.filter(source_key=source_key).select_related("entry").first()
        if filed is not None:
            return Learned(filed.entry, "repeat")
        entry = MemoryEntry.objects.filter(source_key=source_key).first()
        if entry is not None:
            return Learned(_holder(entry), "repeat")
    slug = getattr(problem, "slug", "") or ""
    digest = lessons.lesson_digest(title.strip().strip("*").strip(), summary.strip(), polarity=polarity,
                                   language=_language(problem), problem_slug=slug)
    evidence = {"speedup": float(speedup), "problem": problem, "source_kind": SourceKind.RUN,
                "source_run_id": source_run_id, "source_candidate_id": source_candidate_id,
                "candidate_key": candidate_key[:100], "iteration": iteration, "source_key": source_key[:200],
                "content_sha256": _pair_sha(slow_kernel, fast_kernel)}
    with transaction.atomic():
        same = (same_audience_entries(audience_owner(source_run_id), run_id=source_run_id).filter(lesson_digest=digest)
                .order_by("id").first())
        if same is not None:
            holder = _holder(same)
            _own_evidence(holder)
            try:
                with transaction.atomic():
                    MemoryEvidence.objects.create(entry=holder, original_entry=holder, **evidence)
            except IntegrityError:  # a concurrent writer filed this source key first
                return Learned(holder, "repeat")
            _recount(holder)
            _record_version(holder, ChangeKind.STRENGTHENED)
            return Learned(holder, "strengthened")
        entry = add_entry(
            title=title, summary=summary, slow_kernel=slow_kernel, fast_kernel=fast_kernel, speedup=speedup,
            polarity=polarity, problem=problem, family=family, source_kind=SourceKind.RUN,
            source_run_id=source_run_id, source_candidate_id=source_candidate_id, source_key=source_key,
            source_label=source_label,
        )
        operations = sorted(lessons.kernel_operations(slow_kernel) | lessons.kernel_operations(fast_kernel))
        MemoryEntry.objects.filter(pk=entry.pk).update(lesson_digest=digest, operations=operations,
                                                       bottleneck=bottleneck[:16])
        entry.refresh_from_db()
        MemoryEvidence.objects.create(entry=entry, original_entry=entry, **evidence)
        return _place_near_duplicate(entry)


def _pair_sha(slow_kernel: str, fast_kernel: str) -> str:
    return content_sha256(slow_kernel, fast_kernel)


def near_duplicates(entry: MemoryEntry) -> QuerySet[MemoryEntry]:
    """Entries `entry` may duplicate: same polarity and language, shown to the Planner, not itself, and seen by the
    same people (same_audience_entries: a merge moves evidence and renames the kept entry)."""
    others = (same_audience_entries(audience_owner(entry.source_run_id), run_id=entry.source_run_id)
              .filter(polarity=entry.polarity, status__in=_COMPARABLE).exclude(pk=entry.pk))
    if hasattr(MemoryEntry, "language"):
        others = others.filter(language=_language(entry))
    return others.select_related("problem")


def _place_near_duplicate(entry: MemoryEntry) -> Learned:
    text = _text(entry)
    best = lessons.most_similar(text, ((other, _text(other)) for other in near_duplicates(entry).order_by("id")))
    if best is None or best[1] < lessons.PROPOSE_SIMILARITY:
        return Learned(entry, "created")
    other, score = best
    assert isinstance(other, MemoryEntry)
    if score >= lessons.AUTO_MERGE_SIMILARITY:
        return Learned(merge_entries(other, entry), "merged")
    proposal, _ = MergeProposal.objects.get_or_create(entry=other, duplicate=entry, defaults={"similarity": score})
    return Learned(entry, "created", proposal)


def merge_entries(keep: MemoryEntry, duplicate: MemoryEntry, user: Any = None) -> MemoryEntry:
    """Merge `duplicate` into `keep`: its evidence counts for `keep`, it leaves the Planner's view (status
    merged). Both sides record a version; `unmerge_entry(duplicate)` undoes it."""
    if keep.pk == duplicate.pk:
        raise ValueError("merge_entries: an entry cannot be merged into itself")
    with transaction.atomic():
        keep = MemoryEntry.objects.select_for_update().get(pk=_holder(keep).pk)
        duplicate = MemoryEntry.objects.select_for_update().get(pk=duplicate.pk)
        if duplicate.status == EntryStatus.MERGED:
            raise ValueError(f"merge_entries: entry {duplicate.pk} is already merged into {duplicate.merged_into_id}")
        if keep.pk == duplicate.pk:
            raise ValueError("merge_entries: that entry was merged into this one already")
        _own_evidence(keep)
        _own_evidence(duplicate)
        MemoryEvidence.objects.filter(entry=duplicate).update(entry=keep)
        duplicate.status, duplicate.merged_into = EntryStatus.MERGED, keep
        duplicate.evidence_count = 1
        duplicate.save(update_fields=["status", "merged_into", "evidence_count", "updated_at"])
        _recount(keep)
        _record_version(duplicate, ChangeKind.MERGED, user)
        _record_version(keep, ChangeKind.ABSORBED, user)
        MergeProposal.objects.filter(entry=keep, duplicate=duplicate, status=ProposalStatus.OPEN).update(
            status=ProposalStatus.ACCEPTED, decided_by=_user(user), decided_at=timezone.now())
    return keep


def unmerge_entry(duplicate: MemoryEntry, user: Any = None) -> MemoryEntry:
    """Undo the merge of `duplicate`: its evidence (and that of entries merged into it) comes back, and it
    gets the status it had before the merge (from its version history)."""
    with transaction.atomic():
        duplicate = MemoryEntry.objects.select_for_update().get(pk=duplicate.pk)
        if duplicate.status != EntryStatus.MERGED or duplicate.merged_into_id is None:
            raise ValueError(f"unmerge_entry: entry {duplicate.pk} is not merged into another entry")
        keep = MemoryEntry.objects.select_for_update().get(pk=duplicate.merged_into_id)
        mine = [duplicate.pk, *duplicate.merged_entries.values_list("pk", flat=True)]
        named_before, _ = _evidence_problems(keep)  # keep's title may name problems that now leave with it
        MemoryEvidence.objects.filter(entry=keep, original_entry_id__in=mine).update(entry=duplicate)
        before = duplicate.versions.exclude(change=ChangeKind.MERGED).order_by("-number").first()
        status = before.status if before is not None and before.status != EntryStatus.MERGED else EntryStatus.ACTIVE
        duplicate.status, duplicate.merged_into = status, None
        duplicate.save(update_fields=["status", "merged_into", "updated_at"])
        _recount(duplicate, named_before)
        _recount(keep, named_before)
        _record_version(duplicate, ChangeKind.UNMERGED, user)
        _record_version(keep, ChangeKind.UNMERGED, user)
        # A curator undid it: the pair is not proposed again.
        MergeProposal.objects.update_or_create(
            entry=keep, duplicate=duplicate,
            defaults={"status": ProposalStatus.REJECTED, "decided_by": _user(user), "decided_at": timezone.now(),
                      "similarity": lessons.similarity(_text(keep), _text(duplicate))},
        )
    return duplicate


def accept_proposal(proposal: MergeProposal, user: Any = None) -> MemoryEntry:
    if proposal.status != ProposalStatus.OPEN:
        raise ValueError(f"proposal {proposal.pk} was already decided ({proposal.status})")
    return merge_entries(proposal.entry, proposal.duplicate, user)


def reject_proposal(proposal: MergeProposal, user: Any = None) -> MergeProposal:
    if proposal.status != ProposalStatus.OPEN:
        raise ValueError(f"proposal {proposal.pk} was already decided ({proposal.status})")
    proposal.status, proposal.decided_by, proposal.decided_at = ProposalStatus.REJECTED, _user(user), timezone.now()
    proposal.save(update_fields=["status", "decided_by", "decided_at"])
    return proposal


def get_proposal_for_user(user: Any, pk: int) -> MergeProposal | None:
    """The merge proposal if `user` may read both its entries (visible_entries), else None: a curator who may not
    see a private run's lessons may not merge them either, not even by id."""
    visible = visible_entries(user).values("pk")
    return (MergeProposal.objects.select_related("entry", "duplicate")
            .filter(pk=pk, entry__in=visible, duplicate__in=visible).first())


def open_proposals() -> QuerySet[MergeProposal]:
    """Proposed merges still waiting for a curator, both entries still shown to the Planner."""
    return (MergeProposal.objects.filter(status=ProposalStatus.OPEN, entry__status__in=_COMPARABLE,
                                         duplicate__status__in=_COMPARABLE)
            .select_related("entry", "duplicate"))


@dataclass(frozen=True)
class EvidenceSummary:
    count: int
    speedup_min: float | None
    speedup_max: float | None
    problems: list[str]
    pairs: list[MemoryEvidence]


def evidence_summary(entry: MemoryEntry, user: Any = None) -> EvidenceSummary:
    """What an entry's page shows: how often the lesson was learned, its speedup range, the problems it
    held on and every source pair; with `user`, only the pairs learned where they may look
    (learned_where_visible: another person's private run adds nothing they can see)."""
    rows = entry.evidence.select_related("problem").order_by("created_at", "id")
    if user is not None:
        rows = learned_where_visible(rows, user)
    stats = rows.aggregate(n=Count("id"), low=Min("speedup"), high=Max("speedup"))
    problems = sorted({row.problem.slug for row in rows if row.problem_id and row.problem})
    if not stats["n"]:
        own = [entry.problem.slug] if entry.problem_id and entry.problem else []
        return EvidenceSummary(1, entry.speedup, entry.speedup, own, [])
    return EvidenceSummary(stats["n"], stats["low"], stats["high"], problems, list(rows))


def _user(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None
