"""Whether this server can evaluate a platform's kernels, for pages that must say so before anything is queued."""

from __future__ import annotations

from django import template

from benchmark.services.evaluations import backend_unavailable
from engine.platforms.registry import get_definition

register = template.Library()


@register.simple_tag
def default_backend_unavailable(platform: str) -> str:
    """Why `platform`'s default backend cannot evaluate kernels here (for Triton's: the missing packages and the
    install command), or ""."""
    return backend_unavailable(get_definition(platform).default_backend.value, platform) or ""
