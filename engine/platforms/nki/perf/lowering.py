"""What the compiler adds to a traced kernel before it runs: partition-broadcast operands.

The simulator records `x.broadcast_to((P, F))` of a one-partition tile as what the kernel wrote: its consumer
reads the one-partition tile. On the hardware a partition broadcast is a Tensor Engine matmul ([ARCH-V2],
"Alternative Use Case": NKI invokes `nc_matmul(ones, x, is_stationary_onezero=True)` under the hood when
`broadcast_to` is called), whose output lands in PSUM, and a PSUM tile holds at most 512 fp32 per partition
([TILING] Tile-Size Constraint #2, `psum_bank_fmax`). So:

- F <= 512: one matmul into one PSUM bank; the consumer reads its operand from PSUM, which for tensor_tensor
  costs 1 cycle per element instead of 2 ([ISA]: 2N with both inputs in SBUF; costs.py reads PSUM at 1);
- F > 512: the broadcast cannot be one PSUM tile: ceil(F / 512) matmuls, each evacuated by a PSUM-to-SBUF copy
  (on the Scalar Engine: psum_reads_on_scalar) into SBUF, which the consumer then reads at the SBUF rate.

The matmul's stationary operand is ones, so in fp32 it takes half the passes ([ISA] nc_matmul,
`is_stationary_onezero`: "2x better performance if stationary tile is in float32"; costs.py) and its flops are
recorded as P x F flops (half the 2 x M x N x K of a full-rate matmul): the profile's hardware_flops (2 x flops)
then gives neuron-profile's count for the mamba baseline exactly, 2 x 64 broadcasts x 128 x 7168 = 117,440,512.

`lower_partition_broadcasts` makes those instructions explicit: a new trace with the matmuls (and copies) in
front of the consumer, in its loop context, and the consumer reading the broadcast tile. A broadcast of the same
data (same tile, bytes and producing write) is made once and read again by later consumers. The simulator's
own trace is not changed (its digests stay); the performance model replays the lowered one.
"""

from __future__ import annotations

import bisect

import numpy as np

from engine.platforms.nki.perf.costs import dtype_bytes
from engine.platforms.nki.simulator.trace import (
    ACCESS_COLUMNS,
    INSTRUCTION_COLUMNS,
    Engine,
    MemorySpace,
    TensorInfo,
    Trace,
)

_PSUM_ITEM = 4  # [ARCH-V2]: TensorE output is always fp32


def broadcast_reads(trace: Trace) -> np.ndarray:
    """Access rows where a compute instruction over P > 1 partitions reads a one-partition SBUF region (a
    partition broadcast). Tensor Engine reads are matmul operands (a one-row contraction), not broadcasts."""
    acc = trace.access
    if len(trace) == 0 or len(acc["tensor"]) == 0:
        return np.zeros(0, dtype=np.int64)
    owner = np.repeat(np.arange(len(trace)), np.asarray(trace.columns["access_count"], dtype=np.int64))
    space = np.array([int(t.space) for t in trace.tensors], dtype=np.int8)
    engine = np.asarray(trace.columns["engine"])[owner]
    parts = np.asarray(acc["part_hi"]) - np.asarray(acc["part_lo"])
    hit = ((np.asarray(acc["is_write"]) == 0) & (space[np.asarray(acc["tensor"])] == MemorySpace.SBUF) & (parts == 1)
           & (np.asarray(trace.columns["partitions"])[owner] > 1) & (engine != Engine.DMA) & (engine != Engine.TENSOR))
    return np.flatnonzero(hit)


