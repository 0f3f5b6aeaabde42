"""Template tags of the memory pages: an entry's evidence and merges, and the merges proposed to curators."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import mark_safe

from memory import learning, services
from memory.markdown import render_markdown
from memory.models import MemoryEntry

register = template.Library()


@register.inclusion_tag("memory/partials/evidence.html", takes_context=True)
def memory_evidence(context: dict[str, Any], entry: MemoryEntry, can_curate: bool = False) -> dict[str, Any]:
    """How often the lesson was learned, its speedup range, the problems it held on, every source pair, and
    the entries merged into it (or the one it was merged into), with the curator's undo: only what the reader
    may see (memory.services.visible_entries)."""
    user = _reader(context)
    visible = services.visible_entries(user)
    proposals = _visible_proposals(user)
    return {
        "entry": entry,
        "can_curate": can_curate,
        "evidence": learning.evidence_summary(entry, user),
        "merged_entries": list(visible.filter(merged_into=entry).order_by("id")),
        "merged_into_visible": visible.filter(pk=entry.merged_into_id).exists(),
        "proposals": list(proposals.filter(entry=entry)) + list(proposals.filter(duplicate=entry)),
        "csrf_token": context.get("csrf_token"),
    }


def _reader(context: dict[str, Any]) -> Any:
    request = context.get("request")
    return getattr(request, "user", None)


def _visible_proposals(user: Any) -> Any:
    """Open merge proposals whose two entries `user` may both read."""
    visible = services.visible_entries(user).values("pk")
    return learning.open_proposals().filter(entry__in=visible, duplicate__in=visible)


@register.inclusion_tag("memory/partials/merge_proposals.html", takes_context=True)
def memory_merge_proposals(context: dict[str, Any], can_curate: bool = False) -> dict[str, Any]:
    return {"proposals": list(_visible_proposals(_reader(context))[:50]), "can_curate": can_curate,
            "csrf_token": context.get("csrf_token"), "request": context.get("request")}


@register.filter
def markdown_text(source: str | None) -> str:
    """A summary's Markdown as HTML (escaped first: memory.markdown)."""
    return mark_safe(render_markdown(source or ""))  # noqa: S308 - render_markdown escapes everything first


@register.filter
def entry_effect(entry: MemoryEntry) -> str:
    """An entry's effect as its rewrite had it: a positive one's speedup (1.73×), a negative one's slowdown
    (0.58×: the stored ratio is slow over fast, always >= 1, as AccelOpt keeps it)."""
    if not entry.speedup:
        return "—"
    if entry.polarity == "negative":
        return f"{1 / entry.speedup:.2f}× (slower)"
    return f"{entry.speedup:.2f}×"
