"""Prompt templates: every role renders what it needs and nothing is left unfilled."""

from __future__ import annotations

import re

import pytest

from engine.agents import prompting
from engine.agents.base import (
    FixRequest,
    KernelView,
    MemoryItem,
    PlanRequest,
    SummaryRequest,
    WriteRequest,
)

KERNEL = KernelView(source="def kernel(x):\n    return {'a': x}\n", latency_ms=1.25,
                    profile={"hbm_read_bytes": 4096.0, "mystery_counter": 3.0})
MEMORY = (MemoryItem(key="k1", title="Reuse tiles", summary="Load once, use twice.", speedup=1.3, problem="silu"),
          MemoryItem(key="k2", title="Tiny DMAs", summary="Many 1-row loads were slow.", polarity="negative",
                     speedup=2.0))


def all_requests(problem):
    return {
        "planner": prompting.planner_messages(PlanRequest(problem, KERNEL, MEMORY, count=3, seed=1)),
        "executor": prompting.executor_messages(WriteRequest(problem, KERNEL, "1. Reuse tiles", MEMORY, seed=1)),
        "fixer": prompting.fixer_messages(FixRequest(problem, KERNEL, "Reuse tiles", "def kernel(x):\n    oops\n",
                                                     "runtime", "NameError: oops at line 2", attempt=1, seed=1)),
        "summarizer": prompting.summarizer_messages(SummaryRequest(problem, "slow()", "fast()", 1.5, "negative",
                                                                   "Tiny DMAs", seed=1)),
    }


def test_every_template_renders_with_no_placeholder_left(problem):
    for role, messages in all_requests(problem).items():
        assert [m["role"] for m in messages] == ["system", "user"], role
        for m in messages:
            assert not re.search(r"\{\{\w+\}\}", m["content"]), (role, m["content"])


def test_the_planner_sees_kernel_profile_meanings_memory_rules_and_reference(problem):
    system, user = (m["content"] for m in all_requests(problem)["planner"])
    assert "return {'a': x}" in user and "def forward(x)" in user
    assert "| hbm_read_bytes | 4096 | bytes read from device memory" in user
    assert "| mystery_counter | 3 |  |" in user  # unknown counters are shown without a meaning
    assert "| latency_ms | 1.25 |" in user
    assert "Reuse tiles (from silu)" in user and "1.30x faster" in user and "2.00x slower: avoid it" in user
    assert "at most 128" in system and "2 KiB (512 float32)" in system
    assert "at most 3 plan(s)" in system


def test_the_fixer_sees_the_failing_kernel_and_its_error(problem):
    user = all_requests(problem)["fixer"][1]["content"]
    assert "    oops" in user and "NameError: oops at line 2" in user and "(runtime)" in user


def test_the_summarizer_is_told_which_side_is_the_rewrite(problem):
    user = all_requests(problem)["summarizer"][1]["content"]
    assert "made the kernel slower" in user and "1.500x faster" in user


def test_a_placeholder_without_a_value_is_named():
    with pytest.raises(KeyError, match="uses \\{\\{kernel\\}\\}"):
        prompting.fill("look: {{kernel}}", {}, "planner")


def test_a_value_containing_braces_is_not_expanded_again():
    assert prompting.fill("{{a}}", {"a": "{{b}}"}, "t") == "{{b}}"
