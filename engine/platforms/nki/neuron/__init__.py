"""The `neuron` backend: kernels measured and profiled on real Trainium NeuronCores (docs/evaluation.md and
docs/operations.md, "Running on a Trainium instance").

host.py     the host's devices, tools and settings (ACCELOPT_NEURON_*)
cores.py    the NeuronCore pool: one core per evaluation attempt, shared by every process on the host
backend.py  NeuronBackend: nki.baremetal, nki.benchmark, neuron-profile, in the sandbox's children
summary.py  neuron-profile's summary-json, parsed into the simulator's counter names, marked measured
failures.py SDK and runtime failures onto the failure taxonomy
"""

from __future__ import annotations

from engine.platforms.nki.neuron.backend import NeuronBackend
from engine.platforms.nki.neuron.host import NeuronHost

__all__ = ["NeuronBackend", "NeuronHost"]
