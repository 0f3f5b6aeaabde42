"""Review of held results: the curators' queue, and the one place a held evaluation is accepted or rejected.

A correct result is held (Evaluation.review = "held") when it looks too good to trust:
* the evaluation pipeline flagged it `suspicious` (faster than the theoretical peak, work the simulator
  cannot see, input-dependent traces): `benchmark.services.save_result` holds it as it stores the result;
* an optimization run found its speedup over the parent kernel above the run's `suspicious_speedup`:
  the run's recorder calls `hold_evaluation` when it saves the step.

A held result is never ranked (`Evaluation.is_rankable`, `EvaluationQuerySet.rankable`): not on the
leaderboard, not as a problem page's best, not in a run's beam. A curator accepts it (it then counts like
any correct result) or rejects it (it never counts); who decided and when is kept on the row. Web pages
and the API both call the functions here. This module builds on `benchmark.services`, never the reverse.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone

from accounts.roles import is_curator
from benchmark.models import Evaluation, EvaluationStatus, Review
from benchmark.services.access import visible_problems

REVIEW_NOTE_LIMIT = 2000


def can_review(user: Any) -> bool:
    """Curators (and admins) decide on held results."""
    return is_curator(user)


def _require_reviewer(user: Any) -> None:
    if not can_review(user):
        raise PermissionDenied("only curators can review held results")


def held_evaluations(user: Any) -> QuerySet[Evaluation]:
    """The review queue: held results the curator may see, oldest hold first. Private runs' too: deciding
    them is the curator's job (a held result counts nowhere, not even in its owner's next run, until then),
    so this queue is the one place a curator sees another person's private work (docs/operations.md)."""
    _require_reviewer(user)
    return (
        Evaluation.objects.held()
        .filter(kernel__problem__in=visible_problems(user))
        .select_related("kernel", "kernel__problem", "kernel__parent")
        .order_by("held_at", "id")
    )


def recent_decisions(user: Any, limit: int = 20) -> list[Evaluation]:
    """The latest accepted or rejected results, newest decision first (the page's history)."""
    _require_reviewer(user)
    return list(
        Evaluation.objects.filter(review__in=[Review.ACCEPTED, Review.REJECTED])
        .filter(kernel__problem__in=visible_problems(user))
        .select_related("kernel", "kernel__problem", "reviewed_by")
        .order_by("-reviewed_at", "-id")[:limit]
    )


def hold_evaluation(evaluation_id: int, reason: str) -> bool:
    """Hold a finished, correct result for review (an optimization run's speedup rule); True if newly held.

    Idempotent: a row already held, accepted or rejected is left as it is, so a replayed run step or a
    second run reaching the same kernel never undoes a curator's decision.
    """
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().filter(pk=evaluation_id).first()
        if evaluation is None or evaluation.review or evaluation.status != EvaluationStatus.DONE:
            return False
        if not evaluation.correct:
            return False
        evaluation.hold(reason)
        evaluation.save(update_fields=["review", "held_reason", "held_at"])
    return True


def get_reviewable_for_user(user: Any, pk: int) -> Evaluation:
    """An evaluation the curator may decide on: visible to them and held at some point."""
    _require_reviewer(user)
    evaluation = (
        Evaluation.objects.filter(pk=pk, kernel__problem__in=visible_problems(user))
        .select_related("kernel", "kernel__problem")
        .first()
    )
    if evaluation is None:
        raise Http404(f"no evaluation with id {pk}")
    return evaluation


def decide(user: Any, pk: int, decision: str, note: str = "") -> Evaluation:
    """Accept or reject a held result (a curator may change an earlier decision); records who and when."""
    if decision not in (Review.ACCEPTED, Review.REJECTED):
        raise ValidationError(f"unknown review decision {decision!r}; expected accepted or rejected")
    get_reviewable_for_user(user, pk)  # 403 / 404 before any lock
    note = (note or "").strip()
    if len(note) > REVIEW_NOTE_LIMIT:
        raise ValidationError(f"the note is {len(note)} characters; the limit is {REVIEW_NOTE_LIMIT}")
    with transaction.atomic():
        evaluation = Evaluation.objects.select_for_update().get(pk=pk)
        if not evaluation.review:
            raise ValidationError(
                f"evaluation {pk} was never held for review; only held results are accepted or rejected"
            )
        evaluation.review = decision
        evaluation.reviewed_by = user
        evaluation.reviewed_at = timezone.now()
        evaluation.review_note = note
        evaluation.save(update_fields=["review", "reviewed_by", "reviewed_at", "review_note"])
    return evaluation
