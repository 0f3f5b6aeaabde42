"""Runs whose evaluations measure no latency (`SearchConfig.correctness_only`: a correctness-only backend
such as the Triton interpreter, which runs kernels on the CPU and times nothing). Pure Python, no Django.

What changes in such a run, and nothing else (a measured run keeps every rule of `beam.py`):

* a kernel enters the beam when it is correct and not suspicious, timed or not: "correct, unmeasured";
* the beam is ordered by correctness first, then latency where one exists, then age (the old beam first),
  so nothing is ranked by a speedup that was never measured, and no speedup is computed;
* the starting kernel may fail its check (a kernel to repair): it stays in the beam, below every correct
  kernel, and is planned from until correct rewrites of it fill the beam;
* lessons: a rewrite of a correct kernel that failed its check becomes a negative memory entry (with the
  failure, and a speedup of 1.0 that is not a measurement); no positive entry is written without a latency.
"""

from __future__ import annotations

import math

from engine.agents.base import NEGATIVE
from engine.search.state import INFRASTRUCTURE, BeamMember, CandidateRecord, Evaluation, RewriteRecord

FAILED_REWRITE_SPEEDUP = 1.0  # what a failed rewrite's memory entry says for its speedup: none was measured


def admitted(ev: Evaluation | None, correctness_only: bool) -> bool:
    """Whether a candidate with this evaluation may enter the beam."""
    if ev is None:
        return False
    return ev.correct and not ev.suspicious if correctness_only else ev.usable


def beam_key(member: BeamMember, order: int) -> tuple[bool, float, int]:
    """Correct before incorrect, then faster, then older; in a measured run every member is correct and
    timed, so this is the latency order."""
    latency = member.latency_ms if member.latency_ms is not None else math.inf
    return (not member.correct, latency, order)


def start_refusal(ev: Evaluation, correctness_only: bool) -> str:
    """Why the starting kernel cannot start a run ('' when it can)."""
    what = f"{ev.error_kind or 'incorrect'}: {ev.error_message or 'no latency'}"
    if not correctness_only:
        return "" if ev.usable else f"the starting kernel cannot be optimized: it is not a correct, timed kernel ({what})"
    if ev.suspicious or ev.error_kind == INFRASTRUCTURE:
        return f"the starting kernel cannot be optimized: its evaluation says nothing about it ({what})"
    return ""


def failed_rewrites(candidates: list[CandidateRecord], evaluations: dict[str, Evaluation],
                    limit: int) -> list[RewriteRecord]:
    """Per plan none of whose kernels was correct, its first kernel (by key) that failed its check although
    the kernel it rewrote was correct: at most `limit`, in plan order. A plan that only failed to repair an
    already failing kernel teaches nothing, nor does a failure of our infrastructure or a held result."""
    by_plan: dict[str, list[CandidateRecord]] = {}
    for c in candidates:
        by_plan.setdefault(c.plan_key, []).append(c)
    records = []
    for plan_key in sorted(by_plan, key=_key_order):
        group = sorted(by_plan[plan_key], key=lambda c: _key_order(c.key))
        if any(admitted(evaluations.get(c.sha or ""), True) for c in group):
            continue
        for c in group:
            ev, parent = evaluations.get(c.sha or ""), evaluations.get(c.parent_sha)
            if (ev is None or ev.correct or ev.suspicious or ev.error_kind == INFRASTRUCTURE
                    or parent is None or not parent.correct):
                continue
            failure = f"{ev.error_kind or 'incorrect'}: {ev.error_message or 'the output does not match the reference'}"
            records.append(RewriteRecord(c.key, NEGATIVE, FAILED_REWRITE_SPEEDUP, slow_sha=c.sha or "",
                                         fast_sha=c.parent_sha, failure=failure))
            break
    return records[:limit]


def _key_order(key: str) -> tuple[int, ...]:
    return tuple(int(part) for part in key.split(".") if part.isdigit())
