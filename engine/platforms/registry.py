"""The platforms kernels are written for and evaluated on, and the backends that evaluate them.

Shared code (the problem and evaluation models, the evaluation pipeline, the leaderboard, the agents'
prompts) reads what it assumes about a platform from its `PlatformDefinition` here, instead of spelling
"trn1", "NKI" or "Trainium" itself. Two languages today: NKI on Trainium generations (trn1, trn2, trn3) and
Triton on NVIDIA GPUs (h100, h200; issue 24). Code that only makes sense for one language (the NKI
simulator's peaks, its prompt rules) asks `definition.language` or iterates `platforms_for(NKI)`, never
every `Platform`.

Pure Python, no Django: the simulator, the pipeline and the sandbox children import it too.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from engine.choices import Choices
from engine.platforms.nki.hardware import TRN1, TRN2, TRN3, NeuronCoreSpec
from engine.platforms.triton.hardware import H100, H200, GpuSpec


class Backend(Choices):
    """What runs a kernel and says how fast it is (implementations: `engine.evaluator.backends`)."""

    SIMULATOR = "simulator", "Simulator (CPU, predicted latency)"
    NEURON = "neuron", "Neuron hardware (measured)"
    # Runs the kernel as plain numpy with no latency: for testing the pipeline, never ranked.
    NULL = "null", "Null (pipeline tests)"
    # Triton (engine.platforms.triton): the CPU interpreter checks correctness on every machine and reports no latency;
    # cuda runs and times the kernel on an NVIDIA GPU.
    TRITON_INTERPRETER = "triton-interpreter", "Triton interpreter (CPU, correctness only)"
    CUDA = "cuda", "NVIDIA GPU (measured)"


class Platform(Choices):
    """The target an evaluation is for: stored as `Evaluation.platform`, part of the evaluation cache key."""

    TRN1 = "trn1", "trn1 (NeuronCore-v2)"
    TRN2 = "trn2", "trn2 (NeuronCore-v3)"
    TRN3 = "trn3", "trn3 (NeuronCore-v4)"
    H100 = "h100", "h100 (NVIDIA H100 SXM)"
    H200 = "h200", "h200 (NVIDIA H200 SXM)"

    @property
    def definition(self) -> PlatformDefinition:
        return DEFINITIONS[self]


@dataclass(frozen=True)
class PlatformDefinition:
    """What shared code may assume about one platform."""

    platform: Platform
    language: str  # the kernel language: which static check, simulator and prompt rules apply ("nki", "triton")
    language_name: str  # how the agents' prompts name the language
    hardware_name: str  # how the agents' prompts name the target hardware
    hardware: NeuronCoreSpec | GpuSpec  # NKI: simulator and performance model constants; Triton: roofline peaks
    backends: tuple[Backend, ...]  # the backends that can evaluate its kernels
    default_backend: Backend


NKI = "nki"
TRITON = "triton"
_NKI_BACKENDS = (Backend.SIMULATOR, Backend.NEURON, Backend.NULL)
# The interpreter is the default: every machine has it; cuda needs a GPU (and is what ranks).
_TRITON_BACKENDS = (Backend.CUDA, Backend.TRITON_INTERPRETER)

DEFINITIONS: dict[Platform, PlatformDefinition] = {
    Platform.TRN1: PlatformDefinition(
        platform=Platform.TRN1, language=NKI, language_name="NKI", hardware_name="AWS Trainium (NeuronCore-v2)",
        hardware=TRN1, backends=_NKI_BACKENDS, default_backend=Backend.SIMULATOR,
    ),
    Platform.TRN2: PlatformDefinition(
        platform=Platform.TRN2, language=NKI, language_name="NKI", hardware_name="AWS Trainium2 (NeuronCore-v3)",
        hardware=TRN2, backends=_NKI_BACKENDS, default_backend=Backend.SIMULATOR,
    ),
    Platform.TRN3: PlatformDefinition(
        platform=Platform.TRN3, language=NKI, language_name="NKI", hardware_name="AWS Trainium3 (NeuronCore-v4)",
        hardware=TRN3, backends=_NKI_BACKENDS, default_backend=Backend.SIMULATOR,
    ),
    Platform.H100: PlatformDefinition(
        platform=Platform.H100, language=TRITON, language_name="Triton", hardware_name="NVIDIA H100 SXM GPU",
        hardware=H100, backends=_TRITON_BACKENDS, default_backend=Backend.TRITON_INTERPRETER,
    ),
    Platform.H200: PlatformDefinition(
        platform=Platform.H200, language=TRITON, language_name="Triton", hardware_name="NVIDIA H200 SXM GPU",
        hardware=H200, backends=_TRITON_BACKENDS, default_backend=Backend.TRITON_INTERPRETER,
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


# Where each kernel language's parts live in its platform folder ("module:attribute"), imported on first use:
# the shared layers (the agents today) find a platform's code through this table, not by importing its folder.
LANGUAGE_PARTS: dict[str, dict[str, str]] = {
    NKI: {"rewrites": "engine.platforms.nki.rewrites.catalog:CATALOG"},
    TRITON: {"rewrites": "engine.platforms.triton.rewrites.catalog:TRITON_CATALOG"},
}
LANGUAGES = tuple(LANGUAGE_PARTS)


def load_part(language: str, part: str) -> Any:
    """A language's part ("rewrites": its offline catalog), imported from the module LANGUAGE_PARTS names."""
    try:
        reference = LANGUAGE_PARTS[language][part]
    except KeyError:
        raise ValueError(f"kernel language {language!r} has no {part!r}; known: {sorted(LANGUAGE_PARTS)}") from None
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def platforms_for(language: str) -> tuple[Platform, ...]:
    """The platforms whose kernels are written in `language` ("nki", "triton"), in declaration order."""
    return tuple(p for p, d in DEFINITIONS.items() if d.language == language)
