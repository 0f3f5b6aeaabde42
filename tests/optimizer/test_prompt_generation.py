"""The Planner, Executor and Fixer are told which NeuronCore they write for and which NKI generation the
kernel is in, so a rewrite keeps its namespace (a legacy kernel's reply must not switch to `nki`, nor the
reverse)."""

from __future__ import annotations

import dataclasses

from engine.agents import prompting
from engine.agents.base import FixRequest, KernelView, PlanRequest, WriteRequest

LEGACY = "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n\n@nki.jit\ndef kernel(x):\n    return x\n"
CURRENT = "import nki\nimport nki.language as nl\n\n@nki.jit\ndef kernel(x):\n    return x\n"


def _system_prompts(problem, source: str) -> list[str]:
    kernel = KernelView(source=source, latency_ms=1.0, profile={})
    return [messages[0]["content"] for messages in (
        prompting.planner_messages(PlanRequest(problem, kernel, (), count=2, seed=1)),
        prompting.executor_messages(WriteRequest(problem, kernel, "1. Tile it", (), seed=1)),
        prompting.fixer_messages(FixRequest(problem, kernel, "Tile it", source, "runtime", "boom", attempt=1, seed=1)),
    )]


def test_a_legacy_kernel_is_kept_legacy_and_the_neuroncore_is_named(problem):
    for system in _system_prompts(problem, LEGACY):
        assert "NeuronCore-v2" in system
        assert "legacy neuronxcc.nki namespace" in system and "keep to that namespace" in system


def test_a_kernel_in_the_nki_package_is_kept_there_on_its_platforms_neuroncore(problem):
    for system in _system_prompts(dataclasses.replace(problem, platform="trn3"), CURRENT):
        assert "NeuronCore-v4" in system
        assert "the nki package (NKI 0.6" in system and "legacy" not in system


def test_a_run_returning_the_current_generation_tells_the_agents_to_write_nki_0_6_from_a_legacy_kernel(problem):
    for system in _system_prompts(dataclasses.replace(problem, target_generation="current"), LEGACY):
        assert "This run returns kernels in the current generation, NKI 0.6" in system
        assert "`import nki.isa as nisa`" in system and "destination tile first" in system
        assert "keep to that namespace" not in system
