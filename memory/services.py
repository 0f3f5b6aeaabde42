"""Everything done to the optimization memory: add, select for the Planner, curate, import and export.

Web pages, the API, management commands and the run worker all call these functions; each change to an
entry records a MemoryEntryVersion saying who changed what, so curation can be audited and undone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, models, transaction
from django.db.models import Q, QuerySet
from django.http import Http404

from accounts.roles import is_curator, is_engineer
from benchmark.models import Visibility
from benchmark.provenance import hidden_from_audience, hidden_run_ids, private_runs_of
from benchmark.services.access import visible_problems
from engine.memory.lessons import FAMILY_SEPARATOR, split_families
from engine.memory.selection import select_for_planner
from engine.platforms.registry import NKI
from memory.models import ChangeKind, EntryStatus, MemoryEntry, MemoryEntryVersion, Polarity, SourceKind

# AccelOpt's summarizer writes this title when it found nothing worth remembering.
ACCELOPT_NOTHING_FOUND_TITLE = "No optimization found"
TITLE_MAX_LENGTH = MemoryEntry._meta.get_field("title").max_length


class MemoryImportError(ValueError):
    """An experience file that cannot be read as AccelOpt's JSON list of rewrites."""


# --- access -------------------------------------------------------------------------------------------
#
# Engineers read the memory their runs learn from; curators change it. Anonymous visitors see none of it.
# A lesson is as private as where it was learned: one from a private run carries that run's kernels (their
# source) and says what it found, so only whoever may see the run reads it (its owner and admins; curators
# too see none of it: the review queue is the one place they see someone's private work). The same holds for
# each piece of evidence, and for a lesson on a private problem. Every reader below goes through this.


def can_read_memory(user: Any) -> bool:
    return is_engineer(user)


def can_curate_memory(user: Any) -> bool:
    return is_curator(user)


def learned_where_visible(rows: QuerySet[Any], user: Any) -> QuerySet[Any]:
    """`rows` (entries or evidence: both have source_run_id and problem) narrowed to those learned where `user`
    may look: from no run or a run they may see, on no problem or one they may see."""
    return rows.exclude(source_run_id__in=hidden_run_ids(user)).filter(
        Q(problem__isnull=True) | Q(problem__in=visible_problems(user)))


def visible_entries(user: Any) -> QuerySet[MemoryEntry]:
    if not can_read_memory(user):
        return MemoryEntry.objects.none()
    return learned_where_visible(MemoryEntry.objects.select_related("problem", "created_by"), user)


def _audience_problems(owner: Any) -> Q:
    public = Q(problem__isnull=True) | Q(problem__visibility=Visibility.PUBLIC)
    return public | Q(problem__owner=owner) if owner is not None else public


def shared_entries(owner: Any = None, *, run_id: int | None = None) -> QuerySet[MemoryEntry]:
    """The entries that may be shown where `owner`'s private work is seen (None: where everyone looks), such as
    the Planner's prompt of run `run_id`, which its transcript shows to whoever may see that run: none learned from
    someone else's private run or on someone else's private problem, but every one that run learned itself.
    Admins get no pass here."""
    hidden = Q(source_run_id__in=hidden_from_audience(owner))
    problems = _audience_problems(owner)
    if run_id is not None:
        hidden &= ~Q(source_run_id=run_id)
        problems |= Q(source_run_id=run_id)
    return MemoryEntry.objects.exclude(hidden).filter(problems)


def same_audience_entries(owner: Any = None, *, run_id: int | None = None) -> QuerySet[MemoryEntry]:
    """The entries a lesson learned by run `run_id` where `owner`'s private work is seen (None: in public) may
    strengthen or be merged into: those with exactly that audience, the run's own among them. A private lesson
    counted in a public entry would show in its evidence count, speedups and title; a public one counted in a
    private entry would vanish from everyone else."""
    if owner is None:
        return shared_entries(None, run_id=run_id)
    same = Q(source_run_id__in=private_runs_of(owner)) & _audience_problems(owner)
    return MemoryEntry.objects.filter(same | Q(source_run_id=run_id) if run_id is not None else same)


def get_entry_for_user(user: Any, pk: int, *, write: bool = False) -> MemoryEntry:
    """The entry if `user` may read it (404 otherwise) and, with write=True, curate it (403 otherwise)."""
    try:
        entry = visible_entries(user).get(pk=pk)
    except MemoryEntry.DoesNotExist:
        raise Http404(f"no memory entry with id {pk}") from None
    if write and not can_curate_memory(user):
        raise PermissionDenied("only curators can change memory entries")
    return entry


