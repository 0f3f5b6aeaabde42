"""The roofline floor of a workload on a GPU: max(FLOPs / peak FLOP/s for the dtype, bytes / HBM bandwidth).

Fraction of peak = floor / measured latency (1.0 is the hardware limit). The counts come from the math of the
operator, not from a kernel (docs/evaluation.md, "Triton" section, has the formulas):

- bytes: every input tensor read once and every output written once ("minimal bytes"); for paged attention,
  only the KV pages the index tensors name (page ids counted once), not the whole cache;
- FLOPs per op_type: gemm 2*M*N*K (C = A @ B.T, A [M, K], B [N, K]); rmsnorm (and fused_add_rmsnorm) 0: they
  are memory-bound by orders of magnitude, so only bytes count; attention (gqa_paged, gqa_ragged, mla_paged):
  2 FLOPs per multiply-add of QK^T and of PV over the (query, key) pairs the mask allows: decode pairs = the
  KV tokens of each query's sequence; causal prefill pairs per sequence = sum over its q rows i of
  (kv_len - q_len + i + 1). GQA: 4 * head_dim per pair and query head; MLA: 2 * (ckv + kpe) + 2 * ckv.
  An op_type not listed counts bytes only (the floor is then a lower bound).
- the peak for the dtype: `GpuSpec.peak_flops` of the first input's dtype (fp32 operands: the CUDA-core rate).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.platforms.triton.flashinfer import DTYPE_BYTES, Definition, Workload
from engine.platforms.triton.hardware import GpuSpec


@dataclass(frozen=True)
class Roofline:
    flops: float
    bytes: float
    dtype: str
    floor_s: float
    bound: str  # "compute" or "memory"


def _numel(definition: Definition, name: str, axes: Mapping[str, int], *, outputs: bool = False) -> int:
    spec = (definition.outputs if outputs else definition.inputs)[name]
    count = 1
    for axis in spec.shape or ():
        count *= axes[axis]
    return count if spec.shape is not None else 0


def _prefix_lengths(inputs: Mapping[str, Any], name: str) -> list[int] | None:
    indptr = inputs.get(name)
    if indptr is None or not hasattr(indptr, "tolist"):
        return None
    values = [int(v) for v in indptr.tolist()]
    return [b - a for a, b in zip(values, values[1:], strict=False)]


def attention_pairs(definition: Definition, axes: Mapping[str, int], inputs: Mapping[str, Any]) -> int:
    """(query, key) pairs an attention workload computes: decode one query per sequence, causal prefill."""
    kv = _prefix_lengths(inputs, "kv_indptr")
    if kv is None:
        kv = [axes.get("num_kv_indices", axes.get("total_kv", 0))]
    qo = _prefix_lengths(inputs, "qo_indptr")
    if qo is None:  # decode: one query row per sequence
        return sum(kv)
    pairs = 0
    for q_len, kv_len in zip(qo, kv, strict=False):
        if "causal" in definition.name:
            pairs += sum(min(kv_len, kv_len - q_len + i + 1) for i in range(q_len) if kv_len - q_len + i + 1 > 0)
        else:
            pairs += q_len * kv_len
    return pairs


def workload_flops(definition: Definition, axes: Mapping[str, int], inputs: Mapping[str, Any]) -> float:
    op = definition.op_type
    if op == "gemm":
        return 2.0 * axes["M"] * axes["N"] * axes["K"]
    if op in ("gqa_paged", "gqa_ragged"):
        return 4.0 * axes["num_qo_heads"] * axes["head_dim"] * attention_pairs(definition, axes, inputs)
    if op == "mla_paged":
        ckv, kpe = axes["head_dim_ckv"], axes["head_dim_kpe"]
        return (2.0 * (ckv + kpe) + 2.0 * ckv) * axes["num_qo_heads"] * attention_pairs(definition, axes, inputs)
    return 0.0


def workload_bytes(definition: Definition, axes: Mapping[str, int], inputs: Mapping[str, Any]) -> float:
    total = 0.0
    pages = inputs.get("kv_indices")
    touched = None
    if pages is not None and hasattr(pages, "unique") and "num_pages" in axes and axes["num_pages"]:
        touched = int(pages.unique().numel()) / axes["num_pages"]  # fraction of the cache the indices name
    for name, spec in definition.inputs.items():
        size = _numel(definition, name, axes) * DTYPE_BYTES[spec.dtype]
        if touched is not None and spec.shape and spec.shape[0] == "num_pages":
            size *= touched
        total += size
    for name, spec in definition.outputs.items():
        total += _numel(definition, name, axes, outputs=True) * DTYPE_BYTES[spec.dtype]
    return total


def roofline(definition: Definition, workload: Workload, gpu: GpuSpec, inputs: Mapping[str, Any] | None = None) -> Roofline:
    axes = definition.axis_values(workload)
    inputs = inputs or {}
    flops = workload_flops(definition, axes, inputs)
    data = workload_bytes(definition, axes, inputs)
    dtype = next(iter(definition.inputs.values())).dtype
    compute_s = flops / gpu.peak_flops(dtype) if flops else 0.0
    memory_s = data / gpu.hbm_bytes_per_s
    return Roofline(flops=flops, bytes=data, dtype=dtype, floor_s=max(compute_s, memory_s),
                    bound="compute" if compute_s > memory_s else "memory")
