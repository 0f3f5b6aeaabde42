"""Template filters of the run pages."""

from __future__ import annotations

import re

from django import template

register = template.Library()


@register.filter
def domkey(value: object) -> str:
    """A search key such as "2.0.3.1" or "2.0.3.1#fix1" as a fragment of an HTML id ("2-0-3-1")."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", str(value)).strip("-")


@register.filter
def short_sha(value: object) -> str:
    return str(value or "")[:10]


@register.filter
def usd(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


@register.filter
def run_cost(run: object) -> str:
    """A run's LLM cost, or "unknown cost" when a call's cost is unknown (no usage reported, or no price): never
    a partial sum shown as the cost."""
    if not getattr(run, "cost_known", True):
        return "unknown cost"
    return usd(getattr(run, "cost_usd", None))


@register.filter
def speedup(value: float | None) -> str:
    return "—" if not value else f"{value:.2f}×"  # 0 is no speedup: no timed kernel
