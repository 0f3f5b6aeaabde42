"""NKI CPU simulator: run unmodified NKI kernels on numpy, with the hardware's rules and an instruction trace.

Public API:
- `simulate(kernel, inputs, platform="trn1", record_trace=True, workers=1) -> Simulation` (`workers=2`: split
  loops run in two processes, same results; see parallel.py)
- `install()`: make `neuronxcc.nki` (SDK 2.26 API) and top-level `nki` (SDK 2.30 API) importable in this
  process. Only the sandboxed evaluation child calls it.
- `errors`: `NKIError`, `NKICompileError`, `NKIRuntimeError`.
"""

from __future__ import annotations

# Bumped whenever simulated results or the trace can change; evaluations record it.
SIMULATOR_VERSION = "1.0"

from . import errors  # noqa: E402
from .errors import NKICompileError, NKIError, NKIRuntimeError  # noqa: E402
from .namespaces import install  # noqa: E402
from .simulate import JitKernel, Simulation, jit, simulate, simulate_kernel  # noqa: E402

__all__ = ["SIMULATOR_VERSION", "JitKernel", "NKICompileError", "NKIError", "NKIRuntimeError", "Simulation", "errors", "install",
           "jit", "simulate", "simulate_kernel"]
