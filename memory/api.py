"""The memory app's part of the API; accelopt_site/api.py mounts this router under /api/.

Engineers read the optimization memory and export it; curators add, edit, pin, prune, restore and
import entries. Every change is recorded in the entry's history. Export and import use the JSON list
format of the public AccelOpt scripts (slow_kernel, fast_kernel, speedup, title, summary, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.http import HttpRequest
from ninja import Body, Field, Router, Schema, Status
from ninja.errors import HttpError

from accounts.auth import api_role
from accounts.roles import CURATOR, ENGINEER
from engine.platforms.registry import language_choices
from memory import services
from memory.models import EntryStatus, MemoryEntry, Polarity

router = Router()

MAX_PAGE = 200


class ErrorOut(Schema):
    detail: str


class VersionOut(Schema):
    number: int
    change: str
    title: str
    summary: str
    status: str
    transfers: bool
    changed_by: str | None
    changed_at: datetime


class EntryOut(Schema):
    id: int
    title: str
    summary: str
    speedup: float
    polarity: str
    status: str
    family: str
    language: str  # the kernel language it was learned in ("nki", "triton")
    transfers: bool  # a curator says it holds in other languages too: shown to every Planner
    problem_id: int | None
    source_kind: str
    source_run_id: int | None
    source_candidate_id: int | None
    source_label: str
    created_by: str | None
    created_at: datetime
    updated_at: datetime


class EntryDetailOut(EntryOut):
    slow_kernel: str
    fast_kernel: str
    versions: list[VersionOut]


class EntryIn(Schema):
    title: str
    summary: str = ""
    slow_kernel: str
    fast_kernel: str
    speedup: float = Field(gt=0)
    polarity: str = Polarity.POSITIVE
    family: str = ""


class EntryEdit(Schema):
    title: str | None = None
    summary: str | None = None


class BulkPruneIn(Schema):
    ids: list[int]


class BulkPruneOut(Schema):
    pruned: int


class ImportOut(Schema):
    created: int
    duplicates: int
    skipped_empty: int
    ids: list[int]


def _user_name(user: Any) -> str | None:
    return user.get_username() if user is not None else None


def _entry_out(entry: MemoryEntry, *, detail: bool = False) -> dict[str, Any]:
    data = {
        "id": entry.pk,
        "title": entry.title,
        "summary": entry.summary,
        "speedup": entry.speedup,
        "polarity": entry.polarity,
        "status": entry.status,
        "family": entry.family,
        "language": entry.language,
        "transfers": entry.transfers,
        "problem_id": entry.problem_id,
        "source_kind": entry.source_kind,
        "source_run_id": entry.source_run_id,
        "source_candidate_id": entry.source_candidate_id,
        "source_label": entry.source_label,
        "created_by": _user_name(entry.created_by),
        "created_at": entry.created_at,
        "updated_at": entry.updated_at,
    }
    if detail:
        data["slow_kernel"] = entry.slow_kernel
        data["fast_kernel"] = entry.fast_kernel
        data["versions"] = [
            {
                "number": v.number,
                "change": v.change,
                "title": v.title,
                "summary": v.summary,
                "status": v.status,
                "transfers": v.transfers,
                "changed_by": _user_name(v.changed_by),
                "changed_at": v.changed_at,
            }
            for v in services.entry_history(entry)
        ]
    return data


def _entry_for(request: HttpRequest, entry_id: int, *, write: bool = False) -> MemoryEntry:
    return services.get_entry_for_user(request.auth, entry_id, write=write)


@router.get("/memory", auth=api_role(ENGINEER), response={200: list[EntryOut], 400: ErrorOut},
            summary="Search the optimization memory")
def list_entries(
    request: HttpRequest,
    q: str = "",
    family: str = "",
    polarity: str = "",
    status: str = "",
    min_speedup: float | None = None,
    max_speedup: float | None = None,
    run: int | None = None,
    problem: int | None = None,
    language: str = "",
    limit: int = 50,
    offset: int = 0,
) -> list[dict[str, Any]]:
    if polarity and polarity not in Polarity.values:
        raise HttpError(400, f"unknown polarity {polarity!r}; expected one of {', '.join(Polarity.values)}")
    if status and status not in EntryStatus.values:
        raise HttpError(400, f"unknown status {status!r}; expected one of {', '.join(EntryStatus.values)}")
    known = [value for value, _ in language_choices()]
    if language and language not in known:
        raise HttpError(400, f"unknown language {language!r}; expected one of {', '.join(known)}")
    entries = services.filter_entries(
        services.visible_entries(request.auth), text=q, family=family, polarity=polarity, status=status,
        min_speedup=min_speedup, max_speedup=max_speedup, source_run_id=run, problem_id=problem, language=language,
    )
    start, limit = max(0, offset), max(1, min(limit, MAX_PAGE))
    return [_entry_out(entry) for entry in entries[start : start + limit]]


@router.get("/memory/export", auth=api_role(ENGINEER), response=list[dict[str, Any]],
            summary="Export the memory (not pruned) as an AccelOpt experience list")
def export_entries(request: HttpRequest) -> list[dict[str, Any]]:
    return services.export_entries(services.visible_entries(request.auth).exclude(
        status__in=[EntryStatus.PRUNED, EntryStatus.PROPOSED]))


@router.post("/memory/import", auth=api_role(CURATOR), response={200: ImportOut, 400: ErrorOut},
             summary="Import an AccelOpt experience list (all or nothing; duplicates skipped)")
def import_entries(request: HttpRequest, payload: list[dict[str, Any]] = Body(...)) -> dict[str, Any]:  # noqa: B008
    report = services.import_entries(payload, request.auth)  # a MemoryImportError is a ValueError: 400
    return {
        "created": len(report.created),
        "duplicates": report.duplicates,
        "skipped_empty": report.skipped_empty,
        "ids": [entry.pk for entry in report.created],
    }


@router.post("/memory", auth=api_role(CURATOR), response={201: EntryDetailOut, 400: ErrorOut},
             summary="Add an entry written by a person")
def create_entry(request: HttpRequest, payload: EntryIn) -> Status:
    entry = services.add_entry(
        title=payload.title, summary=payload.summary, slow_kernel=payload.slow_kernel,
        fast_kernel=payload.fast_kernel, speedup=payload.speedup, polarity=payload.polarity,
        family=payload.family, user=request.auth,
    )
    return Status(201, _entry_out(entry, detail=True))


@router.get("/memory/{int:entry_id}", auth=api_role(ENGINEER), response={200: EntryDetailOut, 404: ErrorOut},
            summary="Read an entry with its kernels and history")
def read_entry(request: HttpRequest, entry_id: int) -> dict[str, Any]:
    return _entry_out(_entry_for(request, entry_id), detail=True)


@router.patch("/memory/{int:entry_id}", auth=api_role(CURATOR),
              response={200: EntryDetailOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut},
              summary="Edit an entry's title and/or summary")
def edit_entry(request: HttpRequest, entry_id: int, payload: EntryEdit) -> dict[str, Any]:
    entry = _entry_for(request, entry_id, write=True)
    entry = services.edit_entry(entry, request.auth, title=payload.title, summary=payload.summary)
    return _entry_out(entry, detail=True)


def _curation(action: Callable[..., MemoryEntry]) -> Callable[[HttpRequest, int], dict[str, Any]]:
    def endpoint(request: HttpRequest, entry_id: int) -> dict[str, Any]:
        return _entry_out(action(_entry_for(request, entry_id, write=True), request.auth), detail=True)

    return endpoint


_CURATION_RESPONSES = {200: EntryDetailOut, 403: ErrorOut, 404: ErrorOut}
for _name, _action, _summary in (
    ("pin", services.pin_entry, "Pin an entry (always given to the Planner)"),
    ("unpin", services.unpin_entry, "Unpin an entry"),
    ("prune", services.prune_entry, "Prune an entry (never given to the Planner; reversible)"),
    ("restore", services.restore_entry, "Restore a pruned entry"),
    ("accept", services.accept_entry, "Accept a proposed lesson: Planners may then be shown it (prune to reject)"),
    ("transfers", lambda entry, user: services.set_transfers(entry, True, user),
     "Mark an entry as transferring: shown to Planners of every kernel language"),
    ("stays", lambda entry, user: services.set_transfers(entry, False, user),
     "Mark an entry as for its own kernel language only (the default)"),
):
    router.post(f"/memory/{{int:entry_id}}/{_name}", auth=api_role(CURATOR), response=_CURATION_RESPONSES,
                summary=_summary, operation_id=f"memory_{_name}", url_name=f"memory-{_name}")(_curation(_action))


@router.post("/memory/prune", auth=api_role(CURATOR), response=BulkPruneOut, summary="Prune several entries")
def bulk_prune(request: HttpRequest, payload: BulkPruneIn) -> dict[str, Any]:
    return {"pruned": services.prune_visible_entries(request.auth, payload.ids)}
