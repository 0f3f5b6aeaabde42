"""The platforms kernels are written for and evaluated on, and the backends that evaluate them: the one place
the rest of the product learns about platforms.

Shared code (the problem and evaluation models, the evaluation pipeline and its children, the leaderboard, the
agents' prompts) reads what it assumes about a platform from its `PlatformDefinition`, its backends' from their
`BackendDefinition`, and a kernel language's code from the parts `LANGUAGE_PARTS` names ("module:attribute",
imported on first use), instead of spelling "trn1", "NKI" or "Triton" itself or importing a platform folder.
Two languages are built in: NKI on Trainium generations (trn1, trn2, trn3) and Triton on NVIDIA GPUs (h100,
h200; issue 24). Adding a platform is a folder under `engine/platforms/` and one `register_platform` call
(docs/architecture.md, "add a platform"; `tests/platforms/test_toy_platform.py` registers one in a test).

Pure Python, no Django: the simulator, the pipeline and the sandbox children import it too.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from engine.choices import OpenChoices
from engine.platforms.nki.hardware import TRN1, TRN2, TRN3
from engine.platforms.triton.hardware import H100, H200


class Backend(OpenChoices):
    """What runs a kernel and says how fast it is: the built-in names; every backend, these and any registered
    later, has a `BackendDefinition` in BACKENDS (implementations found through it: `engine.evaluator.backends`)."""

    SIMULATOR = "simulator", "Simulator (CPU, predicted latency)"
    NEURON = "neuron", "Neuron hardware (measured)"
    # Runs the kernel as plain numpy with no latency: for testing the pipeline, never ranked.
    NULL = "null", "Null (pipeline tests)"
    # Triton (engine.platforms.triton): the CPU interpreter checks correctness on every machine and reports no latency;
    # cuda runs and times the kernel on an NVIDIA GPU.
    TRITON_INTERPRETER = "triton-interpreter", "Triton interpreter (CPU, correctness only)"
    CUDA = "cuda", "NVIDIA GPU (measured)"

    @property
    def definition(self) -> BackendDefinition:
        return BACKENDS[self]


class Platform(OpenChoices):
    """The target an evaluation is for: stored as `Evaluation.platform`, part of the evaluation cache key. The
    built-in ones are named here; `register_platform` adds one (iterate `Platform` for all there are now)."""

    TRN1 = "trn1", "trn1 (NeuronCore-v2)"
    TRN2 = "trn2", "trn2 (NeuronCore-v3)"
    TRN3 = "trn3", "trn3 (NeuronCore-v4)"
    H100 = "h100", "h100 (NVIDIA H100 SXM)"
    H200 = "h200", "h200 (NVIDIA H200 SXM)"

    @property
    def definition(self) -> PlatformDefinition:
        return DEFINITIONS[self]


# What a backend's latency is, which decides where the leaderboard ranks it: predicted by a model (the
# simulated column), measured on the hardware (the measured column), none (correctness only: shown correct,
# never ranked), or a pipeline test's (never shown).
PREDICTED, MEASURED, CORRECTNESS_ONLY, TESTING = "predicted", "measured", "correctness-only", "testing"


@dataclass(frozen=True)
class BackendDefinition:
    """What shared code may assume about one backend; `implementation` is its BackendImplementation class as
    "module:Class", imported where it runs (the sandbox children import it by this name too)."""

    name: str
    label: str
    implementation: str
    latency: str  # PREDICTED, MEASURED, CORRECTNESS_ONLY or TESTING
    # What it needs to run, asked before anything is queued (`benchmark.services.backend_unavailable`); each a
    # "module:function" returning why not (a sentence) or None:
    #   packages    () -> the Python packages it needs that this process lacks; asked here unless a Ray cluster
    #               runs the evaluations (its nodes then say so themselves)
    #   host_check  (platform) -> what this host lacks for it (devices, tools)
    packages: str = ""
    host_check: str = ""
    # It runs on an NVIDIA GPU where the evaluations run: the executor says whether there is one.
    needs_gpu: bool = False


# How a platform's problems are stored, and so which request evaluates them: a reference file in NKIBench's
# format (get_inputs, forward; the kernel one source file) or a FlashInfer-Bench definition with workloads.
REFERENCE_FORMAT, FLASHINFER_FORMAT = "reference", "flashinfer"


@dataclass(frozen=True)
class PlatformDefinition:
    """What shared code may assume about one platform."""

    platform: Platform
    language: str  # the kernel language: which static check, simulator and prompt rules apply ("nki", "triton")
    language_name: str  # how the agents' prompts name the language
    hardware_name: str  # how the agents' prompts name the target hardware
    hardware: Any  # NKI: a NeuronCoreSpec (simulator and model constants); Triton: a GpuSpec (roofline peaks)
    backends: tuple[str, ...]  # the backends that can evaluate its kernels (Backend values)
    default_backend: str
    problem_format: str = REFERENCE_FORMAT
    # The built-in suite its leaderboard ranks, one board per case ("" and (): a board of every public problem
    # of its language, all cases).
    suite: str = ""
    board_cases: tuple[str, ...] = field(default=())


NKI = "nki"
TRITON = "triton"
NKIBENCH = "nkibench"
BOARD_CASES = ("full", "mini")  # an NKIBench board's cases, the full board first: the published shapes
_NKI_BACKENDS = (Backend.SIMULATOR, Backend.NEURON, Backend.NULL)
# The interpreter is the default: every machine has it; cuda needs a GPU (and is what ranks).
_TRITON_BACKENDS = (Backend.CUDA, Backend.TRITON_INTERPRETER)

# PyTorch and Triton (the `triton` extra), which both Triton backends import.
_TRITON_PACKAGES = "engine.evaluator.requirements:triton_unavailable"

BACKENDS: dict[str, BackendDefinition] = {
    backend.name: backend for backend in (
        BackendDefinition(Backend.SIMULATOR, Backend.SIMULATOR.label, "engine.platforms.nki.backend:SimulatorBackend",
                          PREDICTED),
        BackendDefinition(Backend.NEURON, Backend.NEURON.label, "engine.platforms.nki.neuron:NeuronBackend", MEASURED,
                          host_check="engine.platforms.nki.neuron.host:neuron_unavailable"),
        BackendDefinition(Backend.NULL, Backend.NULL.label, "engine.evaluator.backends:NullBackend", TESTING),
        BackendDefinition(Backend.TRITON_INTERPRETER, Backend.TRITON_INTERPRETER.label,
                          "engine.platforms.triton.backends:TritonInterpreterBackend", CORRECTNESS_ONLY,
                          packages=_TRITON_PACKAGES),
        BackendDefinition(Backend.CUDA, Backend.CUDA.label, "engine.platforms.triton.backends:CudaBackend", MEASURED,
                          packages=_TRITON_PACKAGES, needs_gpu=True),
    )
}

_NKIBENCH = {"suite": NKIBENCH, "board_cases": BOARD_CASES}
_FLASHINFER = {"problem_format": FLASHINFER_FORMAT}

DEFINITIONS: dict[str, PlatformDefinition] = {
    Platform.TRN1: PlatformDefinition(
        platform=Platform.TRN1, language=NKI, language_name="NKI", hardware_name="AWS Trainium (NeuronCore-v2)",
        hardware=TRN1, backends=_NKI_BACKENDS, default_backend=Backend.SIMULATOR, **_NKIBENCH,
    ),
    Platform.TRN2: PlatformDefinition(
        platform=Platform.TRN2, language=NKI, language_name="NKI", hardware_name="AWS Trainium2 (NeuronCore-v3)",
        hardware=TRN2, backends=_NKI_BACKENDS, default_backend=Backend.SIMULATOR, **_NKIBENCH,
    ),
    Platform.TRN3: PlatformDefinition(
        platform=Platform.TRN3, language=NKI, language_name="NKI", hardware_name="AWS Trainium3 (NeuronCore-v4)",
        hardware=TRN3, backends=_NKI_BACKENDS, default_backend=Backend.SIMULATOR, **_NKIBENCH,
    ),
    Platform.H100: PlatformDefinition(
        platform=Platform.H100, language=TRITON, language_name="Triton", hardware_name="NVIDIA H100 SXM GPU",
        hardware=H100, backends=_TRITON_BACKENDS, default_backend=Backend.TRITON_INTERPRETER, **_FLASHINFER,
    ),
    Platform.H200: PlatformDefinition(
        platform=Platform.H200, language=TRITON, language_name="Triton", hardware_name="NVIDIA H200 SXM GPU",
        hardware=H200, backends=_TRITON_BACKENDS, default_backend=Backend.TRITON_INTERPRETER, **_FLASHINFER,
    ),
}

# Where nothing else is said: the platform NKIBench's published numbers are for, and its default backend.
DEFAULT_PLATFORM = Platform.TRN1
DEFAULT_BACKEND = DEFINITIONS[DEFAULT_PLATFORM].default_backend


def get_definition(platform: str) -> PlatformDefinition:
    """The definition of a platform named by its value ("trn1"); ValueError for an unknown one."""
    try:
        return DEFINITIONS[platform]
    except (KeyError, TypeError):
        raise ValueError(f"unknown platform {platform!r}; expected one of {sorted(DEFINITIONS)}") from None


def platform_choices() -> list[tuple[str, str]]:
    """Every platform's (value, label) now: `Evaluation.platform`'s and the forms' choices (Django calls it when
    it needs them, so a platform registered after import is a valid choice)."""
    return Platform.choices


def backend_choices() -> list[tuple[str, str]]:
    """Every backend's (value, label) now: `Evaluation.backend`'s choices."""
    return Backend.choices


def get_backend_definition(backend: str) -> BackendDefinition:
    """The definition of a backend named by its value ("simulator"); ValueError for an unknown one."""
    try:
        return BACKENDS[backend]
    except (KeyError, TypeError):
        raise ValueError(f"unknown backend {backend!r}; expected one of {sorted(BACKENDS)}") from None


# Where each kernel language's parts live in its platform folder ("module:attribute"), imported on first use:
#   evaluate   the evaluation of a kernel source against a reference file (REFERENCE_FORMAT problems):
#              evaluate(kernel_source, reference_source, *, platform, backend, ...) -> EvaluationResult;
#              the shared reference-file pipeline, `engine.evaluator.reference_pipeline:evaluate`, for both
#   attempt    that pipeline's steps for a language whose backend records the kernel's program: a subclass of
#              `engine.evaluator.reference_pipeline.Attempt` with the language's verifier (optional)
#   peak       the platform's theoretical peak in ms from a problem's counts (optional; the pipeline's peak
#              fraction and the problem pages): peak(platform, vector_flops=, matmul_flops=, hbm_bytes=)
#   prompts    what the agents' prompts say about the language (`engine.agents.prompting.LanguagePrompts`)
#   rewrites   the offline agent's catalog of rewrites (a tuple of `engine.agents.rewrites.Rewrite`)
#   flashinfer_request
#              the evaluation of a kernel of a FLASHINFER_FORMAT problem, as the request an executor runs:
#              Class(solution=, definition=, workloads=, platform=, backend=, limits=, seeds=None) with run() and key
LANGUAGE_PARTS: dict[str, dict[str, str]] = {
    NKI: {"evaluate": "engine.evaluator.reference_pipeline:evaluate",
          "attempt": "engine.platforms.nki.pipeline:NkiAttempt",
          "peak": "engine.platforms.nki.perf.peak:theoretical_peak_ms",
          "prompts": "engine.platforms.nki.prompting:PROMPTS",
          "rewrites": "engine.platforms.nki.rewrites.catalog:CATALOG"},
    TRITON: {"prompts": "engine.platforms.triton.prompting:PROMPTS",
             "rewrites": "engine.platforms.triton.rewrites.catalog:TRITON_CATALOG",
             "flashinfer_request": "engine.platforms.triton.request:TritonEvaluationRequest"},
}


def languages() -> tuple[str, ...]:
    """The kernel languages with parts registered now."""
    return tuple(LANGUAGE_PARTS)


def load_part(language: str, part: str) -> Any:
    """A language's part ("rewrites": its offline catalog), imported from the module LANGUAGE_PARTS names."""
    try:
        reference = LANGUAGE_PARTS[language][part]
    except KeyError:
        raise ValueError(f"kernel language {language!r} has no {part!r}; known: {sorted(LANGUAGE_PARTS)}") from None
    return load_reference(reference)


