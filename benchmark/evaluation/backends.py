"""Backend implementations: what runs a kernel and says how fast it is, behind one small interface, chosen
by name (the names, with their labels, are `benchmark.platforms.Backend`).

* `simulator` (default): our NKI CPU simulator runs the kernel (`benchmark.nki.simulate`), our
  performance model turns its instruction trace into a latency and a profile (`benchmark.perf.estimate`).
* `neuron`: real hardware through neuronxcc. Needs a trn host; anywhere else it reports the
  infrastructure error "neuron backend not available on this host".
* `null`: calls the kernel as a plain Python function on numpy arrays, with no trace and no latency. It
  exists to test the sandbox and the pipeline without a simulator.

`prepare` and `run` execute inside the kernel child; `profile` inside the profile child; `version` in the
parent. Timing rules for measured backends are in `summarise_timings` (and docs/evaluation.md).
"""

from __future__ import annotations

import importlib.util
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmark.evaluation.result import ErrorKind
from benchmark.platforms import Backend


class BackendUnavailable(Exception):
    """The backend cannot run on this host (an infrastructure error, never the kernel's fault)."""


class UnstableTiming(Exception):
    """Repeated measurements disagree by more than the allowed spread."""


@dataclass
class BackendRun:
    outputs: tuple[np.ndarray, ...]
    trace: Any = None  # benchmark.nki.trace.Trace for the simulator
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


class BackendImplementation:
    name: str = ""
    records_trace = False

    def version(self) -> str:
        raise NotImplementedError

    def perf_model_version(self) -> str:
        return ""

    def prepare(self) -> None:
        """Make the kernel's imports resolvable in this (child) process; raise BackendUnavailable."""

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        raise NotImplementedError

    def classify(self, exc: BaseException) -> ErrorKind | None:
        """Map a backend-specific exception to a failure kind (None: let the generic rules decide)."""
        return None

    def profile(self, trace: Any, platform: str) -> ProfileReport:
        raise NotImplementedError


def _as_output_tuple(value: Any) -> tuple[np.ndarray, ...]:
    items = value if isinstance(value, (tuple, list)) else (value,)
    return tuple(np.asarray(v) for v in items)


class NullBackend(BackendImplementation):
    name = Backend.NULL.value

    def version(self) -> str:
        return "null-1"

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        return BackendRun(outputs=_as_output_tuple(kernel(*inputs)))


class SimulatorBackend(BackendImplementation):
    name = Backend.SIMULATOR.value
    records_trace = True

    def version(self) -> str:
        from benchmark.nki import SIMULATOR_VERSION

        return f"nki-sim {SIMULATOR_VERSION} + perf {self.perf_model_version()}"

    def perf_model_version(self) -> str:
        try:
            from benchmark.perf import PERF_MODEL_VERSION
        except ImportError:
            return "unavailable"
        return str(PERF_MODEL_VERSION)

    def prepare(self) -> None:
        try:
            import benchmark.nki as nki_sim

            install = nki_sim.install
        except (ImportError, AttributeError) as exc:
            raise BackendUnavailable(f"the NKI simulator is not installed in this checkout ({exc})") from None
        install()

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        from benchmark.nki import simulate

        simulation = simulate(kernel, list(inputs), platform=platform, record_trace=True)
        return BackendRun(outputs=_as_output_tuple(simulation.outputs), trace=simulation.trace,
                          inputs_after=simulation.inputs_after)

    def classify(self, exc: BaseException) -> ErrorKind | None:
        try:
            from benchmark.nki.errors import NKICompileError, NKIRuntimeError
        except ImportError:
            return None
        if isinstance(exc, NKICompileError):
            return ErrorKind.COMPILE_ERROR
        if isinstance(exc, NKIRuntimeError):
            return ErrorKind.RUNTIME_ERROR
        return None

    def profile(self, trace: Any, platform: str) -> ProfileReport:
        from benchmark.perf import estimate

        report = estimate(trace, platform)
        data = report.to_dict() if hasattr(report, "to_dict") else {}
        return ProfileReport(
            latency_ms=float(report.latency_ms),
            profile=dict(data.get("profile", getattr(report, "profile", {}) or {})),
            timeline=data.get("timeline"),
            perf_model_version=str(getattr(report, "version", self.perf_model_version())),
        )


# -- hardware -------------------------------------------------------------------------------------

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


class NeuronBackend(BackendImplementation):
    """Real Trainium through neuronxcc. Untested here (no hardware); the rules are the contract."""

    name = Backend.NEURON.value

    def version(self) -> str:
        try:
            from importlib.metadata import version

            return f"neuronxcc {version('neuronxcc')}"
        except Exception:
            return "neuronxcc unavailable"

    def prepare(self) -> None:
        if importlib.util.find_spec("neuronxcc") is None:
            raise BackendUnavailable("neuron backend not available on this host (neuronxcc is not importable)")

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        import neuronxcc.nki as nki  # real SDK

        run_on_device = nki.baremetal(kernel)
        outputs = _as_output_tuple(run_on_device(*inputs))
        benchmarked = nki.benchmark(warmup=WARMUP_ITERATIONS, iters=TIMED_ITERATIONS)(kernel)
        for _ in range(MAX_TIMING_ATTEMPTS):
            samples = []
            for _ in range(MEASUREMENT_REPEATS):
                benchmarked(*inputs)
                samples.append(benchmarked.benchmark_result.nc_latency.get_latency_percentile(50) / 1000.0)
            try:
                return BackendRun(outputs=outputs, latency_ms=summarise_timings(samples))
            except UnstableTiming as exc:
                last = exc
        raise BackendUnavailable(f"timing on this host is unstable: {last}")

    def profile(self, trace: Any, platform: str) -> ProfileReport:
        raise BackendUnavailable("the neuron backend measures latency in the kernel child; nothing to profile")


BACKENDS: dict[str, type[BackendImplementation]] = {b.name: b for b in (SimulatorBackend, NeuronBackend, NullBackend)}


def get_backend(name: str) -> BackendImplementation:
    try:
        return BACKENDS[name]()
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; expected one of {sorted(BACKENDS)}") from None