def filter_entries(
    entries: QuerySet[MemoryEntry],
    *,
    text: str = "",
    family: str = "",
    polarity: str = "",
    status: str = "",
    min_speedup: float | None = None,
    max_speedup: float | None = None,
    source_run_id: int | None = None,
    problem_id: int | None = None,
    language: str = "",
) -> QuerySet[MemoryEntry]:
    """The memory browser's search (title, summary and code) and filters; blank values do not filter.
    `language`: the kernel language the entries were learned in ("nki", "triton")."""
    if text:
        entries = entries.filter(
            Q(title__icontains=text) | Q(summary__icontains=text) | Q(slow_kernel__icontains=text)
            | Q(fast_kernel__icontains=text)
        )
    if family:  # one of the families an entry learned on several problems names ("elementwise, matmul")
        sep = FAMILY_SEPARATOR
        entries = entries.filter(Q(family=family) | Q(family__startswith=f"{family}{sep}")
                                 | Q(family__endswith=f"{sep}{family}") | Q(family__contains=f"{sep}{family}{sep}"))
    if polarity:
        entries = entries.filter(polarity=polarity)
    if status:
        entries = entries.filter(status=status)
    if min_speedup is not None:
        entries = entries.filter(speedup__gte=min_speedup)
    if max_speedup is not None:
        entries = entries.filter(speedup__lte=max_speedup)
    if source_run_id is not None:
        entries = entries.filter(source_run_id=source_run_id)
    if problem_id is not None:
        entries = entries.filter(problem_id=problem_id)
    if language:
        entries = entries.filter(language=language)
    return entries


def entry_families() -> list[str]:
    """The kernel families entries are filed under, sorted, for the browser's family filter."""
    # order_by first: with the model's default ordering, distinct() counted (family, created) pairs and listed
    # a family once per entry.
    fields = MemoryEntry.objects.order_by("family").values_list("family", flat=True).distinct()
    return sorted({family for field in fields for family in split_families(field)})


# --- entries ------------------------------------------------------------------------------------------


def entry_history(entry: MemoryEntry, *, newest_first: bool = False) -> QuerySet[MemoryEntryVersion]:
    """An entry's versions with who made each change, oldest first (newest first if asked)."""
    return entry.versions.select_related("changed_by").order_by("-number" if newest_first else "number")


def content_sha256(slow_kernel: str, fast_kernel: str) -> str:
    digest = hashlib.sha256()
    digest.update(slow_kernel.encode())
    digest.update(b"\0--fast--\0")
    digest.update(fast_kernel.encode())
    return digest.hexdigest()


def _record_version(entry: MemoryEntry, change: str, user: Any = None) -> MemoryEntryVersion:
    last = entry.versions.aggregate(last=models.Max("number"))["last"] or 0
    return MemoryEntryVersion.objects.create(
        entry=entry,
        number=last + 1,
        change=change,
        title=entry.title,
        summary=entry.summary,
        status=entry.status,
        transfers=entry.transfers,
        changed_by=user if getattr(user, "is_authenticated", False) else None,
    )


def _clean_title(title: str) -> str:
    # AccelOpt titles arrive wrapped in markdown bold (**Title**).
    return title.strip().strip("*").strip()[:TITLE_MAX_LENGTH]


