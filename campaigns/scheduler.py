"""The campaign scheduler: which problem's run starts when, and the campaign's budgets.

Fairness. Workers claim the oldest queued run first (optimizer.worker.claim_run) and drive it to its end.
A campaign therefore never queues all its problems at once: it keeps at most `max_concurrent_runs` of its
runs queued or running, and creates the next problem's run only when one of them ends. That run joins the
queue behind whatever other campaigns (and single runs) queued meanwhile, so the shared worker pool serves
campaigns first come, first served, one run at a time each: no campaign fills the queue, and within a
campaign problems go in order, each run bounded by its iterations and budgets. (Round-robin between runs
at iteration granularity would need a worker that parks a run after every step and reopens it from its
checkpoint, agents and memory included, for each iteration: more work per step for no better order.)

Budgets. A campaign's four budgets (tokens, dollars, wall time, evaluations) cover all its runs together.
A run launched by the scheduler gets what is left of each as its own budget where the optimizer's Run has
budget fields (a run that reaches one stops itself cleanly); in any case the scheduler compares the
campaign's totals with its budgets every time one of its runs publishes events, and once one is reached it
launches nothing more and stops the runs still going (cancelled between steps: everything found is kept).

Triggers: create_campaign, and `on_run_events`, which optimizer.events awaits after each publish
(registered in CampaignsConfig.ready), in whatever process drives the run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from campaigns.models import BUDGET_FIELDS, Campaign, CampaignEntry, CampaignStatus, EntryStatus
from optimizer import services as optimizer_services
from optimizer.models import Candidate, CandidateStatus, Run, RunStatus

logger = logging.getLogger(__name__)

CAMPAIGN_MESSAGE_TYPE = "campaign.changed"  # handled by CampaignConsumer.campaign_changed
ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)


def group_name(campaign_id: int) -> str:
    return f"campaign-{campaign_id}"


def _run_fields() -> set[str]:
    return {field.name for field in Run._meta.get_fields()}


@dataclass(frozen=True)
class Usage:
    """What a campaign's runs have used so far. `dollars` counts the calls whose cost is known; while
    `unpriced_calls` > 0 the campaign's cost is unknown and `dollars` only a lower bound."""

    tokens: int
    dollars: float
    unpriced_calls: int
    evaluations: int
    wall_s: float

    def amount(self, budget: str) -> float:
        return {"max_tokens": self.tokens, "max_dollars": self.dollars, "max_wall_s": self.wall_s,
                "max_evaluations": self.evaluations}[budget]

    @property
    def cost_known(self) -> bool:
        return self.unpriced_calls == 0


def campaign_usage(campaign: Campaign) -> Usage:
    runs = Run.objects.filter(campaign_entry__campaign=campaign)
    sums: dict[str, Any] = {"prompt": Sum("prompt_tokens"), "completion": Sum("completion_tokens"),
                            "dollars": Sum("cost_usd")}
    if "unpriced_calls" in _run_fields():
        sums["unpriced"] = Sum("unpriced_calls")
    totals = runs.aggregate(**sums)
    evaluations = Candidate.objects.filter(
        iteration__run__campaign_entry__campaign=campaign, status=CandidateStatus.EVALUATED
    ).count()
    end = campaign.finished or timezone.now()
    return Usage(
        tokens=int((totals["prompt"] or 0) + (totals["completion"] or 0)),
        dollars=float(totals["dollars"] or 0.0),
        unpriced_calls=int(totals.get("unpriced") or 0),
        evaluations=evaluations,
        wall_s=max(0.0, (end - campaign.created).total_seconds()),
    )


def budget_reached(campaign: Campaign, usage: Usage) -> str:
    """"" while every budget has room; else which one was reached, in words."""
    for name in BUDGET_FIELDS:
        limit = getattr(campaign, name)
        if limit is not None and usage.amount(name) >= limit:
            return f"campaign budget reached: {name.removeprefix('max_')} {usage.amount(name):g} of {limit:g}"
    return ""


# --- advancing ----------------------------------------------------------------------------------------


