"""The four roles played by models behind an OpenAI-compatible endpoint (`LLMClient`).

Each role renders its prompt template, makes its call, and parses the reply; a failed call or an
unusable reply comes back as `AgentResult(value=None, unusable=...)` with the call recorded.

As in AccelOpt: the Planner is asked `count` times independently for one plan each, each call shown the
profile's fields in its own seeded order; an Executor or Fixer reply may be the kernel without its imports
(the platform's standard imports are added, `imports.complete_imports`).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from engine.agents import prompting
from engine.agents.base import (
    AgentResult,
    CallRecord,
    FixRequest,
    MemoryDraft,
    PlanRequest,
    ProblemContext,
    SummaryRequest,
    WriteRequest,
)
from engine.agents.imports import complete_imports, in_target_generation
from engine.agents.llm import LLMClient
from engine.agents.parsing import (
    UnusableReply,
    extract_kernel,
    kernel_function_name,
    parse_plans,
    parse_summary,
    strip_reasoning,
)
from engine.platforms.registry import get_definition

T = TypeVar("T")


class LLMAgents:
    def __init__(self, client: LLMClient) -> None:
        self.client = client
        models = sorted({client.settings(r).model for r in client.roles})
        self.label = "llm: " + ", ".join(models)

    async def plan(self, request: PlanRequest) -> AgentResult[list[str]]:
        """`request.count` independent calls for one plan each (concurrently, within the client's limit)."""
        one = replace(request, count=1)
        seeds = [call_seed(request.seed, index) for index in range(request.count)]
        calls = await asyncio.gather(*(
            self.client.chat("planner", prompting.planner_messages_shuffled(one, seed), seed=seed) for seed in seeds
        ))
        results = [_parsed("planner", call, parse_one_plan) for call in calls]
        plans = [result.value for result in results if result.value]
        if not plans:
            reasons = sorted({result.unusable for result in results})
            return AgentResult(None, list(calls), unusable="; ".join(reasons)[:2000] or "no planner call was made")
        return AgentResult(plans, list(calls))

    async def write(self, request: WriteRequest) -> AgentResult[str]:
        call = await self.client.chat("executor", prompting.executor_messages(request), seed=request.seed)
        return _parsed("executor", call, lambda reply: _kernel_of(reply, request.kernel.source, request.problem))

    async def fix(self, request: FixRequest) -> AgentResult[str]:
        call = await self.client.chat("fixer", prompting.fixer_messages(request), seed=request.seed)
        return _parsed("fixer", call, lambda reply: _kernel_of(reply, request.kernel.source, request.problem))

    async def summarize(self, request: SummaryRequest) -> AgentResult[MemoryDraft]:
        call = await self.client.chat("summarizer", prompting.summarizer_messages(request), seed=request.seed)
        return _parsed("summarizer", call, parse_summary)


def _kernel_of(reply: str, parent_source: str, problem: ProblemContext) -> str:
    """The reply's kernel with the imports it lacks (of the run's target generation, else of its parent's), in
    the generation the run returns (a legacy reply is migrated, or unusable naming what blocks it)."""
    kernel = extract_kernel(reply, kernel_function_name(parent_source))
    language = get_definition(problem.platform).language
    generation = problem.target_generation or prompting.generation_of(parent_source, language)
    kernel = complete_imports(kernel, problem.platform, generation)
    try:
        return in_target_generation(kernel, problem.target_generation, language)
    except ValueError as error:
        raise UnusableReply(str(error)) from error


def call_seed(request_seed: int, index: int) -> int:
    """The seed of the `index`th of a request's independent calls: fixed by the request's seed, distinct per call."""
    digest = hashlib.sha256(f"{request_seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def parse_one_plan(reply: str) -> str:
    """The first plan of a numbered or JSON list, else the whole reply (one plan asked, one plan given)."""
    try:
        return parse_plans(reply, 1)[0]
    except UnusableReply:
        text = strip_reasoning(reply or "").strip()
        if not text:
            raise
        return text


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