def lower_partition_broadcasts(trace: Trace, psum_bank_bytes: int) -> Trace:
    """The trace with each partition broadcast lowered as the compiler does (module docstring); the trace itself
    when it has none."""
    hits = broadcast_reads(trace)
    if len(hits) == 0:
        return trace
    bank_fmax = psum_bank_bytes // _PSUM_ITEM
    c = {k: np.asarray(v) for k, v in trace.columns.items()}
    a = {k: np.asarray(v) for k, v in trace.access.items()}
    n = len(trace)
    owner = np.repeat(np.arange(n), c["access_count"].astype(np.int64))
    tensors = list(trace.tensors)
    op_names, dtype_names = list(trace.op_names), list(trace.dtype_names)

    def code(names: list[str], name: str) -> int:
        if name not in names:
            names.append(name)
        return names.index(name)

    matmul_op, copy_op, fp32 = code(op_names, "broadcast_matmul"), code(op_names, "tensor_copy"), code(dtype_names, "float32")
    # The last instruction writing each tensor before each hit: what makes two broadcasts the same data.
    writes = np.flatnonzero(a["is_write"] != 0)
    writers: dict[int, list[int]] = {}
    for t, i in zip(a["tensor"][writes].tolist(), owner[writes].tolist(), strict=True):
        writers.setdefault(t, []).append(i)

    def producer(tensor: int, before: int) -> int:
        rows = writers.get(tensor, [])
        k = bisect.bisect_left(rows, before)
        return rows[k - 1] if k else -1

    inserted: dict[int, list[tuple[dict[str, int], list[tuple[int, int, int, int, int, int]]]]] = {}
    made: dict[tuple[int, int, int, int], tuple[int, bool]] = {}  # -> (PSUM tile or SBUF token, in PSUM)
    also_read: dict[int, list[tuple[int, int, int, int, int, int]]] = {}  # consumers' extra accesses (tokens)
    access_tensor = a["tensor"].astype(np.int64).copy()
    access_plo, access_phi = a["part_lo"].astype(np.int64).copy(), a["part_hi"].astype(np.int64).copy()
    access_blo, access_bhi = a["byte_lo"].astype(np.int64).copy(), a["byte_hi"].astype(np.int64).copy()
    hit_owner = owner[hits]
    per_hit = zip(hits.tolist(), hit_owner.tolist(), a["tensor"][hits].tolist(), a["byte_lo"][hits].tolist(),
                  a["byte_hi"][hits].tolist(), a["part_lo"][hits].tolist(), a["part_hi"][hits].tolist(),
                  c["partitions"][hit_owner].tolist(), c["engine"][hit_owner].tolist(), strict=True)
    for r, i, src, lo, hi, src_plo, src_phi, p, engine in per_hit:
        key = (src, lo, hi, producer(src, i))
        if key not in made:
            info = trace.tensors[src]
            item = dtype_bytes(info.dtype)
            f = max(1, (hi - lo) // item)
            pieces = -(-f // bank_fmax)
            in_psum = pieces == 1 and engine != Engine.GPSIMD  # GpSimd cannot read PSUM ([ARCH-V2])
            psum = len(tensors)
            psum_cols = min(f, bank_fmax)
            psum_bytes = psum_cols * _PSUM_ITEM * min(pieces, 2)
            tensors.append(TensorInfo(f"{info.name}.broadcast_psum", MemorySpace.PSUM, (p, psum_cols * min(pieces, 2)),
                                      "float32", 0, psum_bytes, p * psum_bytes))
            rows: list[tuple[dict[str, int], list[tuple[int, int, int, int, int, int]]]] = []
            # Evacuated to SBUF: into the source tile's own address range. An SBUF tile holds the same free-axis
            # bytes in every partition ([ARCH-V2]), so a one-partition tile already reserves that range in the other
            # 127, and the broadcast takes no SBUF the kernel's tile did not: the live set does not grow, the source
            # stays a clean copy of HBM in partition 0. The consumer keeps reading the source and also reads a
            # 4-byte token the copies write, which orders it after them.
            target = psum
            if not in_psum:
                target = len(tensors)
                tensors.append(TensorInfo(f"{info.name}.broadcast_ready", MemorySpace.SBUF, (1,), "float32", 0, 4, 4))
            for k in range(pieces):
                cols = min(bank_fmax, f - k * bank_fmax)
                bank = (k % 2) * bank_fmax * _PSUM_ITEM  # two banks in turn: the next matmul while one is copied
                rows.append(({"engine": int(Engine.TENSOR), "opcode": matmul_op, "dtype": code(dtype_names, info.dtype),
                              "partitions": 1, "free_elems": cols, "flops": p * cols,
                              "sbuf_read": cols * item, "psum_write": p * cols * _PSUM_ITEM},
                             [(src, 0, src_plo, src_phi, lo + k * bank_fmax * item,
                               lo + (k * bank_fmax + cols) * item),
                              (psum, 1, 0, p, bank, bank + cols * _PSUM_ITEM)]))
                if not in_psum:
                    rows.append(({"engine": int(Engine.VECTOR), "opcode": copy_op, "dtype": fp32, "partitions": p,
                                  "free_elems": cols, "flops": p * cols, "psum_read": p * cols * _PSUM_ITEM,
                                  "sbuf_write": p * cols * item},
                                 [(psum, 0, 0, p, bank, bank + cols * _PSUM_ITEM),
                                  (target, 1, 0, 1, 0, 4)]))
            inserted.setdefault(i, []).extend(rows)
            made[key] = (target, in_psum)
        target, in_psum = made[key]
        if in_psum:  # the consumer reads the broadcast from PSUM
            access_tensor[r], access_plo[r], access_phi[r], access_blo[r], access_bhi[r] = (
                target, 0, p, 0, min(bank_fmax, (hi - lo) // dtype_bytes(trace.tensors[src].dtype)) * _PSUM_ITEM)
        else:
            also_read.setdefault(i, []).append((target, 0, 0, 1, 0, 4))
    return _rebuild(trace, c, (access_tensor, access_plo, access_phi, access_blo, access_bhi), inserted, also_read,
                    tensors, op_names, dtype_names)


def _rebuild(trace: Trace, c: dict[str, np.ndarray], new_access: tuple[np.ndarray, ...], inserted: dict,
             also_read: dict, tensors: list[TensorInfo], op_names: list[str], dtype_names: list[str]) -> Trace:
    """A frozen trace with the `inserted` rows in front of their consumers, accesses redirected, and the
    `also_read` accesses added to their instructions (after their own)."""
    n = len(trace)
    before = np.zeros(n, dtype=np.int64)
    for i, rows in inserted.items():
        before[i] = len(rows)
    new_pos = np.arange(n) + np.cumsum(before)  # where each original instruction lands
    total = n + int(before.sum())
    is_new = np.ones(total, dtype=bool)
    is_new[new_pos] = False
    # The inserted rows in program order, each with its consumer (for the loop context and line).
    extra = [(i, row, accesses) for i in sorted(inserted) for row, accesses in inserted[i]]
    consumer = np.array([i for i, _, _ in extra], dtype=np.int64)
    cols: dict[str, np.ndarray] = {}
    for k, code in INSTRUCTION_COLUMNS.items():
        out = np.zeros(total, dtype=code)
        out[new_pos] = c[k]
        if k in ("loop_ctx", "line"):
            out[is_new] = c[k][consumer]
        elif k not in ("access_start", "access_count"):
            out[is_new] = [row[k] if k in row else 0 for _, row, _ in extra]
        cols[k] = out
    # The access pool: the original rows (redirected), then the inserted instructions' rows.
    a_tensor, a_plo, a_phi, a_blo, a_bhi = new_access
    pool = {"tensor": a_tensor, "is_write": np.asarray(trace.access["is_write"]), "part_lo": a_plo, "part_hi": a_phi,
            "byte_lo": a_blo, "byte_hi": a_bhi}
    added = [acc for _, _, accesses in extra for acc in accesses]
    base = len(a_tensor)
    for j, k in enumerate(ACCESS_COLUMNS):
        pool[k] = np.concatenate([np.asarray(pool[k], dtype=np.int64),
                                  np.array([row[j] for row in added], dtype=np.int64)])
    pool_start = np.zeros(total, dtype=np.int64)
    count = np.zeros(total, dtype=np.int64)
    starts, counts = c["access_start"].astype(np.int64).copy(), c["access_count"].astype(np.int64).copy()
    if also_read:  # an instruction with extra accesses gets a fresh range in the pool: its own rows, then the extra
        tail = {k: [] for k in ACCESS_COLUMNS}
        at = len(pool["tensor"])
        for i in sorted(also_read):
            rows = [tuple(int(pool[k][r]) for k in ACCESS_COLUMNS) for r in range(starts[i], starts[i] + counts[i])]
            rows += list(also_read[i])
            for row in rows:
                for j, k in enumerate(ACCESS_COLUMNS):
                    tail[k].append(row[j])
            starts[i], counts[i] = at, len(rows)
            at += len(rows)
        for k in ACCESS_COLUMNS:
            pool[k] = np.concatenate([pool[k], np.array(tail[k], dtype=np.int64)])
    pool_start[new_pos] = starts
    count[new_pos] = counts
    extra_counts = np.array([len(accesses) for _, _, accesses in extra], dtype=np.int64)
    pool_start[is_new] = base + np.concatenate([[0], np.cumsum(extra_counts)[:-1]])
    count[is_new] = extra_counts
    cols["access_count"] = count.astype(INSTRUCTION_COLUMNS["access_count"])
    new_start = np.concatenate([[0], np.cumsum(count)[:-1]])
    cols["access_start"] = new_start.astype(INSTRUCTION_COLUMNS["access_start"])
    gather = np.arange(int(count.sum()), dtype=np.int64) + np.repeat(pool_start - new_start, count)
    acc = {k: pool[k][gather].astype(code) for k, code in ACCESS_COLUMNS.items()}
    out = Trace(op_names=op_names, dtype_names=dtype_names, tensors=tensors, loops=list(trace.loops),
                loop_contexts=list(trace.loop_contexts), columns=cols, access=acc)
    out.frozen = True
    return out


def statement_weight(lowered: Trace, original_tensors: int) -> np.ndarray | None:
    """Per instruction of a lowered trace, what it counts for as a statement of the kernel: 0 for the matmuls and
    copies added above (they write a tensor the lowering created, index >= `original_tensors`), 1 for the rest;
    None when nothing was added (spills.py then counts every instruction)."""
    if len(lowered.tensors) <= original_tensors:
        return None
    owner = np.repeat(np.arange(len(lowered)), np.asarray(lowered.columns["access_count"], dtype=np.int64))
    added = (np.asarray(lowered.access["is_write"]) != 0) & (np.asarray(lowered.access["tensor"]) >= original_tensors)
    weight = np.ones(len(lowered))
    weight[owner[added]] = 0.0
    return weight
