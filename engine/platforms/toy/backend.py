"""The toy platform's backend: runs the kernel on numpy arrays in the kernel child and predicts its latency from
the kernel function's bytecode (one microsecond per instruction): deterministic, and lower for a kernel with
fewer steps, which is all a test of the search and the leaderboard needs."""

from __future__ import annotations

import dis
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.evaluator.backend_base import BackendImplementation, BackendRun, as_output_tuple
from engine.platforms.toy import BACKEND, TOY_CPU


def instruction_count(kernel: Callable[..., Any]) -> int:
    """The kernel function's bytecode instructions, as the toy model counts its work."""
    return sum(1 for _ in dis.get_instructions(kernel))


class ToyBackend(BackendImplementation):
    name = BACKEND

    def version(self) -> str:
        return "toy-model-1"

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        outputs = as_output_tuple(kernel(*inputs))
        latency_ms = instruction_count(kernel) * TOY_CPU.microseconds_per_instruction / 1000
        return BackendRun(outputs=outputs, latency_ms=latency_ms)