def add_entry(
    *,
    title: str,
    summary: str,
    slow_kernel: str,
    fast_kernel: str,
    speedup: float,
    polarity: str = Polarity.POSITIVE,
    problem: Any = None,
    family: str = "",
    source_kind: str = SourceKind.PERSON,
    source_run_id: int | None = None,
    source_candidate_id: int | None = None,
    source_key: str = "",
    source_label: str = "",
    user: Any = None,
    language: str = "",
) -> MemoryEntry:
    """Create an entry (and its first version). Idempotent per `source_key`.

    Its kernel `language` is the problem's when not given, else NKI (the memory's language before Triton).

    A run that crashed after summarizing but before checkpointing replays the summarizer step; the
    entry with that key is then returned instead of duplicated.
    """
    if speedup <= 0:
        raise ValueError(f"add_entry: speedup must be positive, got {speedup!r}")
    if polarity not in Polarity.values:
        raise ValueError(f"add_entry: polarity must be one of {Polarity.values}, got {polarity!r}")
    if source_key:
        existing = MemoryEntry.objects.filter(source_key=source_key).first()
        if existing is not None:
            return existing
    if problem is not None and not family:
        family = getattr(problem, "family", "") or ""
    language = language or getattr(problem, "language", "") or NKI
    try:
        with transaction.atomic():
            entry = MemoryEntry.objects.create(
                title=_clean_title(title) or "(untitled rewrite)",
                summary=summary.strip(),
                slow_kernel=slow_kernel,
                fast_kernel=fast_kernel,
                speedup=float(speedup),
                polarity=polarity,
                problem=problem,
                family=family,
                language=language,
                source_kind=source_kind,
                source_run_id=source_run_id,
                source_candidate_id=source_candidate_id,
                source_key=source_key[:200],
                source_label=source_label[:300],
                created_by=user if getattr(user, "is_authenticated", False) else None,
                content_sha256=content_sha256(slow_kernel, fast_kernel),
            )
            change = ChangeKind.IMPORTED if source_kind == SourceKind.IMPORT else ChangeKind.CREATED
            _record_version(entry, change, user)
    except IntegrityError:
        # Two writers raced on the same key: the other one won, hand back its entry.
        if not source_key:
            raise
        return MemoryEntry.objects.get(source_key=source_key)
    return entry


@dataclass(frozen=True)
class _Selectable:
    """An entry as `select_for_planner` reads it: the problem is its row id."""

    pk: int
    pinned: bool
    problem: int | None
    family: str
    language: str
    transfers: bool
    operations: tuple[str, ...] = ()
    bottleneck: str = ""
    evidence: int = 1


def select_entries(
    *, problem: Any = None, family: str = "", limit: int = 8, language: str = "",
    operations: Iterable[str] = (), bottleneck: str = "", among: QuerySet[MemoryEntry] | None = None,
) -> list[MemoryEntry]:
    """The bounded memory given to the Planner, chosen by `engine.memory.selection.select_for_planner`: only entries
    of the Planner's kernel language (the problem's when not given) or marked as transferring; pinned
    entries always (even past `limit`), pruned entries never, then the same problem, the same family, any.

    The free slots are ranked for the kernel at hand: the `operations` it calls and its profile's `bottleneck`
    (engine.memory.lessons), and by each entry's evidence (engine.memory.selection.score).

    `among`: the entries it may choose from (all by default): shared_entries for a run's Planner, visible_entries
    for a person.

    Only the columns the rule reads are loaded for every entry; the full rows only for the chosen ones.
    """
    language = language or getattr(problem, "language", "")
    rows = (
        (MemoryEntry.objects.all() if among is None else among).filter(status__in=[EntryStatus.ACTIVE, EntryStatus.PINNED])
        .order_by("-created_at", "-id")
        .values_list("pk", "status", "problem_id", "family", "language", "transfers", "operations", "bottleneck",
                     "evidence_count")
    )
    chosen = select_for_planner(
        (
            _Selectable(pk, status == EntryStatus.PINNED, problem_id, family, entry_language, transfers,
                        tuple(ops or ()), entry_bottleneck, evidence)
            for pk, status, problem_id, family, entry_language, transfers, ops, entry_bottleneck, evidence in rows
        ),
        limit=limit,
        problem=problem.pk if problem is not None else None,
        family=family,
        language=language,
        operations=operations,
        bottleneck=bottleneck,
    )
    entries = MemoryEntry.objects.select_related("problem").in_bulk([row.pk for row in chosen])
    # A row deleted between the two queries simply drops out.
    return [entries[row.pk] for row in chosen if row.pk in entries]


def _set_status(
    entry: MemoryEntry, status: str, change: str, user: Any, *, only_from: str | None = None
) -> MemoryEntry:
    """Move an entry to `status` (if it is in `only_from`, when given); re-read under a lock, so a stale
    instance in the caller's hands never decides what happens."""
    with transaction.atomic():
        entry = MemoryEntry.objects.select_for_update().get(pk=entry.pk)
        if entry.status == status or (only_from is not None and entry.status != only_from):
            return entry
        entry.status = status
        entry.save(update_fields=["status", "updated_at"])
        _record_version(entry, change, user)
    return entry


def pin_entry(entry: MemoryEntry, user: Any = None) -> MemoryEntry:
    return _set_status(entry, EntryStatus.PINNED, ChangeKind.PINNED, user)


