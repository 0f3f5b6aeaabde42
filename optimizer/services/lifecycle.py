"""Changing a run's state: cancel, pause, resume, and continue a run a budget stopped (with its refusal).

State changes are conditional UPDATEs on the status, so a request racing the worker never leaves a run in two
states; a running run is stopped by a flag the worker honours between two search steps."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from engine.search.budget import BUDGET_FIELDS
from engine.search.state import reopen_stopped, stopped_mid_iteration
from optimizer.events import record_events
from optimizer.models import (
    Iteration,
    IterationStatus,
    Run,
    RunStatus,
)
from optimizer.services.launch import check_run_quota, parse_budget


def _reload(run: Run) -> Run:
    run.refresh_from_db()
    return run


def cancel_run(run: Run, user: Any = None) -> Run:
    """Stop a run for good. Queued or paused: at once. Running: the worker stops before its next step."""
    now = timezone.now()
    with transaction.atomic():
        stopped = Run.objects.filter(pk=run.pk, status__in=[RunStatus.QUEUED, RunStatus.PAUSED]).update(
            status=RunStatus.CANCELLED, cancel_requested=True, finished=now, claimed_by=""
        )
        if stopped:
            record_events(run.pk, [("run.cancelled", {"by": _who(user)})])
        else:
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(cancel_requested=True)
    return _reload(run)


def pause_run(run: Run, user: Any = None) -> Run:
    """Hold a run; resume_run() continues it from its last checkpoint."""
    with transaction.atomic():
        held = Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
            status=RunStatus.PAUSED, pause_requested=False
        )
        if held:
            record_events(run.pk, [("run.paused", {"by": _who(user), "iteration": run.current_iteration})])
        else:
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(pause_requested=True)
    return _reload(run)


def resume_run(run: Run, user: Any = None) -> Run:
    """Queue a paused run again (a pause still pending on a running run is withdrawn)."""
    with transaction.atomic():
        if run.status == RunStatus.PAUSED and run.owner_id:
            check_run_quota(run.owner, exclude=run.pk, hold=True)  # queued again, it counts again
        queued = Run.objects.filter(pk=run.pk, status=RunStatus.PAUSED).update(
            status=RunStatus.QUEUED, pause_requested=False, claimed_by=""
        )
        if queued:
            record_events(run.pk, [("run.resumed", {"by": _who(user), "iteration": run.current_iteration})])
        else:
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(pause_requested=False)
    return _reload(run)


def continue_refusal(run: Run) -> str | None:
    """Why `run` cannot be continued with more budget (None: it can); the run page offers the form only then."""
    if run.status != RunStatus.STOPPED or not run.checkpoint:
        return (f"run {run.pk} is {run.get_status_display().lower()}, not stopped by a budget: "
                "only a run a budget stopped can be continued with more")
    # By the reverse name only: the optimizer does not import campaigns (the app above it).
    if Run.objects.filter(pk=run.pk, campaign_entry__isnull=False).exists():
        return (f"run {run.pk} belongs to a campaign: its budget is a share of the campaign's, "
                "so it cannot be continued on its own")
    return None


def continue_run(run: Run, user: Any = None, budget: dict[str, Any] | None = None) -> Run:
    """Queue a run a budget stopped again, with new caps (`budget` by BUDGET_FIELDS name; blank is no cap).

    The search goes on from its checkpoint where it stopped (search.state.reopen_stopped): same kernels, beam
    and memory, nothing evaluated twice, and what it spent so far still counts, so each cap must be above it.
    A campaign's run is refused: its caps are its share of the campaign's budget."""
    refusal = continue_refusal(run)
    if refusal:
        raise ValidationError(refusal)
    caps, usage = parse_budget(budget), run.usage
    for name, (label, unit) in BUDGET_FIELDS.items():
        limit = getattr(caps, name)
        if limit is not None and limit <= usage.used(name):
            raise ValidationError(f"invalid budget: {name} ({label}) must be above what the run already spent "
                                  f"({usage.used(name):g} {unit}); leave it empty for no cap")
    checkpoint = reopen_stopped(run.checkpoint)
    with transaction.atomic():
        if run.owner_id:
            check_run_quota(run.owner, exclude=run.pk, hold=True)
        if not Run.objects.filter(pk=run.pk, status=RunStatus.STOPPED).update(
            status=RunStatus.QUEUED, checkpoint=checkpoint, stopped_by_budget="", error_message="", finished=None,
            claimed_by="", cancel_requested=False, pause_requested=False, **caps.to_dict(),
        ):
            raise ValidationError(f"run {run.pk} changed meanwhile; reload it and try again")
        if stopped_mid_iteration(checkpoint):  # the stopped iteration is open again: it chooses its beam anew
            Iteration.objects.filter(run=run, index=checkpoint["iteration"]).update(
                status=IterationStatus.RUNNING, finished=None, next_beam_kernel_ids=[])
        spent = {name: usage.used(name) for name in BUDGET_FIELDS}
        record_events(run.pk, [("run.continued", {
            "by": _who(user), "iteration": run.current_iteration, "stopped_by": run.stopped_by_budget,
            "budget": caps.to_dict(), "spent": spent,
            "message": f"with more budget from iteration {run.current_iteration}, phase {checkpoint['phase']}",
        })])
    return _reload(run)


def _who(user: Any) -> str:
    return user.get_username() if user is not None and user.is_authenticated else ""
