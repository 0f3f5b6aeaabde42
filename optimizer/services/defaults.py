"""The one set of search defaults a run starts from, and reading search parameters into a SearchConfig."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from engine.search import SearchConfig

# The one set of search defaults (issue 20): the run form, POST /api/runs and `manage.py optimize` all fill unset
# fields from here. AccelOpt's breadth per iteration, fewer iterations, so a first run finishes in minutes;
# SearchConfig's own defaults (the paper's 15 iterations, beam 6) are what a campaign asks for explicitly.
RUN_SEARCH_DEFAULTS: dict[str, int] = {
    "iterations": 4,
    "beam_width": 2,
    "plans_per_candidate": 4,
    "samples_per_plan": 1,
    "memory_size": SearchConfig.memory_size,
    "seed": 0,
}


def search_config(params: dict[str, Any] | None) -> SearchConfig:
    try:
        return SearchConfig.from_dict({**RUN_SEARCH_DEFAULTS, **dict(params or {})})
    except (TypeError, ValueError) as error:
        raise ValidationError(f"invalid search parameters: {error}") from None
