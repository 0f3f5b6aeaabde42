"""Backends: what runs a kernel and says how fast it is, behind one small interface, chosen by name. Each
name's definition (label, what its latency is, where its class lives) is in `engine.platforms.registry`;
its implementation lives with its platform (the simulator: `engine.platforms.nki.backend`; neuron:
`engine.platforms.nki.neuron`; Triton's: `engine.platforms.triton.backends`) and is imported by the name the
registry gives. The one platform-neutral backend is here:

* `null`: calls the kernel as a plain Python function on numpy arrays, with no trace and no latency. It
  exists to test the sandbox and the pipeline without a simulator.

`prepare`, `run` and `measure` execute inside the kernel child; `profile` inside the verifier child (a
backend with a trace) and `measured_profile` inside the profile child; `version` and `placement` in the parent. Timing rules for measured backends are in
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
from engine.platforms.registry import Backend, get_backend_definition, load_reference


class NullBackend(BackendImplementation):
    name = Backend.NULL.value

    def version(self) -> str:
        return "null-1"

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        return BackendRun(outputs=as_output_tuple(kernel(*inputs)))


def get_backend(name: str) -> BackendImplementation:
    """The implementation of the backend called `name`, as its registry definition names it ("module:Class")."""
    return load_backend(get_backend_definition(name).implementation)


def backend_reference(backend: BackendImplementation) -> str:
    """Where a backend's class lives ("module:Class"): what a sandbox child is told, so it loads the same class
    without consulting a registry of its own (a platform registered at run time is known to the parent only)."""
    return f"{type(backend).__module__}:{type(backend).__qualname__}"


def load_backend(reference: str) -> BackendImplementation:
    """A new instance of the BackendImplementation class that `reference` ("module:Class") names."""
    implementation = load_reference(reference)
    if not (isinstance(implementation, type) and issubclass(implementation, BackendImplementation)):
        raise ValueError(f"{reference!r} is not a BackendImplementation class")
    return implementation()
