"""Duration of every instruction of a trace on its engine, vectorised over the trace's columns.

Compute engines follow the `nki.isa` "estimated instruction cost" formulas (cited in engine/platforms/nki/hardware.py):
a per-element rate times N (elements per partition), floored at MIN_II, plus a fixed dispatch cost. DMA
durations are not fixed here: they depend on how the DMAs share HBM and the DMA engines, so the schedule
computes them from `dma_bytes` and `dma_engine_s`, the engine time of the DMA's bytes and of its contiguous
buffers (dma_descriptors: the access pattern seen through the trace's bounding boxes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.platforms.nki.hardware import NeuronCoreSpec
from engine.platforms.nki.simulator.semantics.ops import COST_CLASSES
from engine.platforms.nki.simulator.trace import Engine, MemorySpace, Trace

# Per-element cycle rates by op name, for ops whose cost differs from the 1-cycle-per-element default: one table
# with what each op runs (engine/platforms/nki/simulator/semantics/ops.py), which the verifier holds every recorded label to (issue 35).
# Names are matched after lower-casing and stripping a namespace ("nisa.tensor_tensor" -> "tensor_tensor").
_TWO_CYCLE_OPS = set(COST_CLASSES["two_cycle"])
_REDUCE_EXTRA_OPS = set(COST_CLASSES["reduce_extra"])  # + MIN_II for the accumulator read-out
_BINARY_OPS = set(COST_CLASSES["binary"])
_GPSIMD_START_OPS = set(COST_CLASSES["gpsimd_start"])
_NO_MIN_II_OPS = set(COST_CLASSES["no_min_ii"])
# Ops the compiler places on Vector or Scalar Engine as load allows (their `engine=` defaults to unknown and
# both engines cost max(MIN_II, N)); the schedule picks whichever of the two is free first.
_FLEXIBLE_OPS = set(COST_CLASSES["flexible"])
# Tensor Engine matmuls whose stationary operand is ones and zeros (the compiler's partition broadcasts).
_ONEZERO_OPS = set(COST_CLASSES["onezero"])

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
    dma_rows: np.ndarray  # contiguous buffers (descriptors) of each DMA: one per partition and contiguous run
    flexible: np.ndarray  # bool: may run on Vector or Scalar Engine, whichever frees first
    # DMA engine time (engine-seconds) of each DMA: bytes at one engine's rate plus a per-descriptor cost
    # (dma_engine_seconds), and the engines it can spread over (one per partition, at most dma_queues).
    dma_engine_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dma_lanes: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # Duration of each instruction if it runs on the Scalar Engine (its own clock): what a flexible op the
    # schedule moves there takes. Empty: the same as `seconds`.
    scalar_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # bool: a flexible op the schedule gives the Scalar Engine whatever the balance (it reads PSUM).
    to_scalar: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    # The DMA queue of each DMA, for dma_queue_issue_s: 0 loads from HBM, 1 stores to HBM, 2 SBUF to SBUF.
    dma_queue: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


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


def _free_axis_broadcast(trace: Trace) -> np.ndarray:
    """Per instruction: whether one of its reads spans all its partitions but less than half the bytes per
    partition of its widest read (an operand broadcast along the free axis, [P, 1]; a partition broadcast, one
    partition wide, is not one)."""
    n = len(trace)
    acc = trace.access
    if len(acc["tensor"]) == 0:
        return np.zeros(n, dtype=bool)
    owner = np.repeat(np.arange(n), np.asarray(trace.columns["access_count"], dtype=np.int64))
    reads = acc["is_write"] == 0
    span = (acc["byte_hi"] - acc["byte_lo"]).astype(np.int64)
    widest = np.zeros(n, dtype=np.int64)
    np.maximum.at(widest, owner[reads], span[reads])
    partitions = np.asarray(trace.columns["partitions"], dtype=np.int64)
    full_height = (acc["part_hi"] - acc["part_lo"]).astype(np.int64) >= partitions[owner]
    narrow = reads & full_height & (2 * span < widest[owner])
    return np.bincount(owner[narrow], minlength=n) > 0


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
    # A binary is priced by its operands, never by which of its labels (tensor_tensor, add, ...) it carries
    # (semantics/ops.py): reading two full tiles it is a tensor_tensor; with its other operand broadcast along the
    # free axis ([P, 1]) it is a tensor_scalar on the device, one cycle per element like any elementwise op (a
    # partition broadcast is a full tile by then: lowering.py). An unnamed elementwise op reading two full tiles on
    # the Vector Engine is a tensor_tensor too.
    is_binary = (_per_op(trace, _BINARY_OPS) > 0) & ~_free_axis_broadcast(trace)
    is_binary |= (_large_inputs(trace) >= 2) & (engine == Engine.VECTOR)
    # [ISA] tensor_tensor: 1 cycle/elem if one operand is in PSUM, else the slower SBUF+SBUF rate (perf-13: nl.add
    # & co. had a rate of their own, 1.2, that the tensor_tensor label did not get).
    tt_rate = np.where(_reads_psum(trace), 1.0, platform.tensor_tensor_cycles_per_elem)
    rate = np.where(is_binary & (engine != Engine.SCALAR), tt_rate, rate)
    rate = np.where(_per_op(trace, _TWO_CYCLE_OPS) > 0, 2.0, rate)
    # [ISA] tensor_tensor_scan: 2N, as a tensor_tensor with both inputs in SBUF.
    rate = np.where(_per_op(trace, {"tensor_tensor_scan"}) > 0, platform.tensor_tensor_cycles_per_elem, rate)
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
    # [ARCH-V2]: each engine counts its own cycles; Scalar and GpSimd run faster than Vector.
    vector_hz = platform.engine_clock_hz
    scalar_hz = platform.scalar_clock_hz or vector_hz
    gpsimd_hz = platform.gpsimd_clock_hz or vector_hz
    flexible = (_per_op(trace, _FLEXIBLE_OPS) > 0) & ((engine == Engine.VECTOR) | (engine == Engine.SCALAR))
    # A flexible op's `seconds` is its Vector time, `scalar_seconds` its Scalar time; the schedule picks one.
    on_scalar = (engine == Engine.SCALAR) & ~flexible
    clock = np.where(on_scalar, scalar_hz, np.where(engine == Engine.GPSIMD, gpsimd_hz, vector_hz))
    seconds = cycles / clock
    scalar_seconds = cycles / scalar_hz

    # --- Tensor Engine: passes * max(min(64, N_stationary), N_moving) -----------------------------------
    flops = np.asarray(c["flops"], dtype=np.float64)
    # flops = 2 * K * M * N with K = partitions (contraction) and N = free_elems (moving free size).
    n_stationary = np.where(n_elem > 0, flops / (2.0 * partitions * np.maximum(n_elem, 1.0)), 0.0)
    dtype_names = [d.lower() for d in trace.dtype_names]
    is_fp32 = np.array([d.endswith("float32") and "tfloat" not in d for d in dtype_names] or [True])
    passes = np.where(is_fp32[np.asarray(c["dtype"], dtype=np.int64)] if dtype_names else True,
                      platform.tensor_fp32_passes, 1.0)
    # [ISA] nc_matmul: is_stationary_onezero (a ones/zeros stationary, as a partition broadcast's, lowering.py)
    # "could lead to 2x better performance if stationary tile is in float32".
    passes = np.where(_per_op(trace, _ONEZERO_OPS) > 0, np.maximum(passes / 2.0, 1.0), passes)
    pe_cycles = passes * np.maximum(np.minimum(platform.tensor_min_stationary, n_stationary), n_elem)
    pe_cycles = pe_cycles / platform.tensor_efficiency
    tensor_seconds = pe_cycles / platform.tensor_clock_hz
    seconds = np.where(engine == Engine.TENSOR, tensor_seconds, seconds)

    # --- DMA: bytes moved; the schedule turns them into time ---------------------------------------------
    is_dma = engine == Engine.DMA
    hbm = np.asarray(c["hbm_read"], dtype=np.int64) + np.asarray(c["hbm_write"], dtype=np.int64)
    onchip = np.maximum.reduce([np.asarray(c[k], dtype=np.int64) for k in
                                ("sbuf_read", "sbuf_write", "psum_read", "psum_write")])
    moved = np.where(hbm > 0, np.maximum(np.asarray(c["hbm_read"]), np.asarray(c["hbm_write"])), onchip)
    seconds = np.where(is_dma, 0.0, seconds)
    dma_bytes = np.where(is_dma, moved, 0).astype(np.float64)
    descriptors = np.where(is_dma, dma_descriptors(trace, dma_bytes, partitions), 0.0)
    return InstructionCosts(
        seconds=seconds,
        dma_bytes=dma_bytes,
        dma_touches_hbm=is_dma & (hbm > 0),
        dma_rows=descriptors,
        flexible=flexible,
        to_scalar=flexible & _reads_psum(trace) & bool(platform.psum_reads_on_scalar),
        dma_queue=np.where(np.asarray(c["hbm_write"]) > 0, 1, np.where(hbm > 0, 0, 2)),
        dma_engine_s=np.where(is_dma, dma_engine_seconds(dma_bytes, descriptors, platform), 0.0),
        dma_lanes=np.where(is_dma, np.minimum(partitions, platform.dma_queues), 1.0),
        scalar_seconds=np.where(engine == Engine.TENSOR, seconds, np.where(is_dma, 0.0, scalar_seconds)),
    )


def dma_engine_seconds(nbytes: np.ndarray | float, descriptors: np.ndarray | float,
                       platform: NeuronCoreSpec) -> np.ndarray | float:
    """Engine time of a DMA: its bytes at one DMA engine's rate, plus a fixed cost per contiguous buffer
    (descriptor). The DMA bandwidth guide's saturation curve: below ~256 B per buffer the per-packet overhead
    dominates, 2 KiB approaches the peak, 4 KiB saturates (hardware.py: dma_descriptor_bytes)."""
    rate = platform.dma_engine_bytes_per_s * platform.dma_efficiency
    moved = (nbytes + descriptors * platform.dma_descriptor_bytes) / rate
    # [DMA-BW]'s packet rate (hardware.py: dma_packet_s): an engine spends at least that long per packet.
    return np.maximum(moved, descriptors * platform.dma_packet_s) if platform.dma_packet_s else moved


def _hbm_accesses(trace: Trace, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per instruction: the span in bytes of its HBM access's bounding box, and the HBM tensor (-1: none)."""
    acc = trace.access
    span = np.zeros(n)
    which = np.full(n, -1, dtype=np.int64)
    if len(acc["tensor"]) == 0:
        return span, which
    owner = np.repeat(np.arange(n), np.asarray(trace.columns["access_count"], dtype=np.int64))
    tensor = np.asarray(acc["tensor"], dtype=np.int64)
    space = np.array([int(t.space) for t in trace.tensors], dtype=np.int8)
    rows = np.flatnonzero(space[tensor] == MemorySpace.HBM)
    span[owner[rows]] = (np.asarray(acc["byte_hi"])[rows] - np.asarray(acc["byte_lo"])[rows]).astype(np.float64)
    which[owner[rows]] = tensor[rows]
    return span, which


