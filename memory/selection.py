"""Which optimization-memory entries the Planner is shown: the one rule, with no Django.

`memory.services.select_entries` applies it to the database's entries, and the search's list-backed
double (`optimizer.search.standalone.ListOptimizationMemory`) to its list, so a test run without a
database sees the same selection as a real one. Keep this module free of Django imports: the pure
search core imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

# How close an entry is to the problem being optimized (higher is shown first).
SAME_PROBLEM, SAME_FAMILY, UNRELATED = 2, 1, 0


class SelectableEntry(Protocol):
    """What the rule reads of an entry. `problem` is compared with `==`: a problem's row id in the
    database, its slug in the search's double."""

    @property
    def pinned(self) -> bool: ...

    @property
    def problem(self) -> object: ...

    @property
    def family(self) -> str: ...


E = TypeVar("E", bound=SelectableEntry)


def relevance(entry: SelectableEntry, *, problem: object = None, family: str = "") -> int:
    """SAME_PROBLEM, SAME_FAMILY or UNRELATED; a blank `problem` or `family` matches nothing."""
    if problem not in (None, "") and entry.problem == problem:
        return SAME_PROBLEM
    if family and entry.family == family:
        return SAME_FAMILY
    return UNRELATED


def select_for_planner(
    entries_newest_first: Iterable[E], *, limit: int, problem: object = None, family: str = ""
) -> list[E]:
    """The bounded memory given to the Planner.

    Pinned entries always (even past `limit`), newest first; the remaining slots go to the other entries
    from the same problem first, then the same family, then any, newest first within each tier. The
    caller passes only entries the Planner may see (the memory app leaves pruned ones out), newest first.
    """
    entries = list(entries_newest_first)
    pinned = [entry for entry in entries if entry.pinned]
    free_slots = max(0, limit - len(pinned))
    # sorted() is stable, so each tier keeps the newest-first order it was given in.
    others = sorted(
        (entry for entry in entries if not entry.pinned),
        key=lambda entry: -relevance(entry, problem=problem, family=family),
    )
    return pinned + others[:free_slots]
