"""HTML pages of the memory app: the browser, an entry's page, curation, import and export.

Engineers read the memory; curators change it (memory.services decides both). Every change goes through
memory.services, which records who made it and when.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.roles import CURATOR, ENGINEER, require_role
from benchmark.diffing import changed_line_count, side_by_side
from memory import services
from memory.forms import EntryEditForm, EntryFilterForm, ImportForm
from memory.models import EntryStatus, MemoryEntry

ENTRIES_PER_PAGE = 50


def _next(request: HttpRequest, default: str) -> str:
    """Where to go after a curator action: a path on this site only (never an open redirect)."""
    target = request.POST.get("next") or ""
    return target if target.startswith("/") and not target.startswith("//") else default


def _filtered(request: HttpRequest) -> tuple[EntryFilterForm, Any]:
    entries = services.visible_entries(request.user)
    form = EntryFilterForm(request.GET or None, families=services.entry_families())
    data = form.cleaned_data if form.is_valid() else {}
    status = data.get("status") or ""
    if status == "":
        entries = entries.exclude(status__in=[EntryStatus.PRUNED, EntryStatus.MERGED])  # merged: counted elsewhere
    entries = services.filter_entries(
        entries,
        text=(data.get("q") or "").strip(),
        family=data.get("family") or "",
        polarity=data.get("polarity") or "",
        status="" if status in ("", "all") else status,
        min_speedup=data.get("min_speedup"),
        max_speedup=data.get("max_speedup"),
        source_run_id=data.get("run"),
        language=data.get("language") or "",
    )
    return form, entries


@require_role(ENGINEER)
@require_GET
def entry_list(request: HttpRequest) -> HttpResponse:
    form, entries = _filtered(request)
    page = Paginator(entries.order_by("-created_at", "-id"), ENTRIES_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "memory/entry_list.html", {
        "form": form,
        "page": page,
        "query": query.urlencode(),
        "filtered": any(v for k, v in request.GET.items() if k != "page"),
        "any_entries": services.visible_entries(request.user).exists(),
        "can_curate": services.can_curate_memory(request.user),
    })


@require_role(ENGINEER)
@require_GET
def entry_detail(request: HttpRequest, pk: int) -> HttpResponse:
    entry = services.get_entry_for_user(request.user, pk)
    rows = side_by_side(entry.slow_kernel, entry.fast_kernel)
    return render(request, "memory/entry_detail.html", {
        "entry": entry,
        "rows": rows,
        "changed": changed_line_count(rows),
        "versions": services.entry_history(entry, newest_first=True),
        "can_curate": services.can_curate_memory(request.user),
    })


@require_role(CURATOR)
@require_http_methods(["GET", "POST"])
def entry_edit(request: HttpRequest, pk: int) -> HttpResponse:
    entry = services.get_entry_for_user(request.user, pk, write=True)
    form = EntryEditForm(request.POST or None, instance=MemoryEntry(title=entry.title, summary=entry.summary))
    if request.method == "POST" and form.is_valid():
        try:
            services.edit_entry(entry, request.user, title=form.cleaned_data["title"],
                                summary=form.cleaned_data["summary"])
        except ValueError as error:
            form.add_error("title", str(error))
        else:
            messages.success(request, "Saved; the change is in the entry's history.")
            return redirect("memory:entry", pk=entry.pk)
    return render(request, "memory/entry_edit.html", {"entry": entry, "form": form})


@require_role(CURATOR)
@require_POST
def entry_revert(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    """Put back the title and summary of an earlier version (recorded as a new edit, so it can be undone too)."""
    entry = services.get_entry_for_user(request.user, pk, write=True)
    if not entry.versions.filter(number=number).exists():
        raise Http404(f"memory entry {pk} has no version {number}")
    services.revert_entry(entry, number, request.user)
    messages.success(request, f"Put back the title and summary of version {number}; the change is in the history.")
    return redirect("memory:entry", pk=entry.pk)


def _mark_transfers(entry: MemoryEntry, user: Any) -> MemoryEntry:
    return services.set_transfers(entry, True, user)


def _mark_stays(entry: MemoryEntry, user: Any) -> MemoryEntry:
    return services.set_transfers(entry, False, user)


ACTIONS = {
    "pin": services.pin_entry,
    "unpin": services.unpin_entry,
    "prune": services.prune_entry,
    "restore": services.restore_entry,
    "accept": services.accept_entry,  # a proposed lesson enters the memory
    # Whether the lesson is shown to Planners of other kernel languages (NKI, Triton) too.
    "transfers": _mark_transfers,
    "stays": _mark_stays,
}


@require_role(CURATOR)
@require_POST
def entry_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    if action not in ACTIONS:
        raise Http404(f"no memory action {action!r}; expected one of {', '.join(ACTIONS)}")
    entry = services.get_entry_for_user(request.user, pk, write=True)
    entry = ACTIONS[action](entry, request.user)
    if action in ("transfers", "stays"):
        shown = "Planners of every language" if entry.transfers else f"{entry.language} Planners only"
        messages.success(request, f"Entry {entry.pk} is now shown to {shown}.")
    else:
        messages.success(request, f"Entry {entry.pk} is now {entry.status}.")
    return redirect(_next(request, reverse("memory:entry", args=[entry.pk])))


@require_role(CURATOR)
@require_POST
def bulk_prune(request: HttpRequest) -> HttpResponse:
    ids = [int(value) for value in request.POST.getlist("entries") if value.isdigit()]
    if not ids:
        messages.error(request, "Select the entries to prune first.")
    else:
        changed = services.prune_visible_entries(request.user, ids)
        messages.success(request, f"Pruned {changed} entr{'y' if changed == 1 else 'ies'}; restore any of them from its page.")
    return redirect(_next(request, reverse("memory:entries")))


@require_role(ENGINEER)
@require_GET
def export_view(request: HttpRequest) -> HttpResponse:
    """The entries matching the browser's filters (pruned ones only if asked for) as AccelOpt JSON."""
    _, entries = _filtered(request)
    response = JsonResponse(services.export_entries(entries.select_related("problem")), safe=False,
                            json_dumps_params={"indent": 1})
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response["Content-Disposition"] = f'attachment; filename="accelopt-memory-{stamp}.json"'
    return response


@require_role(CURATOR)
@require_http_methods(["GET", "POST"])
def import_view(request: HttpRequest) -> HttpResponse:
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            data = json.loads(form.cleaned_data["file"].read().decode("utf-8"))
            report = services.import_entries(data, request.user)
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            form.add_error("file", f"not a UTF-8 JSON file: {error}")
        except services.MemoryImportError as error:
            form.add_error("file", str(error))
        except PermissionDenied:
            raise
        else:
            messages.success(request, f"{str(report)[0].upper()}{str(report)[1:]}.")
            return redirect("memory:entries")
    return render(request, "memory/import.html", {"form": form})
