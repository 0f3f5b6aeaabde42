"""What a kernel child's `run` reply may hold, checked before any of its arrays is read.

The kernel's process writes its replies, so the parent reads nothing it does not expect: every header field and
array is known, and each part of the reply has its own budget from the problem's declared shapes. A reply that
names anything else is refused (the kernel's runtime_error). This is the plain run of the reference-file
pipeline (outputs, and the inputs as the run left them); a language whose backend records a program adds its
own check of that reply (NKI's: `engine.platforms.nki.roles.record_reply_check`), reusing the pieces here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.evaluator.result import ErrorKind

FAILURE_FIELDS = frozenset({"ok", "kind", "message", "line", "detail", "retry"})
RUN_FIELDS = frozenset({"ok", "output_count", "latency_ms", "trace"})
# Outputs beyond the expected count that a reply may name (a wrong count is `incorrect`, with the shapes).
EXTRA_OUTPUTS = 8
# Room in a reply beyond its arrays' budgets, as much as a recorded trace gets (the frame limit only: each
# part of the reply is held to its own budget by the check).
REPLY_HEADROOM_BYTES = 512 * 1024**2

Layout = list[tuple[str, np.dtype, tuple[int, ...]]]
ReplyCheck = Callable[[dict[str, Any], Layout], "str | None"]


def outputs_bytes(expected: list[np.ndarray]) -> int:
    """Outputs up to twice the expected size: a wrong dtype is reported, not refused."""
    return 2 * sum(e.size * e.dtype.itemsize for e in expected)


def run_reply_budget(inputs: list[np.ndarray], expected: list[np.ndarray]) -> int:
    """A kernel child's run reply: outputs, the inputs after the run, and the headroom."""
    return outputs_bytes(expected) + sum(a.nbytes for a in inputs) + REPLY_HEADROOM_BYTES + 1024**2


def failure_problem(header: dict[str, Any], layout: Layout) -> str | None:
    """What is wrong with a failure reply (None: nothing): only its known fields, a known kind, no arrays."""
    kinds = {k.value for k in ErrorKind}
    unknown = set(header) - FAILURE_FIELDS
    if unknown or header.get("kind") not in kinds or not isinstance(header.get("message", ""), str) \
            or not isinstance(header.get("detail", ""), str) or layout:
        return f"a failure reply with fields {sorted(header)[:8]}, kind {str(header.get('kind'))[:40]!r}"
    line = header.get("line")
    return None if line is None or (isinstance(line, int) and not isinstance(line, bool)) else "a bad line"


def output_count_problem(header: dict[str, Any], expected: list[np.ndarray]) -> str | None:
    """What is wrong with a success reply's fields and output count (None: nothing)."""
    unknown = set(header) - RUN_FIELDS
    if unknown:
        return f"unknown fields {sorted(unknown)[:8]}"
    count = header.get("output_count")
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= len(expected) + EXTRA_OUTPUTS:
        return f"an output count of {str(count)[:40]}"
    return None


def run_reply_check(inputs: list[np.ndarray], expected: list[np.ndarray]) -> ReplyCheck:
    """The check `ChildProcess.receive` applies to a kernel child's plain `run` reply: its outputs and every
    input after the run, a latency if the backend gives one, no trace."""
    after = {f"after{k}" for k in range(len(inputs))}
    budget = outputs_bytes(expected) + 1024 + sum(a.nbytes for a in inputs)

    def check(header: dict[str, Any], layout: Layout) -> str | None:
        if header.get("ok") is not True:
            return failure_problem(header, layout)
        problem = output_count_problem(header, expected)
        if problem:
            return problem
        if isinstance(header.get("trace"), dict):
            return "a trace it should not have"
        if header.get("latency_ms") is not None and not isinstance(header["latency_ms"], (int, float)):
            return "a latency it cannot claim"
        outputs = {f"out{k}" for k in range(header["output_count"])}
        names = [name for name, _dtype, _shape in layout]
        if len(set(names)) != len(names):
            return "an array named twice"
        size = 0
        for name, dtype, shape in layout:
            if name not in outputs and name not in after:
                return f"an unknown array {name[:80]!r}"
            size += math.prod(shape) * dtype.itemsize
        if not all(name in names for name in outputs):
            return "fewer outputs than it announces"
        if not after <= set(names):
            return "not every input after the run"
        if size > budget:
            return f"{size} bytes of outputs, over its budget of {budget} bytes"
        return None

    return check
