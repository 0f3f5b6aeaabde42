"""Where pending evaluations stand: each one's place in the executor's queue and how long it has waited or run.

The order is the one the local executor serves in: first queued, first started (`Evaluation.queued`, then
the id). Every queued row of the database counts, so with several processes each running its own pool (a
separate run worker, a second web process) "n ahead" is the work queued before it anywhere, an upper bound
on what its own pool still has to start; with a Ray cluster the queue page adds where each task is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import F, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts import quotas
from benchmark.models import Evaluation, EvaluationStatus

PENDING = (EvaluationStatus.QUEUED, EvaluationStatus.RUNNING)


@dataclass(frozen=True)
class QueuePlace:
    """`state` "queued" or "running"; `ahead`: queued evaluations that start before it (0 when running);
    `elapsed_s`: seconds since it was queued (queued) or started (running)."""

    state: str
    ahead: int
    elapsed_s: float

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "ahead": self.ahead, "elapsed_s": round(self.elapsed_s, 1),
                "label": self.label, "text": self.text}

    @property
    def label(self) -> str:
        """"queued (2 ahead)", "queued (next)" or "running"."""
        if self.state == "running":
            return "running"
        return f"queued ({f'{self.ahead} ahead' if self.ahead else 'next'})"

    @property
    def text(self) -> str:
        """What a page says: "queued (2 ahead) · 14 s", "queued (next) · 3 s", "running · 1 min 05 s"."""
        return f"{self.label} · {elapsed_text(self.elapsed_s)}"


def elapsed_text(seconds: float) -> str:
    """12 s, 3 min 05 s, 1 h 02 min (the run page's script writes the same as it counts on)."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def queue_order() -> Any:
    """The order queued evaluations start in (rows from before `queued` existed: by creation)."""
    return (Coalesce(F("queued"), F("created")).asc(), F("id").asc())


def queue_places(evaluations: Iterable[Evaluation]) -> dict[int, QueuePlace]:
    """The place of each pending evaluation among these (finished ones are left out), by evaluation id."""
    pending = [e for e in evaluations if e.status in PENDING]
    if not pending:
        return {}
    line = list(Evaluation.objects.filter(status=EvaluationStatus.QUEUED).order_by(*queue_order())
                .values_list("pk", flat=True))
    index = {pk: n for n, pk in enumerate(line)}
    now = timezone.now()
    places = {}
    for evaluation in pending:
        if evaluation.status == EvaluationStatus.RUNNING:
            since = evaluation.started or evaluation.queued or evaluation.created
            places[evaluation.pk] = QueuePlace("running", 0, (now - since).total_seconds())
        else:
            since = evaluation.queued or evaluation.created
            # A row queued after the line was read is last in it.
            places[evaluation.pk] = QueuePlace("queued", index.get(evaluation.pk, len(line)),
                                               (now - since).total_seconds())
    return places


def queued_evaluations(user: Any) -> QuerySet[Evaluation]:
    """The evaluations `user` asked for that are queued or running: what the evaluations quota counts."""
    return Evaluation.objects.filter(requested_by=user, status__in=[EvaluationStatus.QUEUED, EvaluationStatus.RUNNING])


def check_evaluation_quota(user: Any, adding: int = 1, *, exclude: int | None = None) -> None:
    """QuotaExceeded (a ValidationError naming the limit) if queuing `adding` more evaluations would take
    `user` past ACCELOPT_QUOTA_QUEUED_EVALUATIONS; nothing for commands and workers (no user)."""
    if user is None or not user.is_authenticated or not adding:
        return
    pending = queued_evaluations(user)
    if exclude is not None:
        pending = pending.exclude(pk=exclude)
    quotas.check(quotas.QUEUED_EVALUATIONS, pending.count(), adding)
