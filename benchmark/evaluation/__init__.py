"""Sandboxed evaluation of NKI kernels: static check, isolated reference and kernel processes, correctness
checks that resist gaming, profile and peak fraction. Pure Python: no Django import (docs/evaluation.md).
"""

from __future__ import annotations

from benchmark.evaluation.checks import RELATIVE_L2_TOLERANCE
from benchmark.evaluation.executors import EvaluationRequest, Executor, LocalExecutor
from benchmark.evaluation.pipeline import evaluate
from benchmark.evaluation.result import ErrorKind, EvaluationResult
from benchmark.evaluation.sandbox import Limits

__all__ = [
    "RELATIVE_L2_TOLERANCE", "ErrorKind", "EvaluationRequest", "EvaluationResult", "Executor", "Limits",
    "LocalExecutor", "evaluate",
]
