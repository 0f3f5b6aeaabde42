"""The platforms kernels are written for and evaluated on, and the backends that evaluate them.

Shared code (the problem and evaluation models, the evaluation pipeline, the leaderboard, the agents'
prompts) reads what it assumes about a platform from its `PlatformDefinition` here, instead of spelling
"trn1", "NKI" or "Trainium" itself. Today every platform is a Trainium generation programmed in NKI; a
platform of another kind (a GPU programmed in Triton, say) is one more `Platform` member and definition,
plus the backends, hardware spec and prompt rules it names.

Pure Python, no Django: the simulator, the pipeline and the sandbox children import it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.choices import Choices
from benchmark.hardware import TRN1, TRN2, NeuronCoreSpec


class Backend(Choices):
    """What runs a kernel and says how fast it is (implementations: `benchmark.evaluation.backends`)."""

    SIMULATOR = "simulator", "Simulator (CPU, predicted latency)"
    NEURON = "neuron", "Neuron hardware (measured)"
    # Runs the kernel as plain numpy with no latency: for testing the pipeline, never ranked.
    NULL = "null", "Null (pipeline tests)"


class Platform(Choices):
    """The target an evaluation is for: stored as `Evaluation.platform`, part of the evaluation cache key."""

    TRN1 = "trn1", "trn1 (NeuronCore-v2)"
    TRN2 = "trn2", "trn2 (NeuronCore-v3)"

    @property
    def definition(self) -> PlatformDefinition:
        return DEFINITIONS[self]


@dataclass(frozen=True)
class PlatformDefinition:
    """What shared code may assume about one platform."""

    platform: Platform
    language: str  # the kernel language: which static check, simulator and prompt rules apply ("nki")
    language_name: str  # how the agents' prompts name the language
    hardware_name: str  # how the agents' prompts name the target hardware
    hardware: NeuronCoreSpec  # the constants the simulator and the performance model use
    backends: tuple[Backend, ...]  # the backends that can evaluate its kernels
    default_backend: Backend


NKI = "nki"
_NKI_BACKENDS = (Backend.SIMULATOR, Backend.NEURON, Backend.NULL)

DEFINITIONS: dict[Platform, PlatformDefinition] = {
    Platform.TRN1: PlatformDefinition(
        platform=Platform.TRN1, language=NKI, language_name="NKI", hardware_name="AWS Trainium (NeuronCore)",
        hardware=TRN1, backends=_NKI_BACKENDS, default_backend=Backend.SIMULATOR,
    ),
    Platform.TRN2: PlatformDefinition(
        platform=Platform.TRN2, language=NKI, language_name="NKI", hardware_name="AWS Trainium2 (NeuronCore)",
        hardware=TRN2, backends=_NKI_BACKENDS, default_backend=Backend.SIMULATOR,
    ),
}

# Where nothing else is said: the platform NKIBench's published numbers are for, and its default backend.
DEFAULT_PLATFORM = Platform.TRN1
DEFAULT_BACKEND = DEFINITIONS[DEFAULT_PLATFORM].default_backend


def get_definition(platform: str) -> PlatformDefinition:
    """The definition of a platform named by its value ("trn1"); ValueError for an unknown one."""
    try:
        return DEFINITIONS[Platform(platform)]
    except ValueError:
        raise ValueError(f"unknown platform {platform!r}; expected one of {sorted(Platform.values)}") from None
