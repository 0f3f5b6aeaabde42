"""Optimization runs and their full audit trail: iterations, candidates, agent calls and the event log.

Models hold state only. Creating, cancelling and driving runs lives in `optimizer.services` and
`optimizer.worker`; the search itself is the pure `engine.search`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import NoReverseMatch, reverse

from engine.search.budget import BUDGET_FIELDS, Budget, Usage


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    # A budget was reached: the run ended cleanly between two steps, keeping everything it found
    # (Run.stopped_by_budget names the budget).
    STOPPED = "stopped", "Stopped: budget"


FINISHED_STATUSES = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.STOPPED})


class AgentKind(models.TextChoices):
    OFFLINE = "offline", "Offline agent (search over known rewrites)"
    LLM = "llm", "LLM agents (OpenAI-compatible endpoint)"


class Run(models.Model):
    problem = models.ForeignKey("benchmark.Problem", on_delete=models.CASCADE, related_name="runs")
    start_kernel = models.ForeignKey("benchmark.Kernel", on_delete=models.PROTECT, related_name="+")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    is_public = models.BooleanField(default=False, help_text="Anyone, signed in or not, may watch it.")
    agent = models.CharField(max_length=16, choices=AgentKind.choices, default=AgentKind.OFFLINE)
    platform = models.CharField(max_length=16, default="trn1")
    backend = models.CharField(max_length=32, default="simulator")
    # {"search": engine.search.SearchConfig as a dict (seed included), "models": {role: settings}}
    config = models.JSONField(default=dict, blank=True)

    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    # Requests are flags the worker honours between steps; status changes only when it does.
    cancel_requested = models.BooleanField(default=False)
    pause_requested = models.BooleanField(default=False)
    error_message = models.TextField(blank=True)

    # The search state after the last completed step; a crashed run resumes from here.
    checkpoint = models.JSONField(null=True, blank=True)
    current_iteration = models.PositiveIntegerField(default=0)
    claimed_by = models.CharField(max_length=200, blank=True, help_text="Worker holding the run.")
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    best_kernel = models.ForeignKey(
        "benchmark.Kernel", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    start_latency_ms = models.FloatField(null=True, blank=True)
    best_latency_ms = models.FloatField(null=True, blank=True)
    best_peak_fraction = models.FloatField(null=True, blank=True)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.FloatField(default=0.0, help_text="Sum over the calls whose cost is known.")
    # Calls whose cost is unknown (the server reported no token usage, or the model has no price): while
    # any exist, cost_usd is a lower bound and pages say "unknown" instead of showing it as the cost.
    unpriced_calls = models.PositiveIntegerField(default=0)

    # Budgets (engine.search.budget.BUDGET_FIELDS, the same names on campaigns): empty is no cap. The search
    # checks them between steps; a run that reaches one stops as STOPPED, keeping everything found.
    max_tokens = models.PositiveBigIntegerField(null=True, blank=True, help_text="Most prompt + completion tokens.")
    max_cost_usd = models.FloatField(null=True, blank=True, help_text="Most LLM dollars (calls of known cost).")
    max_wall_time_s = models.FloatField(null=True, blank=True, help_text="Most seconds spent running steps.")
    max_evaluations = models.PositiveIntegerField(null=True, blank=True, help_text="Most kernel evaluations.")
    stopped_by_budget = models.CharField(max_length=32, blank=True, help_text="The budget a stopped run reached.")

    # Next RunEvent.seq; bumped under a row lock so every event of a run gets a distinct, gapless number.
    next_event_seq = models.PositiveBigIntegerField(default=1)

    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [
            # The worker's claim query: oldest queued run first.
            models.Index(fields=["status", "created"], name="optimizer_run_claim"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} on {self.problem_id} ({self.status})"

    def get_absolute_url(self) -> str:
        try:
            return reverse("optimizer:run_detail", args=[self.pk])
        except NoReverseMatch:  # the run pages are built by another issue
            return f"/runs/{self.pk}/"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def best_speedup(self) -> float | None:
        if not self.start_latency_ms or not self.best_latency_ms:
            return None
        return self.start_latency_ms / self.best_latency_ms

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def budget(self) -> Budget:
        return Budget(**{name: getattr(self, name) for name in BUDGET_FIELDS})

    @property
    def usage(self) -> Usage:
        """What the run has spent, for its budgets: the totals of its last checkpoint."""
        totals = (self.checkpoint or {}).get("totals") or {}
        return Usage(tokens=self.total_tokens, cost_usd=self.cost_usd, unpriced_calls=self.unpriced_calls,
                     wall_time_s=float(totals.get("wall_time_s", 0.0)), evaluations=int(totals.get("evaluations", 0)))

    @property
    def cost_known(self) -> bool:
        """False when some agent call's cost is unknown: then `cost_usd` only counts the others."""
        return self.unpriced_calls == 0

    @property
    def known_cost_usd(self) -> float | None:
        """The run's LLM cost, or None when part of it is unknown."""
        return self.cost_usd if self.cost_known else None


