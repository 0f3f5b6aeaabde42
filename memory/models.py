"""The optimization memory: slow -> fast kernel rewrites the Planner learns from, with their edit history.

Provenance points at optimizer rows by plain ids, not foreign keys: the dependency direction is
optimizer -> memory -> benchmark, so this app must not import or migrate against the optimizer app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from engine.platforms.registry import NKI


class Polarity(models.TextChoices):
    POSITIVE = "positive", "positive rewrite (made the kernel faster)"
    NEGATIVE = "negative", "negative rewrite (made the kernel slower)"


class EntryStatus(models.TextChoices):
    ACTIVE = "active", "active"
    PINNED = "pinned", "pinned (always given to the Planner)"
    PRUNED = "pruned", "pruned (never given to the Planner)"
    MERGED = "merged", "merged into another entry (its evidence counts there)"
    # Proposed by an agent or an engineer (the MCP tool propose_lesson): waits for a curator, never shown to
    # a Planner until accepted.
    PROPOSED = "proposed", "proposed (waits for a curator's review)"


class SourceKind(models.TextChoices):
    RUN = "run", "an optimization run"
    PERSON = "person", "written by a person"
    IMPORT = "import", "imported from an AccelOpt experience file"


class MemoryEntry(models.Model):
    title = models.CharField(max_length=300)
    summary = models.TextField(blank=True, help_text="General description of the rewrite, for the Planner.")
    slow_kernel = models.TextField(help_text="Kernel source before the rewrite (the slower one).")
    fast_kernel = models.TextField(help_text="Kernel source after the rewrite (the faster one).")
    speedup = models.FloatField(
        help_text="Latency of the slow kernel over that of the fast one (always >= 1, as AccelOpt stores it)."
    )
    polarity = models.CharField(max_length=16, choices=Polarity.choices, default=Polarity.POSITIVE)
    status = models.CharField(max_length=16, choices=EntryStatus.choices, default=EntryStatus.ACTIVE)

    problem = models.ForeignKey(
        "benchmark.Problem", null=True, blank=True, on_delete=models.SET_NULL, related_name="memory_entries"
    )
    family = models.CharField(max_length=100, blank=True, help_text="Problem family, e.g. matmul, rmsnorm_matmul.")
    # The kernel language the lesson was learned in ("nki", "triton": engine.platforms.registry): a Planner is shown
    # entries of its own language only, unless a curator marks an entry as transferring to every language.
    language = models.CharField(max_length=16, default=NKI, db_index=True)
    transfers = models.BooleanField(
        default=False, help_text="A curator says the lesson holds in other kernel languages too."
    )

    source_kind = models.CharField(max_length=16, choices=SourceKind.choices, default=SourceKind.PERSON)
    source_run_id = models.BigIntegerField(null=True, blank=True, help_text="optimizer Run id, if from a run.")
    source_candidate_id = models.BigIntegerField(
        null=True, blank=True, help_text="optimizer Candidate id whose rewrite this summarises."
    )
    # Stable identity given by the writer (a run uses "run:<id>:<candidate key>"): adding the same key
    # twice returns the existing entry, so a summarizer step replayed after a crash never duplicates.
    source_key = models.CharField(max_length=200, blank=True)
    source_label = models.CharField(
        max_length=300, blank=True, help_text="Free-form origin, e.g. the AccelOpt service/case name."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # sha256 over (slow, fast): import skips an entry it already holds.
    content_sha256 = models.CharField(max_length=64, db_index=True)

    # Keeping the memory clean (memory.learning): the same lesson learned again strengthens this entry (one
    # more MemoryEvidence row) instead of adding a copy; a near-duplicate is merged into it (merged_into).
    lesson_digest = models.CharField(
        max_length=64, blank=True, db_index=True, help_text="engine.memory.lessons.lesson_digest of title and summary."
    )
    evidence_count = models.PositiveIntegerField(default=1, help_text="How many times the lesson was learned.")
    operations = models.JSONField(default=list, blank=True, help_text="Kernel-language calls of its kernels.")
    bottleneck = models.CharField(
        max_length=16, blank=True, help_text="What bounded the kernel the rewrite was applied to."
    )
    merged_into = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="merged_entries"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["source_key"], condition=~models.Q(source_key=""), name="memory_entry_unique_source_key"
            ),
        ]
        indexes = [
            # select_entries() filters on status and orders by recency.
            models.Index(fields=["status", "-created_at"], name="memory_status_recent"),
        ]
        verbose_name_plural = "memory entries"

    def __str__(self) -> str:
        return f"{self.title} ({self.polarity}, x{self.speedup:.2f})"

    @property
    def is_selectable(self) -> bool:
        return self.status not in (EntryStatus.PRUNED, EntryStatus.MERGED)


class ChangeKind(models.TextChoices):
    CREATED = "created", "created"
    IMPORTED = "imported", "imported"
    EDITED = "edited", "edited"
    PINNED = "pinned", "pinned"
    UNPINNED = "unpinned", "unpinned"
    PRUNED = "pruned", "pruned"
    RESTORED = "restored", "restored"
    STRENGTHENED = "strengthened", "learned again"
    MERGED = "merged", "merged into another entry"
    ABSORBED = "absorbed", "took in a merged entry"
    UNMERGED = "unmerged", "merge undone"
    TRANSFERS = "transfers", "marked as transferring to other languages"
    STAYS = "stays", "marked as for its own language only"
    PROPOSED = "proposed", "proposed for review"
    ACCEPTED = "accepted", "accepted by a curator"


class MemoryEntryVersion(models.Model):
    """A snapshot of an entry's editable fields after each change: who, when, what."""

    entry = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    change = models.CharField(max_length=16, choices=ChangeKind.choices)
    title = models.CharField(max_length=300)
    summary = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=EntryStatus.choices)
    transfers = models.BooleanField(default=False)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["entry", "number"]
        constraints = [
            models.UniqueConstraint(fields=["entry", "number"], name="memory_version_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} v{self.number} {self.change}"


class MemoryEvidence(models.Model):
    """One time a lesson was learned: the slow/fast pair behind it, where, and how much it changed the speed.

    `original_entry` is the entry the pair was first filed under; `entry` is where it counts now (another
    entry after a merge). Undoing the merge moves the pair back.
    """

    entry = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="evidence")
    original_entry = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="+")
    speedup = models.FloatField(help_text="Slow over fast latency (>= 1), as the entry's own speedup.")
    problem = models.ForeignKey("benchmark.Problem", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    source_kind = models.CharField(max_length=16, choices=SourceKind.choices, default=SourceKind.RUN)
    source_run_id = models.BigIntegerField(null=True, blank=True)
    source_candidate_id = models.BigIntegerField(null=True, blank=True)
    candidate_key = models.CharField(max_length=100, blank=True, help_text="The search's key of the candidate.")
    iteration = models.PositiveIntegerField(null=True, blank=True)
    # The writer's stable key ("<run>:<candidate key>"): learning the same pair twice adds nothing.
    source_key = models.CharField(max_length=200, blank=True)
    content_sha256 = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["entry", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["source_key"], condition=~models.Q(source_key=""), name="memory_evidence_unique_source_key"
            ),
        ]
        verbose_name_plural = "memory evidence"

    def __str__(self) -> str:
        return f"evidence {self.pk} for entry {self.entry_id} (x{self.speedup:.2f})"


class ProposalStatus(models.TextChoices):
    OPEN = "open", "open"
    ACCEPTED = "accepted", "merged"
    REJECTED = "rejected", "kept apart"


class MergeProposal(models.Model):
    """Two entries that may say the same thing (similar text, same polarity and language): a curator merges
    `duplicate` into `entry` or keeps them apart."""

    entry = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="merge_proposals")
    duplicate = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="+")
    similarity = models.FloatField()
    status = models.CharField(max_length=16, choices=ProposalStatus.choices, default=ProposalStatus.OPEN)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-similarity", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["entry", "duplicate"], name="memory_merge_proposal_unique_pair"),
        ]

    def __str__(self) -> str:
        return f"merge {self.duplicate_id} into {self.entry_id}? ({self.similarity:.2f}, {self.status})"
