"""The four roles played by models behind an OpenAI-compatible endpoint (`LLMClient`).

Each role renders its prompt template, makes one call, and parses the reply; a failed call or an
unusable reply comes back as `AgentResult(value=None, unusable=...)` with the call recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from optimizer.agents import prompting
from optimizer.agents.base import (
    AgentResult,
    CallRecord,
    FixRequest,
    MemoryDraft,
    PlanRequest,
    SummaryRequest,
    WriteRequest,
)
from optimizer.agents.llm import LLMClient
from optimizer.agents.parsing import (
    UnusableReply,
    extract_kernel,
    kernel_function_name,
    parse_plans,
    parse_summary,
)

T = TypeVar("T")


class LLMAgents:
    def __init__(self, client: LLMClient) -> None:
        self.client = client
        models = sorted({client.settings(r).model for r in client.roles})
        self.label = "llm: " + ", ".join(models)

    async def plan(self, request: PlanRequest) -> AgentResult[list[str]]:
        call = await self.client.chat("planner", prompting.planner_messages(request), seed=request.seed)
        return _parsed("planner", call, lambda reply: parse_plans(reply, request.count))

    async def write(self, request: WriteRequest) -> AgentResult[str]:
        call = await self.client.chat("executor", prompting.executor_messages(request), seed=request.seed)
        name = kernel_function_name(request.kernel.source)
        return _parsed("executor", call, lambda reply: extract_kernel(reply, name))

    async def fix(self, request: FixRequest) -> AgentResult[str]:
        call = await self.client.chat("fixer", prompting.fixer_messages(request), seed=request.seed)
        name = kernel_function_name(request.kernel.source)
        return _parsed("fixer", call, lambda reply: extract_kernel(reply, name))

    async def summarize(self, request: SummaryRequest) -> AgentResult[MemoryDraft]:
        call = await self.client.chat("summarizer", prompting.summarizer_messages(request), seed=request.seed)
        return _parsed("summarizer", call, parse_summary)


def _parsed(role: str, call: CallRecord, parse: Callable[[str], T]) -> AgentResult[T]:
    """The reply of one call read by `parse`, or why there is none: the call failed, or the reply was
    unusable. Every role ends this way."""
    if call.error:
        return AgentResult(None, [call], unusable=f"{role} call failed: {call.error}")
    try:
        return AgentResult(parse(call.response), [call])
    except UnusableReply as exc:
        return AgentResult(None, [call], unusable=_unusable(role, exc, call.finish_reason))


def _unusable(role: str, exc: UnusableReply, finish_reason: str) -> str:
    suffix = " (the reply hit the max-tokens limit)" if finish_reason == "length" else ""
    return f"unusable {role} reply: {exc}{suffix}"
