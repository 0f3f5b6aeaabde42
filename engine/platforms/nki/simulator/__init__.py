"""NKI CPU simulator: run unmodified NKI kernels on numpy, with the hardware's rules and an instruction trace.

Public API:
- `simulate(kernel, inputs, platform="trn1", record_trace=True, workers=1) -> Simulation` (`workers=2`: split
  loops run in two processes, same results; see parallel.py)
- `install()`: make `neuronxcc.nki` (SDK 2.26 API) and top-level `nki` (SDK 2.30 API) importable in this
  process. Only the sandboxed evaluation child calls it.
- `errors`: `NKIError`, `NKICompileError`, `NKIRuntimeError`.
"""

from __future__ import annotations

# Bumped whenever simulated results or the trace can change; evaluations record it, and cached evaluations
# are keyed on it. tests/versions/test_versions.py fails when the 14 NKIBench mini cases' traces or outputs
# move without a bump (tests/versions/digests.json holds them, recorded under this version).
# 1.1 (issue 17): 1.0 stayed through fixes to computed values (e.g. 821f31a: an overlapping reduction in a
# split loop lost a value; 12a883f: queued PSUM matmuls accumulated in issue order), so results cached
# under 1.0 may come from the wrong code. Nothing else changed with the bump.
# 1.2 (issue 32): matmul products no longer depend on the CPU's BLAS kernel or thread count
# (exact_matmul.py): each element is the float32 rounding of a fixed-order float64 sum, so the last bits of
# matmul results moved (traces and the performance model's predictions did not).
# 1.3 (issue 34): results of existing kernels can change: one-element tiles ((1, 1), (1,)) were copies, so their
# loads and stores read NaN and memsets into them were lost; float -> int casts now round half to even and
# saturate (they truncated and wrapped); nl.abs_max keeps the sign; `+=` of a matmul into a never-written PSUM
# tile starts at zero (it was an error). The 14 NKIBench kernels' traces and outputs did not move.
# 1.4 (issue 35): an nl.loop_reduce whose result lands in a fresh tile of its own (nothing accumulates) is labelled
# `copy` in the trace, which is what it runs (it was `loop_reduce`, which the model priced apart from a copy); an
# `engine=` its nki.isa page does not name is a compile error (tensor_tensor on the Scalar or Tensor Engine ran, and
# was priced 1.7x cheaper on the Scalar Engine; semantics/ops.py ENGINE_CHOICES). The 14 NKIBench kernels' traces and
# outputs did not move.
# 1.5 (issue 34): kernels that failed now run, so a failure cached under 1.3 may be wrong: a reshaped tile can be
# indexed (`tile.reshape(shape)[a:b]`), an HBM tensor viewed as another dtype stored alike (`t.view(nl.float8_e5m2)`),
# and nc_matmul takes perf_mode double_row (fp8, NeuronCore-v3+). Results of kernels that ran did not move.
# 1.6 (issue 34): the last names of the NKI 0.6 reference run (NkiInstruction, dma_compute, rand_get_state /
# rand_set_state, topk, core_barrier, sendrecv, quantize_mx, nc_matmul_mx, the packed MX types), so a failure cached
# under 1.5 may be wrong; destination-first nki.isa calls return an NkiInstruction (they returned None). An
# elementwise or free-axis reduction instruction may read never-written partitions whose result partitions land
# where nothing was written (they stay unwritten: semantics.PARTITION_LOCAL), and a masked reduction's window
# follows the result's axes. Results of kernels that ran did not move (the 14 NKIBench digests are unchanged).
SIMULATOR_VERSION = "1.6"

from engine.platforms.nki.simulator import errors  # noqa: E402
from engine.platforms.nki.simulator.errors import NKICompileError, NKIError, NKIRuntimeError  # noqa: E402
from engine.platforms.nki.simulator.semantics.namespaces import install  # noqa: E402
from engine.platforms.nki.simulator.simulate import JitKernel, Simulation, jit, simulate, simulate_kernel  # noqa: E402

__all__ = ["SIMULATOR_VERSION", "JitKernel", "NKICompileError", "NKIError", "NKIRuntimeError", "Simulation", "errors", "install",
           "jit", "simulate", "simulate_kernel"]
