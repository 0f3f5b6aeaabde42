"""The Triton backends' names and versions (`triton-interpreter`, `cuda`): Triton kernels are evaluated by
`engine.platforms.triton.pipeline.evaluate_triton` (FlashInfer-Bench formats, torch tensors), not by the
reference pipeline; these classes are what the registry finds for the two names, and the version evaluations
are cached under.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.evaluator.backend_base import BackendImplementation, BackendRun, BackendUnavailable
from engine.platforms.registry import Backend

# -2: the interpreter checks several workloads (triton.request.INTERPRETER_BYTES), not only the smallest.
TRITON_BACKEND_VERSIONS = {Backend.TRITON_INTERPRETER.value: "triton-interpreter-2", Backend.CUDA.value: "triton-cuda-1"}


class _TritonBackend(BackendImplementation):
    def version(self) -> str:
        return TRITON_BACKEND_VERSIONS[self.name]

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        raise BackendUnavailable(f"{self.name} evaluates Triton kernels through evaluate_triton, not this pipeline")


class TritonInterpreterBackend(_TritonBackend):
    name = Backend.TRITON_INTERPRETER.value


class CudaBackend(_TritonBackend):
    name = Backend.CUDA.value
    measures = True
