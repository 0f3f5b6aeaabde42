"""Backend implementations: what runs a kernel and says how fast it is, behind one small interface, chosen
by name (the names, with their labels, are `engine.platforms.registry.Backend`).

* `simulator` (default): our NKI CPU simulator runs the kernel (`engine.platforms.nki.simulator.simulate`), our
  performance model turns its instruction trace into a latency and a profile (`engine.platforms.nki.perf.estimate`).
* `neuron`: real Trainium through the Neuron SDK (`engine.platforms.nki.neuron`): compiled and run with
  `nki.baremetal`, timed with `nki.benchmark`, profiled with `neuron-profile`, one NeuronCore per
  evaluation. Without a Neuron device it reports an infrastructure error saying so.
* `triton-interpreter`, `cuda`: Triton kernels (issue 24), evaluated by `triton.pipeline.evaluate_triton`;
  registered here for their names and versions.
* `null`: calls the kernel as a plain Python function on numpy arrays, with no trace and no latency. It
  exists to test the sandbox and the pipeline without a simulator.

`prepare`, `run` and `measure` execute inside the kernel child; `profile` and `measured_profile` inside the
profile child; `version` and `placement` in the parent. Timing rules for measured backends are in
`summarise_timings` (and docs/evaluation.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# The interface and what backends share live in backend_base (so the neuron package can build on them
# without a cycle); they are re-exported here, where callers have always found them.
from engine.evaluator.backend_base import (  # noqa: F401 - re-exported
    MAX_TIMING_ATTEMPTS,
    MAX_TIMING_SPREAD,
    MEASUREMENT_REPEATS,
    TIMED_ITERATIONS,
    WARMUP_ITERATIONS,
    BackendImplementation,
    BackendRun,
    BackendUnavailable,
    Placement,
    ProfileReport,
    UnstableTiming,
    as_output_tuple,
    summarise_timings,
)
from engine.evaluator.result import ErrorKind
from engine.platforms.registry import Backend


class NullBackend(BackendImplementation):
    name = Backend.NULL.value

    def version(self) -> str:
        return "null-1"

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        return BackendRun(outputs=as_output_tuple(kernel(*inputs)))


class SimulatorBackend(BackendImplementation):
    name = Backend.SIMULATOR.value
    records_trace = True

    def version(self) -> str:
        from engine.platforms.nki.simulator import SIMULATOR_VERSION

        return f"nki-sim {SIMULATOR_VERSION} + perf {self.perf_model_version()}"

    def perf_model_version(self) -> str:
        try:
            from engine.platforms.nki.perf import PERF_MODEL_VERSION
        except ImportError:
            return "unavailable"
        return str(PERF_MODEL_VERSION)

    def prepare(self) -> None:
        try:
            import engine.platforms.nki.simulator as nki_sim

            install = nki_sim.install
        except (ImportError, AttributeError) as exc:
            raise BackendUnavailable(f"the NKI simulator is not installed in this checkout ({exc})") from None
        install()

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        from engine.platforms.nki.simulator import simulate

        simulation = simulate(kernel, list(inputs), platform=platform, record_trace=True)
        return BackendRun(outputs=as_output_tuple(simulation.outputs), trace=simulation.trace,
                          inputs_after=simulation.inputs_after)

    def classify(self, exc: BaseException) -> ErrorKind | None:
        try:
            from engine.platforms.nki.simulator.errors import NKICompileError, NKIRuntimeError
        except ImportError:
            return None
        if isinstance(exc, NKICompileError):
            return ErrorKind.COMPILE_ERROR
        if isinstance(exc, NKIRuntimeError):
            return ErrorKind.RUNTIME_ERROR
        return None

    def profile(self, trace: Any, platform: str) -> ProfileReport:
        from engine.platforms.nki.perf import estimate

        report = estimate(trace, platform)
        data = report.to_dict() if hasattr(report, "to_dict") else {}
        return ProfileReport(
            latency_ms=float(report.latency_ms),
            profile=dict(data.get("profile", getattr(report, "profile", {}) or {})),
            timeline=data.get("timeline"),
            perf_model_version=str(getattr(report, "version", self.perf_model_version())),
            breakdown=data.get("breakdown"),
        )


# -2: the interpreter checks several workloads (triton.request.INTERPRETER_BYTES), not only the smallest.
TRITON_BACKEND_VERSIONS = {Backend.TRITON_INTERPRETER.value: "triton-interpreter-2", Backend.CUDA.value: "triton-cuda-1"}


class _TritonBackend(BackendImplementation):
    """Triton kernels are evaluated by `engine.platforms.triton.pipeline.evaluate_triton` (FlashInfer-Bench
    formats, torch tensors), not by the NKI pipeline; here for the name and the version evaluations are
    cached under."""

    def version(self) -> str:
        return TRITON_BACKEND_VERSIONS[self.name]

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        raise BackendUnavailable(f"{self.name} evaluates Triton kernels through evaluate_triton, not this pipeline")


class TritonInterpreterBackend(_TritonBackend):
    name = Backend.TRITON_INTERPRETER.value


class CudaBackend(_TritonBackend):
    name = Backend.CUDA.value
    measures = True


def _neuron_backend() -> type[BackendImplementation]:
    # Imported on first use: the neuron package builds on this module.
    from engine.platforms.nki.neuron import NeuronBackend

    return NeuronBackend


BACKENDS: dict[str, Callable[[], type[BackendImplementation]]] = {
    SimulatorBackend.name: lambda: SimulatorBackend, Backend.NEURON.value: _neuron_backend,
    NullBackend.name: lambda: NullBackend, TritonInterpreterBackend.name: lambda: TritonInterpreterBackend,
    CudaBackend.name: lambda: CudaBackend,
}


def get_backend(name: str) -> BackendImplementation:
    try:
        implementation = BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; expected one of {sorted(BACKENDS)}") from None
    return implementation()()
