"""Whether this server can evaluate a platform's kernels, for pages that must say so before anything is queued."""

from __future__ import annotations

from django import template

from benchmark.services.evaluations import backend_unavailable
from engine.platforms.registry import Backend

register = template.Library()


@register.simple_tag
def triton_unavailable() -> str:
    """Why Triton kernels cannot be evaluated here (the missing packages and the install command), or ""."""
    return backend_unavailable(Backend.TRITON_INTERPRETER.value, "h100") or ""
