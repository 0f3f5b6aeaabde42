"""A toy platform, for one test only: kernels are plain numpy functions and its one backend predicts a latency
of a microsecond per bytecode instruction of the kernel function. The product never registers it;
`tests/platforms/test_toy_platform.py` does (`registered(DEFINITIONS, BACKENDS, PARTS)`), and runs it through an
upload, an evaluation, an offline run and the leaderboard, to show that a platform is a folder and one
registration. It lives under engine/ only because the sandbox child must import its backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.platforms.registry import PREDICTED, BackendDefinition, PlatformDefinition

LANGUAGE = "toy"
PLATFORM = "toy-cpu"
BACKEND = "toy-model"


@dataclass(frozen=True)
class ToyCpu:
    """The toy hardware: what its backend's cost model and its prompt rules read."""

    name: str
    microseconds_per_instruction: float


TOY_CPU = ToyCpu(name=PLATFORM, microseconds_per_instruction=1.0)

BACKENDS = (BackendDefinition(BACKEND, "Toy model (bytecode instructions)", "engine.platforms.toy.backend:ToyBackend",
                              PREDICTED),)
DEFINITIONS = (PlatformDefinition(platform=PLATFORM, language=LANGUAGE, language_name="toy numpy",
                                  hardware_name="the toy CPU", hardware=TOY_CPU, backends=(BACKEND,),
                                  default_backend=BACKEND),)
# Its problems are reference files, evaluated by the reference pipeline (static check, sandboxed reference and
# kernel children, comparison) that NKI's kernels use too.
PARTS = {"evaluate": "engine.platforms.nki.pipeline:evaluate",
         "prompts": "engine.platforms.toy.prompting:PROMPTS",
         "rewrites": "engine.platforms.toy.rewrites:CATALOG"}
