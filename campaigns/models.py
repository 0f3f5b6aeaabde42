"""Campaigns: one configuration run over a set of problems (a suite, or chosen problems and cases).

A Campaign holds the configuration once (agent, models, search parameters, memory, budgets); each problem is
a CampaignEntry, whose Run is created only when the scheduler (campaigns.scheduler) releases it. The link
lives here, not on Run: optimizer does not depend on campaigns (docs/architecture.md, the dependency rule).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse


class CampaignStatus(models.TextChoices):
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"
    CANCELLED = "cancelled", "Cancelled"
    STOPPED_BUDGET = "stopped_budget", "Stopped: budget"


FINISHED_CAMPAIGN_STATUSES = frozenset(
    {CampaignStatus.FINISHED, CampaignStatus.CANCELLED, CampaignStatus.STOPPED_BUDGET}
)

# The four budgets, named as engine.search.budget.BUDGET_FIELDS and the Run's fields: None = no limit.
BUDGET_FIELDS = ("max_tokens", "max_cost_usd", "max_wall_time_s", "max_evaluations")


class Campaign(models.Model):
    name = models.CharField(max_length=200, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="campaigns"
    )
    is_public = models.BooleanField(default=False, help_text="Anyone, signed in or not, may watch it.")
    platform = models.CharField(max_length=16, default="trn1")
    backend = models.CharField(max_length=32, default="simulator")
    agent = models.CharField(max_length=16, default="offline")
    suite = models.CharField(max_length=64, blank=True, help_text="Set when the whole suite was chosen.")
    case = models.CharField(max_length=32, blank=True, help_text="Set when one case was chosen for all problems.")
    # {"search": SearchConfig as a dict, "models": {role: model name}, "memory": bool, "budget_notes": [...], and
    # "current_generation": true when asked}: what every run of the campaign gets.
    config = models.JSONField(default=dict, blank=True)

    max_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    max_cost_usd = models.FloatField(null=True, blank=True, help_text="Most LLM dollars, all runs together.")
    max_wall_time_s = models.FloatField(null=True, blank=True, help_text="Most seconds from launch to the end.")
    max_evaluations = models.PositiveIntegerField(null=True, blank=True)
    # Runs of this campaign queued or running at once (campaigns.scheduler explains the fairness this gives).
    max_concurrent_runs = models.PositiveIntegerField(default=1)

    status = models.CharField(max_length=16, choices=CampaignStatus.choices, default=CampaignStatus.RUNNING)
    stop_reason = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"campaign {self.pk} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("campaigns:detail", args=[self.pk])

    @property
    def title(self) -> str:
        return self.name or f"Campaign {self.pk}"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_CAMPAIGN_STATUSES

    @property
    def budgets(self) -> dict[str, float | int | None]:
        return {name: getattr(self, name) for name in BUDGET_FIELDS}


class EntryStatus(models.TextChoices):
    PENDING = "pending", "Waiting for a slot"
    RELEASED = "released", "Run launched"
    SKIPPED = "skipped", "Not run"


class CampaignEntry(models.Model):
    """One problem (case) of a campaign and, once released, its run."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="entries")
    problem = models.ForeignKey("benchmark.Problem", on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    run = models.OneToOneField(
        "optimizer.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="campaign_entry"
    )
    status = models.CharField(max_length=16, choices=EntryStatus.choices, default=EntryStatus.PENDING)
    note = models.CharField(max_length=300, blank=True, help_text="Why it was skipped, or what went wrong at launch.")

    class Meta:
        ordering = ["campaign", "position"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "problem"], name="campaigns_entry_unique_problem"),
        ]

    def __str__(self) -> str:
        return f"campaign {self.campaign_id} entry {self.position} ({self.problem_id})"
