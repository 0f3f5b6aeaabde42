"""NVIDIA GPU constants: one `GpuSpec` per GPU the Triton platform targets, each value with its source.

Pure Python: the cuda backend's roofline divides by these peaks. Sources, abbreviated in the comments:

- [H100-DS]  NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column): 3.35 TB/s GPU memory bandwidth; FP32
             67 TFLOPS; TF32 Tensor Core 989, BF16/FP16 1,979, FP8 3,958 TFLOPS, each "with sparsity" (the
             datasheet's footnote), so the dense peaks are half: 494.5, 989.5, 1,979.
- [H200-DS]  NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column): 4.8 TB/s; the same compute figures as
             H100 SXM (same GH100 die and clocks), sparsity footnote as above.
- [HOPPER]   NVIDIA H100 Tensor Core GPU Architecture whitepaper (Hopper): H100 SXM5 has 132 SMs and a 50 MB
             L2 cache. The H200 datasheet gives neither; it is the same GH100 configuration, and the cuda
             backend records the SM count torch reports on the machine it runs on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    """An NVIDIA GPU's documented peaks: what the Triton cuda backend's roofline divides by."""

    name: str  # the platform value, e.g. "h200"
    model: str  # the marketing name, matched against torch.cuda.get_device_name()
    hbm_bytes_per_s: float
    # Dense (no 2:4 sparsity) peak FLOP/s per operand dtype, keyed by torch's dtype name without "torch."
    # ("bfloat16"); "tf32" is fp32 matmuls on Tensor Cores, "float32" the CUDA-core rate.
    peak_flops_per_s: dict[str, float]
    l2_bytes: int
    sm_count: int
    source: str  # the datasheets the numbers come from

    def peak_flops(self, dtype: str) -> float:
        """The dense peak for a dtype name ("bfloat16", "torch.float16", "float8_e4m3fn"); ValueError if unknown."""
        key = dtype.removeprefix("torch.")
        if key.startswith("float8"):
            key = "float8"
        try:
            return self.peak_flops_per_s[key]
        except KeyError:
            raise ValueError(f"no documented {self.model} peak for dtype {dtype!r}; "
                             f"known: {sorted(self.peak_flops_per_s)}") from None


# Hopper compute peaks, dense: half the datasheets' "with sparsity" Tensor Core figures. [H100-DS], [H200-DS]
_HOPPER_SXM_FLOPS = {
    "bfloat16": 989.5e12, "float16": 989.5e12, "tf32": 494.5e12, "float32": 67e12, "float8": 1979e12,
}

H100 = GpuSpec(
    name="h100", model="NVIDIA H100 SXM", hbm_bytes_per_s=3.35e12, peak_flops_per_s=dict(_HOPPER_SXM_FLOPS),
    l2_bytes=50 * 1000 * 1000, sm_count=132, source="[H100-DS] H100 SXM; [HOPPER] SMs and L2",
)
H200 = GpuSpec(
    name="h200", model="NVIDIA H200 SXM", hbm_bytes_per_s=4.8e12, peak_flops_per_s=dict(_HOPPER_SXM_FLOPS),
    l2_bytes=50 * 1000 * 1000, sm_count=132, source="[H200-DS] H200 SXM; [HOPPER] SMs and L2 (same GH100)",
)

GPU_SPECS: dict[str, GpuSpec] = {spec.name: spec for spec in (H100, H200)}


def get_gpu_spec(name: str) -> GpuSpec:
    try:
        return GPU_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown GPU platform {name!r}; expected one of {sorted(GPU_SPECS)}") from None
