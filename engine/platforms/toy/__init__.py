"""A toy platform, for one test only: kernels are plain numpy functions and its backend predicts a latency of a
microsecond per bytecode instruction of the kernel function (a second, a device no machine has, is always
unavailable; its peak is the problem's FLOPs at a fixed rate). The product never registers it;
`tests/platforms/test_toy_platform.py` does (`registered(DEFINITIONS, BACKENDS, PARTS)`), and runs it through an
upload, an evaluation, an offline run and the leaderboard, to show that a platform is a folder and one
registration. It lives under engine/ only because the sandbox child must import its backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.platforms.registry import MEASURED, PREDICTED, BackendDefinition, PlatformDefinition

LANGUAGE = "toy"
PLATFORM = "toy-cpu"
BACKEND = "toy-model"


@dataclass(frozen=True)
class ToyCpu:
    """The toy hardware: what its backend's cost model and its prompt rules read."""

    name: str
    microseconds_per_instruction: float
    flops_per_ms: float  # its theoretical peak: no kernel does more arithmetic than this


TOY_CPU = ToyCpu(name=PLATFORM, microseconds_per_instruction=1.0, flops_per_ms=1e6)
# A second backend, for a device no machine has: offered greyed out with its host check's reason.
DEVICE_BACKEND = "toy-device"

BACKENDS = (BackendDefinition(BACKEND, "Toy model (bytecode instructions)", "engine.platforms.toy.backend:ToyBackend",
                              PREDICTED),
            BackendDefinition(DEVICE_BACKEND, "Toy device (measured)", "engine.platforms.toy.backend:ToyBackend",
                              MEASURED, host_check="engine.platforms.toy:device_unavailable"))
DEFINITIONS = (PlatformDefinition(platform=PLATFORM, language=LANGUAGE, language_name="toy numpy",
                                  hardware_name="the toy CPU", hardware=TOY_CPU, backends=(BACKEND, DEVICE_BACKEND),
                                  default_backend=BACKEND),)


def theoretical_peak_ms(platform: str, *, vector_flops: float, matmul_flops: float, hbm_bytes: float) -> float:
    """The toy CPU's peak: the problem's arithmetic at its FLOP rate (its memory is free)."""
    return (vector_flops + matmul_flops) / TOY_CPU.flops_per_ms


def device_unavailable(platform: str) -> str | None:
    """The toy device's host check: no machine has one."""
    return f"no toy device is attached for {platform}"

# Its problems are reference files, evaluated by the shared reference-file pipeline (static check, sandboxed
# reference and kernel children, comparison); its backend records no program, so it needs no verifier.
PARTS = {"evaluate": "engine.evaluator.reference_pipeline:evaluate",
         "peak": "engine.platforms.toy:theoretical_peak_ms",
         "prompts": "engine.platforms.toy.prompting:PROMPTS",
         "rewrites": "engine.platforms.toy.rewrites:CATALOG"}