def unpin_entry(entry: MemoryEntry, user: Any = None) -> MemoryEntry:
    return _set_status(entry, EntryStatus.ACTIVE, ChangeKind.UNPINNED, user, only_from=EntryStatus.PINNED)


def prune_entry(entry: MemoryEntry, user: Any = None) -> MemoryEntry:
    """Hide an entry from the Planner. Reversible with restore_entry()."""
    return _set_status(entry, EntryStatus.PRUNED, ChangeKind.PRUNED, user)


def prune_entries(entries: Iterable[MemoryEntry], user: Any = None) -> int:
    """Bulk prune; returns how many entries changed status."""
    changed = 0
    for entry in entries:
        before = entry.versions.count()
        prune_entry(entry, user)
        changed += entry.versions.count() != before
    return changed


def prune_visible_entries(user: Any, ids: Iterable[int]) -> int:
    """Bulk prune by id, as the memory browser and POST /api/memory/prune ask: the entries among `ids` that
    `user` may see (others are ignored); returns how many changed status."""
    return prune_entries(visible_entries(user).filter(pk__in=list(ids)), user)


def accept_entry(entry: MemoryEntry, user: Any = None) -> MemoryEntry:
    """A curator accepts a proposed lesson: it becomes active, so Planners may be shown it."""
    return _set_status(entry, EntryStatus.ACTIVE, ChangeKind.ACCEPTED, user, only_from=EntryStatus.PROPOSED)


def propose_entry(
    user: Any, *, title: str, summary: str, slow_kernel: str, fast_kernel: str, speedup: float,
    polarity: str = Polarity.POSITIVE, problem: Any = None, source_label: str = "",
) -> MemoryEntry:
    """An engineer's (or their agent's) lesson, filed as `proposed`: it enters the curators' review and reaches
    no Planner until a curator accepts it (accept_entry) or prunes it."""
    if not can_read_memory(user):
        raise PermissionDenied("proposing a lesson needs the engineer role")
    if not title.strip():
        raise ValueError("a lesson needs a title saying what the rewrite does")
    if not slow_kernel.strip() or not fast_kernel.strip():
        raise ValueError("a lesson needs both kernels: the slow one and the fast one")
    entry = add_entry(title=title, summary=summary, slow_kernel=slow_kernel, fast_kernel=fast_kernel, speedup=speedup,
                      polarity=polarity, problem=problem, source_label=source_label, user=user)
    return _set_status(entry, EntryStatus.PROPOSED, ChangeKind.PROPOSED, user)


def restore_entry(entry: MemoryEntry, user: Any = None) -> MemoryEntry:
    """Bring a pruned entry back as active."""
    return _set_status(entry, EntryStatus.ACTIVE, ChangeKind.RESTORED, user, only_from=EntryStatus.PRUNED)


def edit_entry(
    entry: MemoryEntry, user: Any = None, *, title: str | None = None, summary: str | None = None
) -> MemoryEntry:
    """Change the title and/or summary; a no-op edit records nothing."""
    with transaction.atomic():
        entry = MemoryEntry.objects.select_for_update().get(pk=entry.pk)
        new_title = entry.title if title is None else _clean_title(title)
        new_summary = entry.summary if summary is None else summary.strip()
        if not new_title:
            raise ValueError("edit_entry: title cannot be empty")
        if (new_title, new_summary) == (entry.title, entry.summary):
            return entry
        entry.title, entry.summary = new_title, new_summary
        entry.save(update_fields=["title", "summary", "updated_at"])
        _record_version(entry, ChangeKind.EDITED, user)
    return entry


def set_transfers(entry: MemoryEntry, transfers: bool, user: Any = None) -> MemoryEntry:
    """A curator's word on whether the lesson holds in other kernel languages (then every Planner may be
    shown it); recorded as a version. Setting what is already set records nothing."""
    with transaction.atomic():
        entry = MemoryEntry.objects.select_for_update().get(pk=entry.pk)
        if entry.transfers == bool(transfers):
            return entry
        entry.transfers = bool(transfers)
        entry.save(update_fields=["transfers", "updated_at"])
        _record_version(entry, ChangeKind.TRANSFERS if entry.transfers else ChangeKind.STAYS, user)
    return entry


def revert_entry(entry: MemoryEntry, version_number: int, user: Any = None) -> MemoryEntry:
    """Put back the title and summary an earlier version had (recorded as a new edit)."""
    version = entry.versions.filter(number=version_number).first()
    if version is None:
        raise ValueError(f"revert_entry: entry {entry.pk} has no version {version_number}")
    return edit_entry(entry, user, title=version.title, summary=version.summary)


