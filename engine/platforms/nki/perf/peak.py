"""Theoretical peak latency: the floor a kernel's latency is compared against (DESIGN.md sections 5 and 11)."""

from __future__ import annotations

from engine.platforms.nki.hardware import get_core_spec


def theoretical_peak_ms(platform: str, *, vector_flops: float, matmul_flops: float, hbm_bytes: float) -> float:
    """max(vector FLOPs / vector peak, matmul FLOPs / matmul peak, bytes / HBM bandwidth), in milliseconds.

    The counts are NKIBench's: from the math of the problem, not from a kernel (each input read once, each
    output written once, operations on constant scalars excluded).
    """
    for name, value in (("vector_flops", vector_flops), ("matmul_flops", matmul_flops), ("hbm_bytes", hbm_bytes)):
        if value < 0:
            raise ValueError(f"theoretical_peak_ms: {name} must be >= 0, got {value}")
    p = get_core_spec(platform)
    seconds = max(
        vector_flops / p.vector_flops_per_s,
        matmul_flops / p.matmul_fp32_flops_per_s,
        hbm_bytes / p.hbm_bytes_per_s,
    )
    return seconds * 1e3
