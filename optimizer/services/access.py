"""Who may see, change and launch runs, and finding runs (the runs list and its filters)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q, QuerySet
from django.http import Http404

from accounts.roles import can_write_owned, is_admin, is_engineer, visible_owned
from optimizer.models import (
    Run,
    RunStatus,
)


def can_launch_runs(user: Any) -> bool:
    return is_engineer(user)


def visible_runs(user: Any) -> QuerySet[Run]:
    """Public runs for everyone; private ones only for their owner (and admins)."""
    return visible_owned(user, Run.objects.select_related("problem", "owner"))


def hidden_runs(user: Any) -> QuerySet[Run]:
    """The runs `user` may not see: the complement of visible_runs, so the kernels they wrote stay hidden too."""
    if is_admin(user):
        return Run.objects.none()
    hidden = Run.objects.filter(is_public=False)
    if user is not None and user.is_authenticated:
        hidden = hidden.exclude(owner=user)
    return hidden


def can_write_run(user: Any, run: Run) -> bool:
    return can_write_owned(user, run)


def get_run_for_user(user: Any, pk: int, *, write: bool = False) -> Run:
    """The run if `user` may see it (404 otherwise, so private runs do not leak), and, with write=True,
    may also cancel/pause/resume it (403 otherwise)."""
    try:
        run = visible_runs(user).get(pk=pk)
    except Run.DoesNotExist:
        raise Http404(f"no run with id {pk}") from None
    if write and not can_write_run(user, run):
        raise PermissionDenied(f"only the owner of run {pk} can change it")
    return run


RUN_SCOPES = ("mine", "team", "public")


def run_scope(user: Any, requested: str = "") -> str:
    """The scope the runs list shows: the one asked for, else the signed-in user's own runs; anonymous
    visitors see the public ones whatever they ask for."""
    if user is None or not user.is_authenticated:
        return "public"
    return requested if requested in RUN_SCOPES else "mine"


def find_runs(user: Any, *, scope: str = "", status: str = "", problem: str = "", text: str = "") -> QuerySet[Run]:
    """The runs `user` may see, narrowed by what the runs list and GET /api/runs filter on.

    scope: "" (all visible), "mine", "team" (other people's) or "public"; mine and team are empty for
    anonymous callers. problem: a problem id or slug; text: a part of the problem's slug or title.
    """
    runs = visible_runs(user)
    signed_in = user is not None and user.is_authenticated
    if scope == "mine":
        runs = runs.filter(owner=user) if signed_in else runs.none()
    elif scope == "team":
        runs = runs.exclude(owner=user).filter(owner__isnull=False) if signed_in else runs.none()
    elif scope == "public":
        runs = runs.filter(is_public=True)
    elif scope:
        raise ValidationError(f"unknown scope {scope!r}; expected one of {', '.join(RUN_SCOPES)}")
    if status:
        if status not in RunStatus.values:
            raise ValidationError(f"unknown status {status!r}; expected one of {', '.join(RunStatus.values)}")
        runs = runs.filter(status=status)
    if problem:
        runs = runs.filter(problem_id=int(problem)) if problem.isdigit() else runs.filter(problem__slug=problem)
    if text:
        runs = runs.filter(Q(problem__slug__icontains=text) | Q(problem__title__icontains=text))
    return runs
