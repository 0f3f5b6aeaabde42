"""Our own FlashInfer-Bench-format samples (engine/platforms/triton/samples): definitions, workloads and Triton
solutions written for this project (none copied from FlashInfer-Bench or AccelOpt), used by the tests, the
GPU check and as starting kernels.

- definitions/<name>.json: rmsnorm_h128, fused_add_rmsnorm_h7168 / _h256, gemm_n28672_k4096 / gemm_n96_k64;
- workloads/<name>.json: the issue-24 sizes (rmsnorm batch 520,128; fused_add_rmsnorm batch 14,521; gemm M
  8,192) and small ones for the CPU interpreter;
- solutions/<kernel>.py: one Triton source per operator (`run` returns the outputs), wrapped as a Solution.
"""

from __future__ import annotations

from pathlib import Path

from engine.platforms.triton.flashinfer import (
    Definition,
    Solution,
    Workload,
    load_definition,
    load_workloads,
    solution_from_kernel,
)

SAMPLES = Path(__file__).resolve().parent / "samples"

# definition name -> our solution's source file
SOLUTION_FILES = {
    "rmsnorm_h128": "rmsnorm.py", "fused_add_rmsnorm_h7168": "fused_add_rmsnorm.py",
    "fused_add_rmsnorm_h256": "fused_add_rmsnorm.py", "gemm_n28672_k4096": "gemm.py", "gemm_n96_k64": "gemm.py",
}

# The GPU check's problems (issue 24's sizes) and the interpreter's small stand-ins, as workload file names.
GPU_WORKLOADS = ("rmsnorm_h128_b520128", "fused_add_rmsnorm_h7168_b14521", "gemm_n28672_k4096_m8192")
SMALL_WORKLOADS = ("rmsnorm_h128_b7", "fused_add_rmsnorm_h256_b5", "gemm_n96_k64_m40")


def definition(name: str) -> Definition:
    path = SAMPLES / "definitions" / f"{name}.json"
    if not path.exists():
        raise KeyError(f"no sample definition {name!r}; have {sorted(p.stem for p in (SAMPLES / 'definitions').glob('*.json'))}")
    return load_definition(path)


def workload(name: str) -> Workload:
    return load_workloads(SAMPLES / "workloads" / f"{name}.json")[0]


def kernel_source(definition_name: str) -> str:
    return (SAMPLES / "solutions" / SOLUTION_FILES[definition_name]).read_text()


def solution(definition_name: str) -> Solution:
    """Our Triton solution for a sample definition, in FlashInfer-Bench's Solution form."""
    return solution_from_kernel(kernel_source(definition_name), name=f"accelopt_studio_{definition_name}",
                                definition=definition_name, author="accelopt-studio",
                                description="Written for AccelOpt Studio's GPU check (issue 24).")