def advance(campaign_id: int) -> bool:
    """Bring a campaign up to date: stop it on a reached budget, launch runs into free slots, and finish it
    when nothing is left. Idempotent; safe to call from several processes. Returns True if anything changed."""
    changed = False
    with transaction.atomic():
        # A write first: it takes the row's lock (PostgreSQL) or the database's (SQLite) before anything is
        # read, so two processes advancing the same campaign never both launch the same entry.
        if not Campaign.objects.filter(pk=campaign_id).update(status=F("status")):
            return False
        campaign = Campaign.objects.get(pk=campaign_id)
        if campaign.finished is not None:
            return False
        entries = list(campaign.entries.select_related("run", "problem").order_by("position"))
        if campaign.status == CampaignStatus.RUNNING:
            reason = budget_reached(campaign, campaign_usage(campaign))
            if reason:
                changed |= _stop(campaign, entries, CampaignStatus.STOPPED_BUDGET, reason)
            else:
                changed |= _release(campaign, entries)
        if all(entry.run is None or entry.run.is_finished for entry in entries) and not any(
            entry.status == EntryStatus.PENDING for entry in entries
        ):
            status = CampaignStatus.FINISHED if campaign.status == CampaignStatus.RUNNING else campaign.status
            Campaign.objects.filter(pk=campaign_id).update(status=status, finished=timezone.now())
            changed = True
        if changed:
            transaction.on_commit(lambda: notify(campaign_id))
    return changed


def _release(campaign: Campaign, entries: list[CampaignEntry]) -> bool:
    active = sum(1 for e in entries if e.run is not None and e.run.status in ACTIVE_RUN_STATUSES)
    free = campaign.max_concurrent_runs - active
    released = False
    for entry in entries:
        if free <= 0:
            break
        if entry.status != EntryStatus.PENDING:
            continue
        released = True
        try:
            with transaction.atomic():
                entry.run = _launch(campaign, entry)
                entry.status = EntryStatus.RELEASED
                entry.save(update_fields=["run", "status"])
            free -= 1
        except ValidationError as error:  # the problem changed since the campaign was made (no baseline, ...)
            entry.status, entry.note = EntryStatus.SKIPPED, " ".join(error.messages)[:300]
            entry.save(update_fields=["status", "note"])
    return released


def _launch(campaign: Campaign, entry: CampaignEntry) -> Run:
    config = campaign.config or {}
    run = optimizer_services.create_run(
        campaign.owner,
        entry.problem,
        agent=campaign.agent,
        platform=campaign.platform,
        backend=campaign.backend,
        search=config.get("search"),
        models=config.get("models") or None,
        is_public=campaign.is_public,
    )
    # What is left of each campaign budget becomes the run's own, where runs have budgets.
    budget_fields = [name for name in BUDGET_FIELDS if name in _run_fields()]
    if budget_fields:
        usage = campaign_usage(campaign)
        left = {name: max(0, getattr(campaign, name) - usage.amount(name))
                for name in budget_fields if getattr(campaign, name) is not None}
        if left:
            if "max_tokens" in left:
                left["max_tokens"] = int(left["max_tokens"])
            if "max_evaluations" in left:
                left["max_evaluations"] = int(left["max_evaluations"])
            Run.objects.filter(pk=run.pk).update(**left)
    return run


def _stop(campaign: Campaign, entries: list[CampaignEntry], status: str, reason: str) -> bool:
    Campaign.objects.filter(pk=campaign.pk).update(status=status, stop_reason=reason[:200])
    campaign.status = status
    for entry in entries:
        if entry.status == EntryStatus.PENDING:
            entry.status, entry.note = EntryStatus.SKIPPED, reason[:300]
            entry.save(update_fields=["status", "note"])
        elif entry.run is not None and not entry.run.is_finished:
            entry.run = optimizer_services.cancel_run(entry.run)
            entry.note = reason[:300]
            entry.save(update_fields=["note"])
    return True


def stop_campaign(campaign_id: int, status: str, reason: str) -> None:
    """Launch nothing more and stop the runs still going (cancel, or a budget the scheduler enforces)."""
    with transaction.atomic():
        if not Campaign.objects.filter(pk=campaign_id).update(status=F("status")):
            return
        campaign = Campaign.objects.get(pk=campaign_id)
        if campaign.status == CampaignStatus.RUNNING:
            _stop(campaign, list(campaign.entries.select_related("run")), status, reason)
    advance(campaign_id)  # finishes it when no run was left going


# --- following runs -----------------------------------------------------------------------------------


def campaign_of_run(run_id: int) -> int | None:
    return CampaignEntry.objects.filter(run_id=run_id).values_list("campaign_id", flat=True).first()


async def on_run_events(run_id: int, events: list[Any]) -> None:
    """optimizer.events' listener: a campaign's run moved, so advance the campaign and refresh its page."""
    campaign_id = await sync_to_async(campaign_of_run)(run_id)
    if campaign_id is None:
        return
    await sync_to_async(advance)(campaign_id)
    await notify_async(campaign_id)


async def notify_async(campaign_id: int) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group_name(campaign_id), {"type": CAMPAIGN_MESSAGE_TYPE, "campaign": campaign_id})
    except Exception:  # the page re-reads the database on its next refresh; a lost ping costs nothing else
        logger.exception("campaign %s: could not publish a change", campaign_id)


def notify(campaign_id: int) -> None:
    async_to_sync(notify_async)(campaign_id)
