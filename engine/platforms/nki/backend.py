"""The `simulator` backend (the default for NKI): our NKI CPU simulator runs the kernel
(`engine.platforms.nki.simulator.simulate`), our performance model turns its instruction trace into a latency
and a profile (`engine.platforms.nki.perf.estimate`). On the first seed the kernel child records the kernel's
program instead (`record`), which the verifier child replays on every seed (`engine.platforms.nki.roles`).

Found by the registry (`BackendDefinition.implementation`); `prepare`, `run` and `record` execute inside the
kernel child, `profile` inside the verifier child (on the trace it checked), `version` in the parent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.evaluator.backend_base import (
    BackendImplementation,
    BackendRun,
    BackendUnavailable,
    ProfileReport,
    as_output_tuple,
)
from engine.evaluator.result import ErrorKind
from engine.platforms.registry import Backend


class SimulatorBackend(BackendImplementation):
    name = Backend.SIMULATOR.value
    records_trace = True

    def version(self) -> str:
        # lazy: the simulator loads only where this backend runs (never in a Triton worker)
        from engine.platforms.nki.simulator import SIMULATOR_VERSION

        return f"nki-sim {SIMULATOR_VERSION} + perf {self.perf_model_version()}"

    def perf_model_version(self) -> str:
        try:
            # lazy: the performance model loads only where this backend runs
            from engine.platforms.nki.perf import PERF_MODEL_VERSION
        except ImportError:
            return "unavailable"
        return str(PERF_MODEL_VERSION)

    def prepare(self) -> None:
        try:
            # lazy: the simulator loads only where this backend runs (never in a Triton worker)
            import engine.platforms.nki.simulator as nki_sim

            install = nki_sim.install
        except (ImportError, AttributeError) as exc:
            raise BackendUnavailable(f"the NKI simulator is not installed in this checkout ({exc})") from None
        install()

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        # lazy: the simulator loads only where this backend runs (never in a Triton worker)
        from engine.platforms.nki.simulator import simulate

        simulation = simulate(kernel, list(inputs), platform=platform, record_trace=True)
        return BackendRun(outputs=as_output_tuple(simulation.outputs), trace=simulation.trace,
                          inputs_after=simulation.inputs_after)

    def record(self, kernel: Callable[..., Any], inputs: Sequence[Any],
               platform: str) -> tuple[BackendRun, dict[str, np.ndarray]]:
        # lazy: the verification's recorder loads only in the kernel child of a recording run
        from engine.platforms.nki.roles import record

        return record(kernel, inputs, platform)

    def encode_trace(self, trace: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        # lazy: loaded in the child by the role that needs it, in its order around the guard
        from engine.platforms.nki.frames import encode_trace

        return encode_trace(trace, "trace.")

    def decode_trace(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
        # lazy: loaded in the child by the role that needs it, in its order around the guard
        from engine.platforms.nki.frames import decode_trace

        return decode_trace(meta, arrays, "trace.")

    def classify(self, exc: BaseException) -> ErrorKind | None:
        try:
            # lazy: the simulator loads only where this backend runs (never in a Triton worker)
            from engine.platforms.nki.simulator.errors import NKICompileError, NKIRuntimeError
        except ImportError:
            return None
        if isinstance(exc, NKICompileError):
            return ErrorKind.COMPILE_ERROR
        if isinstance(exc, NKIRuntimeError):
            return ErrorKind.RUNTIME_ERROR
        return None

    def profile(self, trace: Any, platform: str) -> ProfileReport:
        # lazy: the performance model loads only where this backend runs
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