def _row_strides(shape: tuple[int, ...], dtype: str) -> list[float]:
    """Bytes between consecutive indices of each axis but the last of a row-major tensor, innermost first:
    the strides a partition of a DMA may step by."""
    item = dtype_bytes(dtype)
    out, acc = [], float(item)
    for size in reversed(shape[1:]):
        acc *= size
        out.append(acc)
    return out or [float("inf")]


def dma_descriptors(trace: Trace, nbytes: np.ndarray, partitions: np.ndarray) -> np.ndarray:
    """Contiguous buffers per DMA ([ARCH-V2]: at least one per SBUF partition row, more when a partition's slice
    of HBM is not contiguous), from the bounding box the trace keeps of the HBM access:

    - partitions one tensor stride apart, each reading one block (the span is (P-1) * stride + its bytes):
      one buffer per partition;
    - partitions that read a block with gaps inside one innermost row (a gather of every k-th element):
      one buffer per element;
    - partitions laid along the innermost axis (a transposing access: span (F-1) * row + P * item): one buffer
      per element;
    - otherwise runs as long as the innermost axis allows."""
    n = len(trace)
    per_partition = nbytes / np.maximum(partitions, 1.0)
    span, which = _hbm_accesses(trace, n)
    item = np.array([dtype_bytes(d) for d in trace.dtype_names] or [4.0])[np.asarray(trace.columns["dtype"],
                                                                                   dtype=np.int64)]
    free = np.asarray(trace.columns["free_elems"], dtype=np.float64)
    run = per_partition.copy()
    for t in np.unique(which[which >= 0]):
        rows = np.flatnonzero(which == t)
        info = trace.tensors[int(t)]
        strides = np.array(_row_strides(info.shape, info.dtype))
        inner = float(strides[0])
        p, b, sp = partitions[rows], per_partition[rows], span[rows]
        if not np.isfinite(inner):
            continue  # a 1-D tensor: contiguous
        # Per-partition extent under each candidate partition stride (the smallest that leaves room for `b`).
        extent = sp[:, None] - (p[:, None] - 1) * strides[None, :]
        extent = np.where(extent >= b[:, None] - 1e-9, extent, np.inf)
        extent = np.where(p[:, None] > 1, extent, sp[:, None])
        best = extent.min(axis=1)
        block = np.isclose(best, b) | (sp <= b * p)  # each partition reads one contiguous block
        gather = ~block & (best >= 2 * b) & (best <= inner)
        transposed = ~block & (p > 1) & (free[rows] > 1) & np.isclose(sp, (free[rows] - 1) * inner + p * item[rows])
        r = np.where(block, b, np.minimum(b, inner))
        r = np.where(gather | transposed, item[rows], r)
        run[rows] = r
    run = np.maximum(run, 1.0)
    return partitions * np.ceil(per_partition / run - 1e-9)
