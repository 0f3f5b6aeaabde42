"""The campaign scheduler: which problem's run starts when, and the campaign's budgets.

Fairness. Workers claim the oldest queued run first (optimizer.worker.claim_run) and drive it to its end.
A campaign therefore never queues all its problems at once: it keeps at most `max_concurrent_runs` of its
runs queued or running, and creates the next problem's run only when one of them ends. That run joins the
queue behind whatever other campaigns (and single runs) queued meanwhile, so the shared worker pool serves
campaigns first come, first served, one run at a time each: no campaign fills the queue, and within a
campaign problems go in order, each run bounded by its iterations and budgets. (Round-robin between runs
at iteration granularity would need a worker that parks a run after every step and reopens it from its
checkpoint, agents and memory included, for each iteration: more work per step for no better order.)

Budgets. A campaign's four budgets (engine.search.budget: tokens, dollars, wall time, evaluations) cover
all its runs together, checked with the optimizer's own checker over the sum of its runs' usage. A run the
scheduler launches gets an equal share of what no run holds yet of each as its own budget (it stops itself
cleanly, "stopped: budget", when it reaches one), so the runs' caps together never exceed the campaign's; and every time one of its runs publishes events the scheduler compares the campaign's
totals with its budgets: once one is reached it launches nothing more and skips the problems left; a run
still going stops itself at its own cap on that budget, and one without such a cap (or on wall time) is
cancelled between steps. Either way everything it found is kept.

Quota. A campaign's runs count against its owner's runs quota (ACCELOPT_QUOTA_RUNS_IN_FLIGHT) like any other of
their runs: the scheduler launches no more than the owner has room for, whatever else they have queued or running
(single runs, other campaigns), and a problem left waiting says so in its note. A run of theirs that leaves the
queue wakes their campaigns that wait.

Triggers: create_campaign, and `on_run_events`, which optimizer.events awaits after each publish
(registered in CampaignsConfig.ready), in whatever process drives the run.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts import quotas
from benchmark import services as benchmark_services
from benchmark.models import Evaluation, EvaluationStatus
from campaigns.models import Campaign, CampaignEntry, CampaignStatus, EntryStatus
from campaigns.usage import CAMPAIGN_MESSAGE_TYPE, campaign_budget, campaign_usage, group_name, run_usages
from engine.search.budget import BUDGET_FIELDS, BudgetReached, budget_reached
from optimizer import services as optimizer_services
from optimizer.models import Run, RunStatus

logger = logging.getLogger(__name__)

ACTIVE_RUN_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
# Events of a run leaving the queue, for good or for a while: a place in its owner's runs quota is free again.
QUOTA_FREEING_EVENTS = frozenset({"run.finished", "run.failed", "run.cancelled", "run.stopped", "run.paused"})


def campaign_budget_reached(campaign: Campaign) -> BudgetReached | None:
    """The first campaign budget its runs have reached together, or None."""
    budget = campaign_budget(campaign)
    return None if budget.empty else budget_reached(budget, campaign_usage(campaign))


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
            reached = campaign_budget_reached(campaign)
            if reached is not None:
                changed |= _stop(campaign, entries, CampaignStatus.STOPPED_BUDGET, f"campaign {reached.describe()}",
                                 budget=reached.budget)
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


def _owner_room(campaign: Campaign, entries: list[CampaignEntry]) -> int | None:
    """How many more runs the campaign's owner may have queued or running (None: no limit, or no owner); the
    pending entries get a note naming the limit while there is no room."""
    most = quotas.limit(quotas.RUNS_IN_FLIGHT)
    if not most or campaign.owner_id is None:
        return None
    # As create_run counts: after any other launch of the owner's has ended (their row's lock on PostgreSQL).
    list(get_user_model().objects.select_for_update().filter(pk=campaign.owner_id).values_list("pk", flat=True))
    used = optimizer_services.runs_in_flight(campaign.owner).count()
    # The limit first: the campaign page shows a note's first 60 characters.
    note = (f"waiting for a place ({quotas.RUNS_IN_FLIGHT} = {most}): its owner has {used} optimization runs "
            "queued or running, the most one person may have; it starts when one of them ends")
    for entry in entries:
        if entry.status == EntryStatus.PENDING and entry.note != (note if used >= most else ""):
            entry.note = note if used >= most else ""
            entry.save(update_fields=["note"])
    return max(0, most - used)


def _release(campaign: Campaign, entries: list[CampaignEntry]) -> bool:
    active = [e.run for e in entries if e.run is not None and e.run.status in ACTIVE_RUN_STATUSES]
    free = campaign.max_concurrent_runs - len(active)
    room = _owner_room(campaign, entries) if free > 0 else None
    if room is not None:
        free = min(free, room)
    launching = min(free, sum(1 for e in entries if e.status == EntryStatus.PENDING))
    caps = _shares(campaign, active, launching) if launching > 0 else {}
    if caps is None:
        return False
    released = False
    for entry in entries:
        if free <= 0:
            break
        if entry.status != EntryStatus.PENDING:
            continue
        released = True
        try:
            with transaction.atomic():
                entry.run = _launch(campaign, entry, caps)
                entry.status = EntryStatus.RELEASED
                entry.save(update_fields=["run", "status"])
            free -= 1
        except (ValidationError, PermissionDenied) as error:  # the problem or the owner changed since the launch
            message = " ".join(error.messages) if isinstance(error, ValidationError) else str(error)
            entry.status, entry.note = EntryStatus.SKIPPED, message[:300]
            entry.save(update_fields=["status", "note"])
    return released


def _launch(campaign: Campaign, entry: CampaignEntry, caps: dict[str, Any]) -> Run:
    config = campaign.config or {}
    return optimizer_services.create_run(
        campaign.owner,
        entry.problem,
        agent=campaign.agent,
        platform=campaign.platform,
        backend=campaign.backend,
        search=config.get("search"),
        models=config.get("models") or None,
        is_public=campaign.is_public,
        budget=caps,
        quota=False,  # the campaign's max_concurrent_runs bounds its runs (no more than the quota: services)
        current_generation=bool(config.get("current_generation")),
    )


def _shares(campaign: Campaign, active: list[Run], launching: int) -> dict[str, Any] | None:
    """Each run launched now gets, as its own budget, an equal share of what no run holds yet: the campaign's
    budget less what its runs have used and less what the runs still going may yet use of their own caps. The
    caps of all runs together never exceed the campaign's, so a campaign stops within one step per run of its
    budget however many runs go at once. Wall time is not shared: each run may use what is left of it."""
    usages = run_usages(campaign)
    used = campaign_usage(campaign)
    caps: dict[str, Any] = {}
    for name in BUDGET_FIELDS:
        limit = getattr(campaign, name)
        if limit is None:
            continue
        if name == "max_wall_time_s":
            caps[name] = max(1.0, limit - used.wall_time_s)
            continue
        held = sum(max(0.0, getattr(run, name) - usages[run.pk].used(name))
                   for run in active if getattr(run, name, None) is not None and run.pk in usages)
        share = (limit - used.used(name) - held) / launching
        if name in ("max_tokens", "max_evaluations"):
            share = int(share)
        if share <= 0:
            return None  # the runs going hold all of it: wait until one of them ends and frees its part
        caps[name] = share
    return caps


def _stop(campaign: Campaign, entries: list[CampaignEntry], status: str, reason: str, budget: str = "") -> bool:
    """Launch nothing more and stop the runs still going. On a reached `budget`, a running run that has its own
    cap on it (what was left of the campaign's when it was launched) is left to stop itself at its next step,
    keeping that step's kernels (optimizer's clean budget stop); any other is cancelled between steps."""
    Campaign.objects.filter(pk=campaign.pk).update(status=status, stop_reason=reason[:200])
    campaign.status = status
    for entry in entries:
        if entry.status == EntryStatus.PENDING:
            entry.status, entry.note = EntryStatus.SKIPPED, reason[:300]
            entry.save(update_fields=["status", "note"])
        elif entry.run is not None and not entry.run.is_finished:
            if budget and budget != "max_wall_time_s" and entry.run.status == RunStatus.RUNNING and getattr(
                entry.run, budget, None) is not None:
                continue
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
        stopping = campaign.status == CampaignStatus.RUNNING
        if stopping:
            _stop(campaign, list(campaign.entries.select_related("run")), status, reason)
    if stopping and status == CampaignStatus.CANCELLED:
        cancel_campaign_evaluations(campaign_id, reason)
    advance(campaign_id)  # finishes it when no run was left going


def cancel_campaign_evaluations(campaign_id: int, reason: str) -> list[int]:
    """A cancelled campaign's evaluations still queued or running (of the kernels its cancelled runs wrote) stop
    with the runs: stored as cancelled at once (benchmark's cancel_pending_evaluations), not left "running"
    until the stale rule. A start kernel's evaluation is left alone: other runs may be waiting on it."""
    runs = CampaignEntry.objects.filter(campaign_id=campaign_id, run__cancel_requested=True).values("run_id")
    pending = Evaluation.objects.filter(kernel__run_id__in=runs,
                                        status__in=[EvaluationStatus.QUEUED, EvaluationStatus.RUNNING])
    return benchmark_services.cancel_pending_evaluations(pending, f"campaign {campaign_id} was {reason}")


# --- following runs -----------------------------------------------------------------------------------


def campaign_of_run(run_id: int) -> int | None:
    return CampaignEntry.objects.filter(run_id=run_id).values_list("campaign_id", flat=True).first()


def campaigns_waiting_for(run_id: int) -> list[int]:
    """The running campaigns of the run's owner with problems not launched yet: they may be waiting for a place
    in the owner's runs quota, which this run just gave back."""
    if not quotas.limit(quotas.RUNS_IN_FLIGHT):
        return []
    owner_id = Run.objects.filter(pk=run_id).values_list("owner_id", flat=True).first()
    if owner_id is None:
        return []
    return list(Campaign.objects.filter(owner_id=owner_id, status=CampaignStatus.RUNNING, finished__isnull=True,
                                        entries__status=EntryStatus.PENDING).distinct().order_by("pk")
                .values_list("pk", flat=True))


async def on_run_events(run_id: int, events: list[Any]) -> None:
    """optimizer.events' listener: a campaign's run moved, so advance the campaign and refresh its page; a run
    that left the queue also advances its owner's campaigns waiting for a place in the runs quota."""
    campaign_id = await sync_to_async(campaign_of_run)(run_id)
    campaign_ids = [campaign_id] if campaign_id is not None else []
    if any(getattr(event, "kind", "") in QUOTA_FREEING_EVENTS for event in events):
        campaign_ids += [pk for pk in await sync_to_async(campaigns_waiting_for)(run_id) if pk != campaign_id]
    for pk in campaign_ids:
        await sync_to_async(advance)(pk)
        await notify_async(pk)


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
