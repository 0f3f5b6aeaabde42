"""Duration of every instruction of a trace on its engine, vectorised over the trace's columns.

Compute engines follow the `nki.isa` "estimated instruction cost" formulas (cited in benchmark/hardware.py):
a per-element rate times N (elements per partition), floored at MIN_II, plus a fixed dispatch cost. DMA
durations are not fixed here: they depend on how the queues share HBM bandwidth, so the schedule computes
them from `dma_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchmark.hardware import NeuronCoreSpec
from benchmark.nki.trace import Engine, MemorySpace, Trace

# Per-element cycle rates by op name, for ops whose cost differs from the 1-cycle-per-element default.
# Names are matched after lower-casing and stripping a namespace ("nisa.tensor_tensor" -> "tensor_tensor").
_TWO_CYCLE_OPS = {"scalar_tensor_tensor", "tensor_tensor_scan", "tensor_copy_predicated"}
_REDUCE_EXTRA_OPS = {"activation_reduce", "tensor_scalar_reduce"}  # + MIN_II for the accumulator read-out
_BINARY_OPS = {
    "tensor_tensor", "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "equal",
    "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
    "bitwise_and", "bitwise_or", "bitwise_xor", "mod", "fmod",
}
_GPSIMD_START_OPS = {"iota", "affine_select", "local_gather"}
_NO_MIN_II_OPS = {"tensor_reduce", "max8", "nc_find_index8"}
# Ops the compiler places on Vector or Scalar Engine as load allows (their `engine=` defaults to unknown and
# both engines cost max(MIN_II, N)); the schedule picks whichever of the two is free first.
_FLEXIBLE_OPS = {"tensor_scalar", "tensor_copy", "copy", "memset"}

_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "int32": 4, "uint32": 4, "tfloat32": 4,
    "float16": 2, "bfloat16": 2, "fp16": 2, "bf16": 2, "int16": 2, "uint16": 2,
    "int8": 1, "uint8": 1, "float8_e4m3": 1, "float8_e5m2": 1, "fp8": 1, "bool": 1,
    "float64": 8, "int64": 8,
}


def short_op_name(name: str) -> str:
    return name.lower().rsplit(".", 1)[-1]


def dtype_bytes(name: str) -> int:
    return _DTYPE_BYTES.get(name.lower().rsplit(".", 1)[-1], 4)


@dataclass(frozen=True)
class InstructionCosts:
    seconds: np.ndarray  # compute duration per instruction (0 for DMA rows)
    dma_bytes: np.ndarray  # bytes one DMA moves (0 for compute rows)
    dma_touches_hbm: np.ndarray  # bool: the DMA reads or writes HBM (else SBUF<->SBUF)
    dma_rows: np.ndarray  # contiguous rows (descriptors) of each DMA
    flexible: np.ndarray  # bool: may run on Vector or Scalar Engine, whichever frees first


def _per_op(trace: Trace, table: dict[str, float] | set[str], default: float = 0.0) -> np.ndarray:
    """Look an op-name property up once per distinct op, then broadcast it to the rows by opcode."""
    values = np.empty(len(trace.op_names), dtype=np.float64)
    for i, name in enumerate(trace.op_names):
        short = short_op_name(name)
        if isinstance(table, set):
            values[i] = 1.0 if short in table else default
        else:
            values[i] = table.get(short, default)
    return values[np.asarray(trace.columns["opcode"], dtype=np.int64)] if len(values) else np.zeros(0)


def _reads_psum(trace: Trace) -> np.ndarray:
    """Per instruction: does any of its read accesses hit a PSUM tensor."""
    n = len(trace)
    acc = trace.access
    if len(acc["tensor"]) == 0:
        return np.zeros(n, dtype=bool)
    space = np.array([int(t.space) for t in trace.tensors], dtype=np.int8)
    owner = np.repeat(np.arange(n), np.asarray(trace.columns["access_count"], dtype=np.int64))
    hit = (space[acc["tensor"]] == MemorySpace.PSUM) & (acc["is_write"] == 0)
    out = np.zeros(n, dtype=bool)
    out[owner[hit]] = True
    return out


def _large_inputs(trace: Trace) -> np.ndarray:
    """Per instruction: number of read accesses at least half as large as its largest read (tile operands)."""
    n = len(trace)
    acc = trace.access
    if len(acc["tensor"]) == 0:
        return np.zeros(n, dtype=np.int64)
    owner = np.repeat(np.arange(n), np.asarray(trace.columns["access_count"], dtype=np.int64))
    size = (acc["part_hi"] - acc["part_lo"]).astype(np.int64) * (acc["byte_hi"] - acc["byte_lo"])
    size = np.where(acc["is_write"] == 0, size, 0)
    largest = np.zeros(n, dtype=np.int64)
    np.maximum.at(largest, owner, size)
    big = (size > 0) & (2 * size >= largest[owner])
    return np.bincount(owner[big], minlength=n)


def instruction_costs(trace: Trace, platform: NeuronCoreSpec) -> InstructionCosts:
    c = trace.columns
    engine = np.asarray(c["engine"], dtype=np.int64)
    n_elem = np.asarray(c["free_elems"], dtype=np.float64)
    partitions = np.maximum(np.asarray(c["partitions"], dtype=np.float64), 1.0)
    min_ii = platform.min_ii_cycles

    # --- Vector / Scalar / GpSimd: rate * N, floored at MIN_II ----------------------------------------
    rate = np.ones(len(trace), dtype=np.float64)
    is_binary = _per_op(trace, _BINARY_OPS) > 0
    # An unnamed elementwise op reading two full tiles is a tensor_tensor as far as cost goes.
    is_binary |= (_large_inputs(trace) >= 2) & (engine == Engine.VECTOR)
    # tensor_tensor: 1 cycle/elem if one operand is in PSUM, else the slower SBUF+SBUF rate.
    is_isa_tt = _per_op(trace, {"tensor_tensor"}) > 0
    sbuf_rate = np.where(is_isa_tt, platform.tensor_tensor_cycles_per_elem, platform.nl_binary_cycles_per_elem)
    tt_rate = np.where(_reads_psum(trace), 1.0, sbuf_rate)
    rate = np.where(is_binary & (engine != Engine.SCALAR), tt_rate, rate)
    rate = np.where(_per_op(trace, _TWO_CYCLE_OPS) > 0, 2.0, rate)
    recip = _per_op(trace, {"reciprocal"}) > 0
    rate = np.where(recip & (engine == Engine.VECTOR), platform.reciprocal_cycles_per_elem, rate)
    rate = np.where(recip & (engine == Engine.GPSIMD), platform.reciprocal_cycles_per_elem, rate)
    rate = np.where(_per_op(trace, {"bn_aggr"}) > 0, 13.0 / 3.0, rate)
    floor = np.where(_per_op(trace, _NO_MIN_II_OPS) > 0, 0.0, min_ii)
    cycles = np.maximum(floor, rate * n_elem)
    cycles += np.where(_per_op(trace, _REDUCE_EXTRA_OPS) > 0, min_ii, 0.0)
    gp_start = (engine == Engine.GPSIMD) | (_per_op(trace, _GPSIMD_START_OPS) > 0)
    cycles = np.where(gp_start, np.maximum(cycles, platform.gpsimd_start_cycles + rate * n_elem), cycles)
    cycles += platform.engine_dispatch_cycles
    seconds = cycles / platform.engine_clock_hz

    # --- Tensor Engine: passes * max(min(64, N_stationary), N_moving) -----------------------------------
    flops = np.asarray(c["flops"], dtype=np.float64)
    # flops = 2 * K * M * N with K = partitions (contraction) and N = free_elems (moving free size).
    n_stationary = np.where(n_elem > 0, flops / (2.0 * partitions * np.maximum(n_elem, 1.0)), 0.0)
    dtype_names = [d.lower() for d in trace.dtype_names]
    is_fp32 = np.array([d.endswith("float32") and "tfloat" not in d for d in dtype_names] or [True])
    passes = np.where(is_fp32[np.asarray(c["dtype"], dtype=np.int64)] if dtype_names else True,
                      platform.tensor_fp32_passes, 1.0)
    pe_cycles = passes * np.maximum(np.minimum(platform.tensor_min_stationary, n_stationary), n_elem)
    pe_cycles = pe_cycles / platform.tensor_efficiency + platform.tensor_fixed_cycles
    tensor_seconds = pe_cycles / platform.tensor_clock_hz
    seconds = np.where(engine == Engine.TENSOR, tensor_seconds, seconds)

    # --- DMA: bytes moved; the schedule turns them into time ---------------------------------------------
    is_dma = engine == Engine.DMA
    hbm = np.asarray(c["hbm_read"], dtype=np.int64) + np.asarray(c["hbm_write"], dtype=np.int64)
    onchip = np.maximum.reduce([np.asarray(c[k], dtype=np.int64) for k in
                                ("sbuf_read", "sbuf_write", "psum_read", "psum_write")])
    moved = np.where(hbm > 0, np.maximum(np.asarray(c["hbm_read"]), np.asarray(c["hbm_write"])), onchip)
    seconds = np.where(is_dma, 0.0, seconds)
    return InstructionCosts(
        seconds=seconds,
        dma_bytes=np.where(is_dma, moved, 0).astype(np.float64),
        dma_touches_hbm=is_dma & (hbm > 0),
        dma_rows=np.where(is_dma, partitions, 0.0),
        flexible=(_per_op(trace, _FLEXIBLE_OPS) > 0) & ((engine == Engine.VECTOR) | (engine == Engine.SCALAR)),
    )
