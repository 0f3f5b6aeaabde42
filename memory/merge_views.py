"""Curating merges on the memory pages: undo a merge, decide a proposed one. Curators only; every change
goes through memory.learning, which records versions on both entries."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.roles import CURATOR, require_role
from memory import learning, services


@require_role(CURATOR)
@require_POST
def unmerge(request: HttpRequest, pk: int) -> HttpResponse:
    entry = services.get_entry_for_user(request.user, pk, write=True)
    try:
        learning.unmerge_entry(entry, request.user)
    except ValueError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Merge undone: entry #{entry.pk} is back with its own evidence.")
    return redirect(reverse("memory:entry", args=[entry.pk]))


@require_role(CURATOR)
@require_POST
def decide_proposal(request: HttpRequest, pk: int, decision: str) -> HttpResponse:
    proposal = learning.get_proposal_for_user(request.user, pk)
    if proposal is None or decision not in ("accept", "reject"):
        raise Http404(f"no merge proposal {pk} to {decision}")
    try:
        if decision == "accept":
            learning.accept_proposal(proposal, request.user)
            messages.success(request, f"Entry #{proposal.duplicate_id} merged into #{proposal.entry_id}.")
        else:
            learning.reject_proposal(proposal, request.user)
            messages.success(request, f"Entries #{proposal.entry_id} and #{proposal.duplicate_id} kept apart.")
    except ValueError as error:
        messages.error(request, str(error))
    return redirect(reverse("memory:entry", args=[proposal.entry_id]))