def find_part(language: str, part: str) -> Any | None:
    """A language's optional part ("attempt", "peak"), or None where it registers none."""
    reference = LANGUAGE_PARTS.get(language, {}).get(part)
    return load_reference(reference) if reference else None


def load_reference(reference: str) -> Any:
    """The object a "module:attribute" reference names, its module imported if it is not yet."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def platforms_for(language: str) -> tuple[Platform, ...]:
    """The platforms whose kernels are written in `language` ("nki", "triton"), in registration order."""
    return tuple(Platform(p) for p, d in DEFINITIONS.items() if d.language == language)


def language_choices() -> list[tuple[str, str]]:
    """Every kernel language some platform runs now, with the name its definitions give it: ("nki", "NKI"), ...
    (a form's choices; a language a later registration adds is one too)."""
    return list({d.language: d.language_name for d in DEFINITIONS.values()}.items())


def platforms_storing(problem_format: str) -> tuple[Platform, ...]:
    """The platforms whose problems are stored in `problem_format` (FLASHINFER_FORMAT: those a FlashInfer-Bench
    import may target), in registration order."""
    return tuple(Platform(p) for p, d in DEFINITIONS.items() if d.problem_format == problem_format)


def register_backend(backend: BackendDefinition) -> Backend:
    """Add a backend: its name becomes a `Backend` and a valid `Evaluation.backend`. ValueError if it exists."""
    if backend.latency not in (PREDICTED, MEASURED, CORRECTNESS_ONLY, TESTING):
        raise ValueError(f"backend {backend.name!r}: latency must be one of {PREDICTED!r}, {MEASURED!r}, "
                         f"{CORRECTNESS_ONLY!r}, {TESTING!r}; got {backend.latency!r}")
    member = Backend.add(backend.name, backend.label)
    BACKENDS[member] = backend
    return member


def register_platform(definition: PlatformDefinition, label: str = "",
                      parts: dict[str, str] | None = None) -> Platform:
    """Add a platform: its value becomes a `Platform` (a valid `Evaluation.platform`, a page's choice), its
    definition answers `get_definition`, and `parts` ("evaluate", "prompts", "rewrites", ...: "module:attribute")
    are its language's, unless the language has them already. ValueError for a platform that exists or a
    backend that does not."""
    unknown = [b for b in definition.backends if b not in BACKENDS]
    if unknown or definition.default_backend not in definition.backends:
        raise ValueError(f"platform {definition.platform!r}: unknown backends {unknown} or a default backend "
                         f"{definition.default_backend!r} it does not list; register backends first")
    member = Platform.add(definition.platform, label)
    # Members, not bare strings, so callers read `.value` and `.label` of a registered platform as of a built-in.
    DEFINITIONS[member] = replace(definition, platform=member, backends=tuple(Backend(b) for b in definition.backends),
                                  default_backend=Backend(definition.default_backend))
    if parts:
        LANGUAGE_PARTS.setdefault(definition.language, dict(parts))
    return member


@contextlib.contextmanager
def registered(definitions: tuple[PlatformDefinition, ...], backends: tuple[BackendDefinition, ...] = (),
               parts: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Iterator[None]:
    """Platforms and backends registered for a while (a test's), and forgotten afterwards."""
    added_language = definitions[0].language not in LANGUAGE_PARTS if definitions else False
    try:
        for backend in backends:
            register_backend(backend)
        for definition in definitions:
            register_platform(definition, (labels or {}).get(definition.platform, ""), parts)
        yield
    finally:
        for definition in definitions:
            DEFINITIONS.pop(definition.platform, None)
            Platform.remove(definition.platform)
        for backend in backends:
            BACKENDS.pop(backend.name, None)
            Backend.remove(backend.name)
        if added_language:
            LANGUAGE_PARTS.pop(definitions[0].language, None)
