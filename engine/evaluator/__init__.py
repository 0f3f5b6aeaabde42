"""The platform-neutral evaluation core: the result record, the sandboxed child processes and their protocol,
correctness checks that resist gaming, backends by name, executors, and `evaluate`, which hands a kernel to its
platform's pipeline (the registry's `evaluate` part). Pure Python: no Django import (docs/evaluation.md).

The names below load on first use: the Django apps import this package (the result record and its
ErrorKind, the static check's limits) without paying for numpy and the pipeline until an evaluation runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.evaluator.backends import get_backend
    from engine.evaluator.checks import RELATIVE_L2_TOLERANCE
    from engine.evaluator.executors import EvaluationRequest, Executor, LocalExecutor, evaluate
    from engine.evaluator.result import ErrorKind, EvaluationResult
    from engine.evaluator.sandbox.process import Limits
    from engine.evaluator.sizing import reference_io_bytes

_WHERE = {
    "RELATIVE_L2_TOLERANCE": "engine.evaluator.checks", "ErrorKind": "engine.evaluator.result",
    "EvaluationRequest": "engine.evaluator.executors", "EvaluationResult": "engine.evaluator.result",
    "Executor": "engine.evaluator.executors", "Limits": "engine.evaluator.sandbox.process",
    "LocalExecutor": "engine.evaluator.executors", "evaluate": "engine.evaluator.executors",
    "get_backend": "engine.evaluator.backends", "reference_io_bytes": "engine.evaluator.sizing",
}

__all__ = [
    "RELATIVE_L2_TOLERANCE", "ErrorKind", "EvaluationRequest", "EvaluationResult", "Executor", "Limits",
    "LocalExecutor", "evaluate", "get_backend", "reference_io_bytes",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups (and monkeypatch's undo) see a plain attribute
    return value
