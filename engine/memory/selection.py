"""Which optimization-memory entries the Planner is shown: the one rule, with no Django.

`memory.services.select_entries` applies it to the database's entries, and the search's list-backed
double (`engine.search.standalone.ListOptimizationMemory`) to its list, so a test run without a
database sees the same selection as a real one. Keep this module free of Django imports: the pure
search core imports it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from typing import Protocol, TypeVar

from engine.memory.lessons import split_families

# How close an entry is to the problem being optimized (higher is shown first).
SAME_PROBLEM, SAME_FAMILY, UNRELATED = 2, 1, 0

# How the free slots are ranked: a sum a curator can check by hand (docs/architecture.md, "The memory").
PROBLEM_WEIGHT = 4.0  # learned on the problem being optimized
FAMILY_WEIGHT = 2.0  # learned on a problem of the same family
OPERATIONS_WEIGHT = 2.0  # times the share of operations the entry's kernels and this kernel both call
BOTTLENECK_WEIGHT = 1.0  # learned on a kernel bound by what bounds this one (lessons.profile_bottleneck)
EVIDENCE_WEIGHT = 0.25  # times log2 of how many times the lesson was learned


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


def shown_in_language(entry: object, language: str) -> bool:
    """Whether a Planner writing `language` may see the entry: one learned in the same kernel language, or
    one a curator marked as transferring. A blank `language` (the caller does not say) or an entry that
    does not say its language (the search's test double) filters nothing."""
    entry_language = getattr(entry, "language", "")
    if not language or not entry_language:
        return True
    return entry_language == language or bool(getattr(entry, "transfers", False))


def relevance(entry: SelectableEntry, *, problem: object = None, family: str = "") -> int:
    """SAME_PROBLEM, SAME_FAMILY or UNRELATED; a blank `problem` or `family` matches nothing."""
    if problem not in (None, "") and entry.problem == problem:
        return SAME_PROBLEM
    if family and family in split_families(entry.family):  # a merged entry may speak for several families
        return SAME_FAMILY
    return UNRELATED


def score(
    entry: object, *, problem: object = None, family: str = "", operations: frozenset[str] = frozenset(),
    bottleneck: str = "",
) -> float:
    """How relevant an entry is to the kernel at hand, and how well supported. Reads `operations` (the calls
    its kernels make), `bottleneck` and `evidence` (times learned) when the entry has them."""
    tier = relevance(entry, problem=problem, family=family)  # type: ignore[arg-type]
    total = PROBLEM_WEIGHT if tier == SAME_PROBLEM else FAMILY_WEIGHT if tier == SAME_FAMILY else 0.0
    entry_operations = frozenset(getattr(entry, "operations", ()) or ())
    if operations and entry_operations:
        total += OPERATIONS_WEIGHT * len(operations & entry_operations) / len(operations | entry_operations)
    if bottleneck and getattr(entry, "bottleneck", "") == bottleneck:
        total += BOTTLENECK_WEIGHT
    evidence = max(1, int(getattr(entry, "evidence", 1) or 1))
    return total + EVIDENCE_WEIGHT * math.log2(evidence)


def select_for_planner(
    entries_newest_first: Iterable[E], *, limit: int, problem: object = None, family: str = "", language: str = "",
    operations: Iterable[str] = (),
    bottleneck: str = "",
) -> list[E]:
    """The bounded memory given to the Planner.

    Only entries of the Planner's kernel `language` or marked as transferring (`shown_in_language`); of
    those, pinned entries always (even past `limit`), newest first; the remaining slots go to the other
    entries from the same problem first, then the same family, then any, newest first within each tier. The
    caller passes only entries the Planner may see (the memory app leaves pruned ones out), newest first.

    Within the free slots the order is `score`: the problem, then the family, the `operations` the kernel at
    hand calls, its profile's `bottleneck` and the entry's evidence; newest first among equal scores.
    """
    entries = [entry for entry in entries_newest_first if shown_in_language(entry, language)]
    pinned = [entry for entry in entries if entry.pinned]
    free_slots = max(0, limit - len(pinned))
    wanted = frozenset(operations)
    # sorted() is stable, so each tier keeps the newest-first order it was given in.
    others = sorted(
        (entry for entry in entries if not entry.pinned),
        key=lambda entry: -score(entry, problem=problem, family=family, operations=wanted, bottleneck=bottleneck),
    )
    return pinned + others[:free_slots]


def select_accelopt(items_by_iteration: Iterable[tuple[int, E]], *, limit: int, seed: int) -> list[E]:
    """AccelOpt's memory for one problem: the rewrites learned in the latest iteration that learned any, then a
    random sample of the older ones (seeded by `seed` and that iteration) up to `limit` in all."""
    items = list(items_by_iteration)
    if not items or limit <= 0:
        return []
    latest = max(iteration for iteration, _ in items)
    newest = [item for iteration, item in items if iteration == latest][:limit]
    older = [item for iteration, item in items if iteration != latest]
    wanted = min(len(older), limit - len(newest))
    rng = random.Random(f"accelopt-memory:{seed}:{latest}")
    return newest + (rng.sample(older, wanted) if wanted > 0 else [])