class IterationStatus(models.TextChoices):
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"


class Iteration(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="iterations")
    index = models.PositiveIntegerField(help_text="1-based, as the search counts them.")
    status = models.CharField(max_length=16, choices=IterationStatus.choices, default=IterationStatus.RUNNING)
    beam_kernel_ids = models.JSONField(default=list, blank=True, help_text="Kernels the iteration started from.")
    next_beam_kernel_ids = models.JSONField(default=list, blank=True)
    best_latency_ms = models.FloatField(null=True, blank=True)
    best_peak_fraction = models.FloatField(null=True, blank=True)
    started = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="optimizer_iteration_unique")]

    def __str__(self) -> str:
        return f"run {self.run_id} iteration {self.index}"


class CandidateStatus(models.TextChoices):
    PLANNED = "planned", "Planned"
    WRITTEN = "written", "Written"
    UNUSABLE = "unusable", "Agent reply unusable"
    EVALUATED = "evaluated", "Evaluated"


class Candidate(models.Model):
    """One kernel the Executor wrote for one plan, and what the evaluation made of it."""

    iteration = models.ForeignKey(Iteration, on_delete=models.CASCADE, related_name="candidates")
    # The search's key "<iteration>.<beam>.<plan>.<sample>": the row is found again on resume.
    key = models.CharField(max_length=100)
    parent_kernel = models.ForeignKey("benchmark.Kernel", on_delete=models.CASCADE, related_name="+")
    plan_index = models.PositiveIntegerField(default=0)
    sample_index = models.PositiveIntegerField(default=0)
    plan = models.TextField(blank=True)
    kernel = models.ForeignKey(
        "benchmark.Kernel", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    evaluation = models.ForeignKey(
        "benchmark.Evaluation", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=16, choices=CandidateStatus.choices, default=CandidateStatus.PLANNED)
    fix_attempts = models.PositiveIntegerField(default=0)
    correct = models.BooleanField(null=True)
    latency_ms = models.FloatField(null=True, blank=True)
    peak_fraction = models.FloatField(null=True, blank=True)
    speedup = models.FloatField(null=True, blank=True, help_text="Parent latency over this kernel's latency.")
    error = models.TextField(blank=True)
    chosen = models.BooleanField(default=False, help_text="Kept in the beam for the next iteration.")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["iteration", "id"]
        constraints = [
            models.UniqueConstraint(fields=["iteration", "key"], name="optimizer_candidate_unique_key"),
        ]

    def __str__(self) -> str:
        return f"candidate {self.key} of run iteration {self.iteration_id}"


class AgentRole(models.TextChoices):
    PLANNER = "planner", "Planner"
    EXECUTOR = "executor", "Executor"
    FIXER = "fixer", "Fixer"
    SUMMARIZER = "summarizer", "Summarizer"


class AgentCall(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="agent_calls")
    iteration = models.ForeignKey(
        Iteration, null=True, blank=True, on_delete=models.SET_NULL, related_name="agent_calls"
    )
    candidate = models.ForeignKey(
        Candidate, null=True, blank=True, on_delete=models.SET_NULL, related_name="agent_calls"
    )
    role = models.CharField(max_length=16, choices=AgentRole.choices)
    model = models.CharField(max_length=200, blank=True)
    prompt = models.JSONField(default=list, blank=True, help_text="The chat messages sent.")
    response = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.FloatField(null=True, blank=True)
    # None: unknown (the server reported no token usage, or the model is not in the price table), never $0.
    cost_usd = models.FloatField(null=True, blank=True, default=0.0)
    # The model's reasoning when the server returns it apart from the answer (reasoning_content / reasoning).
    reasoning = models.TextField(blank=True)
    error = models.TextField(blank=True)
    usable = models.BooleanField(default=True, help_text="The reply could be parsed into what the role needs.")
    # The kernel this call wrote (Executor and Fixer calls whose reply held one): an evaluation's
    # provenance names the call and its model through it (benchmark.provenance).
    kernel = models.ForeignKey(
        "benchmark.Kernel", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "id"]

    def __str__(self) -> str:
        return f"{self.role} call of run {self.run_id} ({self.model or 'offline'})"

    @property
    def cost_known(self) -> bool:
        return self.cost_usd is not None


class RunEvent(models.Model):
    """Append-only log of what a run did: the one source for the live stream and its replay."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=40)
    payload = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="optimizer_event_unique_seq")]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.seq} {self.kind}"

    def to_dict(self) -> dict:
        return {
            "run": self.run_id,
            "seq": self.seq,
            "kind": self.kind,
            "payload": self.payload,
            "time": self.created.isoformat() if self.created else None,
        }
