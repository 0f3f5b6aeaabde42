"""Links an app above the optimizer adds to a run's page, such as the campaign a run belongs to.

The optimizer must not import those apps (dependencies point campaigns -> optimizer: docs/architecture.md), so
an app registers a lookup in its `ready()`, as campaigns registers its run-event listener
(`optimizer.events.register_event_listener`), and the run page shows what the lookups return.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from optimizer.models import Run


@dataclass(frozen=True)
class RunLink:
    """One line under a run's heading: "<label> <a href=url>text</a>"."""

    label: str  # "Part of campaign"
    text: str  # the linked object's title
    url: str


# Called with (run, the user viewing it); returns a link the user may follow, or None. Each costs the run page
# its own queries, so a lookup should need one.
RunLinkLookup = Callable[[Run, Any], RunLink | None]
_lookups: list[RunLinkLookup] = []


def register_run_link(lookup: RunLinkLookup) -> None:
    if lookup not in _lookups:
        _lookups.append(lookup)


def run_links(run: Run, user: Any) -> list[RunLink]:
    """Every registered app's link for this run and user, in registration order."""
    return [link for lookup in _lookups if (link := lookup(run, user)) is not None]
