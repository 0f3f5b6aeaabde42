"""What every backend implements and what backends share: the interface (`BackendImplementation`), its
records (`BackendRun`, `ProfileReport`, `Placement`), its errors, and the timing rules of measured backends
(`summarise_timings`; docs/evaluation.md, section 4).

Its own module so that a backend in its platform's folder (`engine.platforms.nki.backend`, `...nki.neuron`) builds
on it while `backends` (`get_backend`) imports that backend by its registered name, without an import cycle. `backends`
re-exports every name here.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.evaluator.result import ErrorKind
from engine.evaluator.sandbox.guards import GuardAllowances
from engine.evaluator.sandbox.isolation import SandboxExtras
from engine.evaluator.sandbox.process import Limits


class BackendUnavailable(Exception):
    """The backend cannot run on this host (an infrastructure error, never the kernel's fault). `retry`: whether
    another attempt may fare better (a NeuronCore that went away: yes; no Neuron device at all: no)."""

    def __init__(self, message: str, *, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry


class UnstableTiming(Exception):
    """Repeated measurements disagree by more than the allowed spread."""


@dataclass
class BackendRun:
    outputs: tuple[np.ndarray, ...]
    trace: Any = None  # engine.platforms.nki.simulator.trace.Trace for the simulator
    latency_ms: float | None = None  # measured backends time the kernel themselves
    profile: dict[str, Any] | None = None
    # The inputs as the kernel left them, when the backend ran on copies (None: the arrays passed in).
    inputs_after: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class ProfileReport:
    latency_ms: float | None
    profile: dict[str, Any]
    timeline: Any
    perf_model_version: str
    breakdown: dict[str, Any] | None = None  # where the time goes (engine.platforms.nki.perf.explain); None when measured


@dataclass(frozen=True)
class Placement:
    """Where one evaluation attempt's children run, as its backend decides it in the parent: their limits and
    what is shared with them beyond the sandbox. The simulator and null backends need nothing; the neuron
    backend leases a NeuronCore for the attempt and shares its device and a directory for the profiler's
    files (`artefacts`, as the children see it)."""

    kernel_limits: Limits
    profile_limits: Limits
    kernel_extras: SandboxExtras | None = None
    profile_extras: SandboxExtras | None = None
    artefacts: str = ""


class BackendImplementation:
    name: str = ""
    records_trace = False
    # Measured backends time the kernel once every seed is correct (`measure`, in the kernel child) and read
    # its profile from files the kernel child left (`measured_profile`, in the profile child).
    measures = False

    def version(self) -> str:
        raise NotImplementedError

    def perf_model_version(self) -> str:
        return ""

    @contextlib.contextmanager
    def placement(self, limits: Limits, platform: str) -> Iterator[Placement]:
        """In the parent, around one attempt: the children's limits and extras (and what the attempt holds)."""
        yield Placement(kernel_limits=limits, profile_limits=limits)

    def guard_allowances(self) -> GuardAllowances | None:
        """What this backend's own SDK needs past the kernel child's audit guard (None: nothing)."""
        return None

    def prepare(self) -> None:
        """Make the kernel's imports resolvable in this (child) process; raise BackendUnavailable."""

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        raise NotImplementedError

    def record(self, kernel: Callable[..., Any], inputs: Sequence[Any],
               platform: str) -> tuple[BackendRun, dict[str, np.ndarray]]:
        """Backends with a trace: run once recording the kernel's program, for the platform's verifier child
        (the run, and the program as arrays)."""
        raise NotImplementedError(f"backend {self.name!r} records no program")

    def encode_trace(self, trace: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Backends with a trace: the trace as it crosses the pipes (a JSON-able header, arrays)."""
        raise NotImplementedError(f"backend {self.name!r} has no trace")

    def decode_trace(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
        """Backends with a trace: the trace `encode_trace` sent, rebuilt where it is priced (the verifier)."""
        raise NotImplementedError(f"backend {self.name!r} has no trace")

    def classify(self, exc: BaseException) -> ErrorKind | None:
        """Map a backend-specific exception to a failure kind (None: let the generic rules decide)."""
        return None

    def profile(self, trace: Any, platform: str) -> ProfileReport:
        raise NotImplementedError

    def measure(self, kernel: Callable[..., Any], platform: str) -> float:
        """Measured backends: the kernel's latency in ms on the inputs of its last run (timing rules below)."""
        raise NotImplementedError

    def measured_profile(self, artefacts: str, platform: str) -> ProfileReport:
        """Measured backends: the profile read from the files the kernel child left in `artefacts`."""
        raise NotImplementedError


def as_output_tuple(value: Any) -> tuple[np.ndarray, ...]:
    items = value if isinstance(value, (tuple, list)) else (value,)
    return tuple(np.asarray(v) for v in items)


# -- timing rules of measured backends ----------------------------------------------------------------

WARMUP_ITERATIONS = 5
TIMED_ITERATIONS = 20
MEASUREMENT_REPEATS = 5
MAX_TIMING_SPREAD = 0.01  # (max - min) / median over the repeats
MAX_TIMING_ATTEMPTS = 3


def summarise_timings(samples_ms: Sequence[float], max_spread: float = MAX_TIMING_SPREAD) -> float:
    """The median of repeated measurements, refused when they spread more than `max_spread`."""
    if len(samples_ms) < 3:
        raise UnstableTiming(f"need at least 3 measurements, got {len(samples_ms)}")
    median = statistics.median(samples_ms)
    if median <= 0:
        raise UnstableTiming(f"non-positive median latency {median} ms")
    spread = (max(samples_ms) - min(samples_ms)) / median
    if spread > max_spread:
        raise UnstableTiming(f"measurements spread {spread:.2%} (min {min(samples_ms):.4f} ms, max "
                             f"{max(samples_ms):.4f} ms), over the {max_spread:.0%} allowed")
    return median