# --- AccelOpt experience files ------------------------------------------------------------------------
#
# The public AccelOpt scripts write their memory as a JSON list of objects with (at least) slow_kernel,
# fast_kernel, speedup (always >= 1), speedup_original (< 1 for a rewrite that slowed the kernel down),
# title, summary, plus service_name / case_name / id naming where it came from.


def export_entries(entries: Iterable[MemoryEntry] | None = None) -> list[dict[str, Any]]:
    """Entries as AccelOpt's experience list; our extra keys (polarity, status, family) are ignored by it."""
    if entries is None:
        entries = MemoryEntry.objects.exclude(status__in=[EntryStatus.PRUNED, EntryStatus.PROPOSED]).select_related(
            "problem")
    exported = []
    for entry in entries:
        positive = entry.polarity == Polarity.POSITIVE
        problem_slug = getattr(entry.problem, "slug", "") if entry.problem_id else ""
        exported.append(
            {
                "service_name": entry.source_label or entry.family,
                "case_name": problem_slug,
                "id": entry.pk,
                "speedup_original": entry.speedup if positive else 1.0 / entry.speedup,
                "speedup": entry.speedup,
                "slow_kernel": entry.slow_kernel,
                "fast_kernel": entry.fast_kernel,
                "title": f"**{entry.title}**",
                "summary": entry.summary,
                "polarity": entry.polarity,
                "status": entry.status,
                "family": entry.family,
            }
        )
    return exported


@dataclass
class ImportReport:
    created: list[MemoryEntry] = field(default_factory=list)
    duplicates: int = 0
    skipped_empty: int = 0

    def __str__(self) -> str:
        return (
            f"imported {len(self.created)} entries, skipped {self.duplicates} already present and "
            f"{self.skipped_empty} with no optimization"
        )


def _required(item: dict[str, Any], key: str, index: int) -> Any:
    if key not in item or item[key] in (None, ""):
        raise MemoryImportError(f"experience item {index}: missing {key!r} (keys present: {sorted(item)})")
    return item[key]


def import_entries(data: Any, user: Any = None, *, problem: Any = None, family: str = "") -> ImportReport:
    """Read an AccelOpt experience list. All or nothing: a malformed item imports none of the file."""
    if not isinstance(data, list):
        raise MemoryImportError(f"experience file must be a JSON list of objects, got {type(data).__name__}")
    report = ImportReport()
    seen: set[str] = set()
    with transaction.atomic():
        for index, item in enumerate(data):
            if not isinstance(item, dict):
                raise MemoryImportError(f"experience item {index}: expected an object, got {type(item).__name__}")
            slow_kernel = str(_required(item, "slow_kernel", index))
            fast_kernel = str(_required(item, "fast_kernel", index))
            title = str(item.get("title") or "")
            summary = str(item.get("summary") or "")
            if ACCELOPT_NOTHING_FOUND_TITLE.lower() in title.lower() and not summary:
                report.skipped_empty += 1
                continue
            try:
                speedup = float(_required(item, "speedup", index))
                original = float(item.get("speedup_original", speedup))
            except (TypeError, ValueError) as exc:
                raise MemoryImportError(f"experience item {index}: speedup is not a number ({exc})") from None
            if speedup <= 0 or original <= 0:
                raise MemoryImportError(f"experience item {index}: speedup must be positive, got {speedup}")
            polarity = item.get("polarity")
            if polarity not in Polarity.values:
                polarity = Polarity.NEGATIVE if original < 1.0 else Polarity.POSITIVE
            sha = content_sha256(slow_kernel, fast_kernel)
            if sha in seen or MemoryEntry.objects.filter(content_sha256=sha).exists():
                report.duplicates += 1
                continue
            seen.add(sha)
            label = "/".join(str(item[k]) for k in ("service_name", "case_name") if item.get(k))
            report.created.append(
                add_entry(
                    title=title or (summary.splitlines() or [""])[0],
                    summary=summary,
                    slow_kernel=slow_kernel,
                    fast_kernel=fast_kernel,
                    speedup=max(speedup, 1.0 / speedup),
                    polarity=polarity,
                    problem=problem,
                    family=family or str(item.get("family") or ""),
                    source_kind=SourceKind.IMPORT,
                    source_label=label,
                    user=user,
                )
            )
    return report
