"""The typed record every evaluation produces, and the failure taxonomy every layer shares.

`EvaluationResult` is what the Django layer stores, what the API returns and what the optimizer reads.
Field names are a contract: add fields, do not rename them. `to_dict()` output is plain JSON (non-finite
floats become None, tuples become lists) and `from_dict(to_dict(r)) == r`.
"""

from __future__ import annotations

import functools
import math
import tomllib
from dataclasses import asdict, dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import Any

from engine.choices import Choices


class ErrorKind(Choices):
    """Why an evaluation did not produce a trusted, correct result. One code per pipeline step.

    The one definition of the failure taxonomy: `Evaluation.error_kind` takes its choices (and labels) from it.
    """

    REJECTED = "rejected", "Rejected by the static check"  # refused before anything ran
    COMPILE_ERROR = "compile_error", "Compile error"  # the backend refused to build the kernel (NKI rules)
    RUNTIME_ERROR = "runtime_error", "Runtime error"  # the kernel raised while running
    # It ran, but its outputs (or what it did to its inputs) are wrong.
    INCORRECT = "incorrect", "Incorrect result"
    # Wrote to an input (Triton kernels: inputs are checksummed around every call; NKI reports INCORRECT).
    MODIFIED_INPUT = "modified_input", "Modified its inputs"
    TIMEOUT = "timeout", "Timed out"  # wall-clock or CPU-time limit reached
    # Memory (address space) or another OS limit reached.
    RESOURCE_LIMIT = "resource_limit", "Resource limit exceeded"
    # Correct, but faster than physics allows: held for review.
    SUSPICIOUS = "suspicious", "Suspicious (held for review)"
    # Our fault (worker died, backend missing, broken reference).
    INFRASTRUCTURE_ERROR = "infrastructure_error", "Infrastructure error (ours, retried)"


# Kinds that say something about the kernel. An infrastructure error says nothing about it: it is never
# ranked, never counted as "no speedup", and the caller may simply evaluate again.
KERNEL_RESULT_KINDS = frozenset(ErrorKind) - {ErrorKind.INFRASTRUCTURE_ERROR}

STATUS_OK = "ok"
STATUS_FAILED = "failed"


def _finite_or_none(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class EvaluationResult:
    status: str  # "ok" when error_kind is None, else "failed"
    compiled: bool = False
    runnable: bool = False
    correct: bool = False
    error_kind: ErrorKind | None = None
    error_message: str = ""
    error_line: int | None = None  # line in the kernel source (or the reference, for a broken reference)
    error_detail: str = ""  # traceback of the kernel's own frames, or child diagnostics
    # relative_l2_errors[seed][output] = ||out - ref|| / max(||ref||, tiny); None where not finite.
    relative_l2_errors: tuple[tuple[float | None, ...], ...] = ()
    output_errors: tuple[float | None, ...] = ()  # per output, the worst over seeds
    tolerance: float | None = None
    seeds: tuple[int, ...] = ()
    distributions: tuple[str, ...] = ()  # value distribution used with each seed
    latency_ms: float | None = None
    theoretical_peak_ms: float | None = None
    peak_fraction: float | None = None  # theoretical_peak_ms / latency_ms
    profile: dict[str, Any] = field(default_factory=dict)  # neuron-profile summary field names
    timeline: Any = None  # per-engine timeline from the performance model (JSON)
    # Where the model's time goes (engine.platforms.nki.perf.explain.Breakdown.to_dict()); None for measured backends.
    breakdown: dict[str, Any] | None = None
    kernel_name: str = ""
    backend: str = ""
    backend_version: str = ""
    perf_model_version: str = ""
    platform: str = ""
    project_version: str = ""
    wall_time_s: float = 0.0
    attempts: int = 1  # child launches used (infrastructure failures are retried)

    # -- derived ----------------------------------------------------------------------------------

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    @property
    def is_kernel_result(self) -> bool:
        """False when the failure was ours: the result must not be recorded against the kernel."""
        return self.error_kind is None or self.error_kind in KERNEL_RESULT_KINDS

    @property
    def max_relative_error(self) -> float | None:
        finite = [e for e in self.output_errors if e is not None]
        if len(finite) != len(self.output_errors):
            return None
        return max(finite, default=None)

    # -- serialisation ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["error_kind"] = self.error_kind.value if self.error_kind else None
        data["relative_l2_errors"] = [[_finite_or_none(e) for e in row] for row in self.relative_l2_errors]
        data["output_errors"] = [_finite_or_none(e) for e in self.output_errors]
        data["seeds"] = list(self.seeds)
        data["distributions"] = list(self.distributions)
        for name in ("latency_ms", "theoretical_peak_ms", "peak_fraction", "tolerance"):
            data[name] = _finite_or_none(data[name])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvaluationResult:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        kind = values.get("error_kind")
        values["error_kind"] = ErrorKind(kind) if kind else None
        values["relative_l2_errors"] = tuple(tuple(row) for row in values.get("relative_l2_errors", ()))
        for name in ("output_errors", "seeds", "distributions"):
            values[name] = tuple(values.get(name, ()))
        return cls(**values)

    @classmethod
    def failure(cls, kind: ErrorKind, message: str, *, line: int | None = None, **context: Any) -> EvaluationResult:
        return cls(status=STATUS_FAILED, error_kind=kind, error_message=message, error_line=line, **context)


@functools.lru_cache(maxsize=1)
def project_version() -> str:
    """This project's version, recorded on every result beside the backend's and the model's."""
    try:
        return metadata.version("accelopt-studio")
    except Exception:  # noqa: BLE001 - not installed: read the checkout's pyproject
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, ValueError):
            return "unknown"
