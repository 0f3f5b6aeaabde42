"""No evaluation spent on a candidate that cannot win: identical candidates and the mini stage. Pure Python.

Two rules the run's evaluator (`optimizer.adapters.evaluation.DjangoEvaluator`) applies before it runs a
full-size evaluation:

* **Identical candidates** are answered from the cache: a candidate whose normalized source
  (`engine.evaluator.identity`) equals a stored kernel's (same problem, platform, backend and versions) takes
  that kernel's result (`benchmark.services.identical`).
* **The mini stage**: where the problem has mini shapes and the run asks for it (`SearchConfig.mini_first`),
  a candidate is first evaluated on them; one that fails there (`stops_at_mini`) is recorded as failed with
  `stopped_at_mini_message` and never evaluated at full size. The full-size verdict is the only one that
  counts for a candidate that passes.

Each result handed to the search says which rule answered it (`cascade_stage`, one of `STAGES`); the search
counts them in its `Totals`, so the run page can say what each stage saved.
"""

from __future__ import annotations

INFRASTRUCTURE = "infrastructure_error"

# How a result reached the search (a result's optional `cascade_stage`; none: a plain full-size evaluation).
CACHED = "cached"  # the stored result of the same source (the exact-source cache)
NORMALIZED = "normalized"  # the stored result of an identical source, comments and spacing aside
MINI_STOPPED = "mini_stopped"  # failed on the mini shapes; not evaluated at full size
MINI_PASSED = "mini_passed"  # correct on the mini shapes, then evaluated at full size
STAGES = (CACHED, NORMALIZED, MINI_STOPPED, MINI_PASSED)


def stops_at_mini(correct: bool | None, error_kind: str | None) -> bool:
    """Whether a result on the mini shapes ends the candidate: any failure that is the kernel's. A correct
    result (suspicious or not: the full size decides) goes on; an infrastructure error (ours) says nothing
    about the kernel, so it goes on to full size too."""
    if correct:
        return False
    return error_kind != INFRASTRUCTURE


def stopped_at_mini_message(error_kind: str | None, error_message: str | None) -> str:
    """What a candidate stopped on the mini shapes reads as (the search and the Fixer see it)."""
    error = (error_message or "").strip() or (
        "the output does not match the reference" if error_kind in (None, "", "incorrect") else str(error_kind)
    )
    return f"failed on the mini shapes: {error}; not evaluated at full size"
