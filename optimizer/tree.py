"""The search tree of a run: every kernel it wrote as a node under its parent, and what one node holds.

Services for the run page's tree panel (views.run_tree, views.tree_node). A node is the run's starting kernel
(key "start") or one Candidate (its key "<iteration>.<beam>.<plan>.<sample>"); its parent is the node that
wrote the candidate's parent kernel (the candidate kept in the beam when the same kernel was written twice).
Two queries build the whole tree, so a run of a few hundred kernels renders in one response; a node's
details (plan, the memory the Planner was shown, agent calls, evaluation, diff) load only when it is opened.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q
from django.http import Http404

from benchmark.diffing import changed_line_count, side_by_side
from benchmark.models import Kernel
from memory.services import visible_entries
from optimizer.models import AgentCall, Candidate, CandidateStatus, Run, RunEvent

START = "start"
# Outcome -> label, in the legend's order.
OUTCOMES = {
    "start": "start",
    "faster": "faster than its parent",
    "slower": "not faster",
    "incorrect": "incorrect",
    "failed": "failed (no kernel, or it did not run)",
    "held": "held for review",
    "pending": "not evaluated yet",
}


@dataclass
class TreeNode:
    key: str
    iteration: int
    outcome: str
    kernel_id: int | None = None
    speedup: float | None = None  # over its parent
    latency_ms: float | None = None
    chosen: bool = False
    plan: str = ""
    children: list[TreeNode] = field(default_factory=list)

    @property
    def bar(self) -> int:
        """Width (0-100) of the speedup bar: log-scaled, 1x at 50, 4x and 1/4x at the ends."""
        if not self.speedup or self.speedup <= 0:
            return 0
        return max(2, min(100, round(50 + 25 * math.log2(self.speedup))))


def candidate_outcome(status: str, correct: bool | None, speedup: float | None, error: str,
                      error_kind: str = "", review: str = "") -> str:
    """The colour of a node: faster, slower, incorrect, failed, held or pending."""
    if status == CandidateStatus.UNUSABLE:
        return "failed"
    if status != CandidateStatus.EVALUATED:
        return "pending"
    if correct and (error_kind == "suspicious" or review in ("held", "rejected") or error.startswith("held for review")):
        return "held"
    if correct:
        return "faster" if speedup is not None and speedup > 1.0 else "slower"
    if error_kind in ("", "incorrect"):
        return "incorrect"
    return "failed"


def run_tree(run: Run) -> tuple[TreeNode, dict[str, int]]:
    """The whole tree from the starting kernel, and the number of nodes per outcome."""
    root = TreeNode(key=START, iteration=0, outcome="start", kernel_id=run.start_kernel_id,
                    latency_ms=run.start_latency_ms)
    rows = (
        Candidate.objects.filter(iteration__run=run)
        .order_by("iteration__index", "id")
        .values("key", "iteration__index", "status", "correct", "speedup", "latency_ms", "error", "chosen", "plan",
                "kernel_id", "parent_kernel_id", "evaluation__error_kind", "evaluation__review")
    )
    writer: dict[int, TreeNode] = {run.start_kernel_id: root}  # kernel id -> the node that wrote it
    counts = {outcome: 0 for outcome in OUTCOMES}
    counts["start"] = 1
    for row in rows:
        node = TreeNode(
            key=row["key"], iteration=row["iteration__index"], kernel_id=row["kernel_id"], speedup=row["speedup"],
            latency_ms=row["latency_ms"], chosen=row["chosen"], plan=row["plan"],
            outcome=candidate_outcome(row["status"], row["correct"], row["speedup"], row["error"] or "",
                                      row["evaluation__error_kind"] or "", row["evaluation__review"] or ""),
        )
        counts[node.outcome] += 1
        writer.get(row["parent_kernel_id"], root).children.append(node)
        if node.kernel_id is not None and (node.kernel_id not in writer or node.chosen):
            writer[node.kernel_id] = node
    return root, counts


def tree_node(user: Any, run: Run, key: str) -> dict[str, Any]:
    """Everything the tree shows for one node: its candidate (None for the start), the plan, the memory entries
    the Planner was shown for that plan, the agent calls behind it, its evaluation and a diff against its parent."""
    if key == START:
        kernel = Kernel.objects.get(pk=run.start_kernel_id)
        return {"key": START, "candidate": None, "kernel": kernel, "parent": None, "memory": [], "calls": [],
                "rows": side_by_side("", kernel.source), "changed": 0}
    candidate = (
        Candidate.objects.filter(iteration__run=run, key=key)
        .select_related("iteration", "kernel", "parent_kernel", "evaluation").first()
    )
    if candidate is None:
        raise Http404(f"run {run.pk} has no kernel {key!r} in its search tree")
    plan_key = key.rsplit(".", 1)[0]
    rows = side_by_side(candidate.parent_kernel.source, candidate.kernel.source) if candidate.kernel else []
    return {
        "key": key, "candidate": candidate, "kernel": candidate.kernel, "parent": candidate.parent_kernel,
        "memory": _memory_shown(user, run, candidate.iteration.index, plan_key),
        "calls": _agent_calls(run, candidate, plan_key),
        "rows": rows, "changed": changed_line_count(rows),
    }


def _memory_shown(user: Any, run: Run, iteration: int, plan_key: str) -> list[dict[str, Any]]:
    """The entries in the Planner's context for this plan (recorded on its plan.proposed event), each with the
    stored entry when it still exists and the user may read it."""
    event = (
        RunEvent.objects.filter(run=run, kind="plan.proposed", payload__plan_key=plan_key)
        .values_list("payload", flat=True).first()
    )
    shown = list((event or {}).get("memory") or [])
    keys = [str(item.get("key") or "") for item in shown]
    # An entry is named by its source key, or "memory:<pk>" when it has none (one a curator wrote).
    pks = [int(key.split(":", 1)[1]) for key in keys if key.startswith("memory:") and key[7:].isdigit()]
    entries = visible_entries(user).filter(Q(source_key__in=[k for k in keys if k]) | Q(pk__in=pks)) if keys else []
    stored = {}
    for entry in entries:
        stored[f"memory:{entry.pk}"] = entry
        if entry.source_key:
            stored[entry.source_key] = entry
    return [{**item, "entry": stored.get(str(item.get("key") or ""))} for item in shown]


def _agent_calls(run: Run, candidate: Candidate, plan_key: str) -> list[AgentCall]:
    """The Planner call(s) that proposed the plan, then the Executor, Fixer and Summarizer calls of the kernel."""
    beam_key = plan_key.rsplit(".", 1)[0]
    planner_ids = [
        payload.get("agent_call") for payload in RunEvent.objects.filter(
            run=run, kind="agent.call", payload__iteration=candidate.iteration.index, payload__role="planner",
        ).values_list("payload", flat=True)
        if payload.get("task_key") in (beam_key, plan_key)
    ]
    planners = list(AgentCall.objects.filter(pk__in=[i for i in planner_ids if i]).order_by("id"))
    # A Planner asked N times for one plan each: keep the call whose reply holds this plan, when one does.
    plan = candidate.plan.strip()
    holding = [call for call in planners if plan and plan in call.response]
    return (holding or planners) + list(candidate.agent_calls.order_by("id"))
