"""How the run page words its events and plans (issue 20): the agent role that acted instead of the event's
type ("Planner", not "plan.proposed"), and an offline rewrite's long rationale once, not under every plan."""

from __future__ import annotations

import re
from typing import Any

from django import template

register = template.Library()

# Who acted, by event type; agent calls name their role from the payload, a written candidate its writer.
EVENT_ACTORS = {
    "plan.proposed": "Planner",
    "candidate.written": "Executor",
    "candidate.evaluated": "Evaluation",
    "memory.added": "Summarizer",
    "beam.selected": "Beam search",
    "iteration.started": "Iteration",
    "iteration.finished": "Iteration",
    "agent.unusable": "Unusable reply",
    "llm.error": "Model endpoint",
}
# An offline plan: "<title> [rewrite <name> #<site>]: <what it changes>. <why: the rewrite's lesson>"
_OFFLINE_PLAN = re.compile(r"^(?P<head>.*?\[rewrite [^\]]+\]: .*?\.)\s+(?P<why>\S.*)$", re.DOTALL)


@register.filter
def event_actor(event: dict[str, Any]) -> str:
    """The role or part of the system an event is about, as the run page names it."""
    kind = str(event.get("kind", ""))
    payload = event.get("payload") or {}
    if kind == "agent.call":
        return str(payload.get("role") or "agent").title()
    if kind == "candidate.written" and payload.get("fix"):
        return "Fixer"
    if kind in EVENT_ACTORS:
        return EVENT_ACTORS[kind]
    return "Run" if kind.startswith("run.") else kind


@register.filter
def plan_parts(text: str) -> tuple[str, str]:
    """(what the plan changes, why) for an offline rewrite's plan; (the whole text, "") for any other plan."""
    match = _OFFLINE_PLAN.match(text or "")
    return (match.group("head"), match.group("why")) if match else (text or "", "")
