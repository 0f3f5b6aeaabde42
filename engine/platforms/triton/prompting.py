"""What the agents' prompts say for Triton kernels on NVIDIA GPUs: the GPU rules (from the platform's
`GpuSpec`), the meaning of each profile field the Triton backends report, and what a profile without a
latency means: the registry's "prompts" part for Triton (`PROMPTS`). The templates are `prompts/*.md` beside
this file (with `contract.md`, the entry-point contract every Triton template includes).
"""

from __future__ import annotations

from typing import Any

from engine.agents.prompting import LanguagePrompts

# Profile fields of the Triton backends and what each tells the Planner (the cuda backend measures; the
# interpreter reports none of them). Fields not listed are shown without a meaning.
TRITON_PROFILE_MEANINGS: dict[str, str] = {
    "latency_ms": "median GPU time of one call of `run` (CUDA events, L2 flushed between repetitions); the "
                  "number to lower",
    "peak_fraction": "roofline time (the workload's bytes at HBM bandwidth or its FLOPs at the dtype's peak, "
                     "whichever is longer) over this latency; 1.0 is the hardware limit",
    "spread": "relative spread of the timed repetitions; differences smaller than this are noise",
    "bytes": "bytes the workload must move at least (inputs read once, outputs written once)",
    "flops": "floating-point operations of the workload",
    "parent_wall_s": "seconds the whole timed request took, seen from outside the kernel's process (a check "
                     "on the events, not the kernel's time)",
}

# What the profile says when there is no latency: the interpreter checks correctness only.
NO_LATENCY = ("(correctness only: this kernel ran on Triton's CPU interpreter, which checks its outputs but "
              "measures no time; there is no profile. Plan from the code: what would be slow on the GPU.)")


def triton_rules(spec: Any) -> list[str]:
    """The rules a Triton kernel must follow, with the target GPU's documented peaks (a `GpuSpec`)."""
    bf16 = spec.peak_flops("bfloat16") / 1e12
    hbm = spec.hbm_bytes_per_s / 1e12
    ridge = spec.peak_flops("bfloat16") / spec.hbm_bytes_per_s
    return [
        f"# GPU rules ({spec.model}: {hbm:.2f} TB/s HBM, {bf16:.0f} TFLOP/s dense bf16/fp16 Tensor Core peak, "
        f"{spec.sm_count} SMs, {spec.l2_bytes // 1_000_000} MB L2)",
        "- A launch `kernel[grid](...)` runs one program per grid point; each program is `num_warps` warps of 32 "
        f"threads on one SM. Give the grid at least a few programs per SM ({spec.sm_count} SMs) so every SM "
        "has work and memory latency is hidden.",
        "- Offsets from `tl.arange` run past a tensor's end whenever its size is not a multiple of the block: "
        "every such `tl.load` needs `mask=` and `other=` (the neutral value: 0 for a sum, -inf for a max), "
        "and every such `tl.store` needs `mask=`.",
        "- `tl.arange` extents and block sizes (`tl.constexpr`) must be powers of two; `tl.dot` needs blocks of "
        "at least 16 in each dimension, takes bf16/fp16 (or tf32) inputs and accumulates in float32.",
        f"- A kernel with fewer than about {ridge:.0f} FLOPs per byte moved is memory-bound: read each input "
        "once, write each output once, fuse consecutive elementwise steps, and keep accesses contiguous and "
        "aligned (`tl.multiple_of`, `tl.max_contiguous`) so loads and stores are vectorized.",
        "- Loops over K or over a sequence overlap their loads with compute when pipelined (`num_stages`, "
        "`tl.range(..., num_stages=)`); each stage costs shared memory.",
        "- `@triton.autotune(configs=[triton.Config({'BLOCK': ...}, num_warps=..., num_stages=...)], key=[...])` "
        "times each configuration on the first call for each key: do not also pass the tuned parameters at "
        "the launch, and make the grid a function of them (`grid = lambda META: (triton.cdiv(n, "
        "META['BLOCK']),)`).",
    ]


# A Triton solution's usual header (FlashInfer-Bench's main.py; prompts/triton/contract.md).
TRITON_IMPORTS: tuple[tuple[str, str], ...] = (
    ("math", "import math"),
    ("torch", "import torch"),
    ("triton", "import triton"),
    ("tl", "import triton.language as tl"),
)


PROMPTS = LanguagePrompts(rules=triton_rules, profile_meanings=TRITON_PROFILE_MEANINGS, no_profile=NO_LATENCY,
                          standard_imports=TRITON_IMPORTS)
