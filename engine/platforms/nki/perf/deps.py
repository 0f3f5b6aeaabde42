"""Dependencies between instructions, found from the tensor regions they touch, vectorised with numpy.

Every access is cut into chunks of its tensor's byte axis (the chunk is the largest size that divides every
access to that tensor, so tiles are usually one or a few chunks). Sorting the chunk rows by (chunk, program
order) puts each chunk's history in a run; forward-filling the positions of writes and reads then gives, for
every access, the last earlier instruction that wrote (read-after-write, write-after-write) or read
(write-after-read) the same bytes. Partition ranges are not split: two accesses to disjoint partitions of the
same bytes count as overlapping, which can only add (false) dependencies.

HBM tensors only carry read-after-write dependencies (a kernel reading back what it stored): the stores of
an output never wait for each other, the DMA queues order them.

The same chunk rows give the program-order liveness of SBUF data, from which spills.py derives spills.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.platforms.nki.perf.fusion import fused_order
from engine.platforms.nki.simulator.trace import Engine, LoopKind, MemorySpace, Trace

_MAX_CHUNKS_PER_ACCESS = 64


@dataclass(frozen=True)
class AffineSlots:
    """Per instruction, its place in an unrolled affine_range loop whose body holds no other affine loop:
    `segment` (the first instruction of that loop instance; -1 outside any), `iteration` and `offset` (its rank
    among its iteration's instructions). The compiler may interleave these iterations (spills.py)."""

    segment: np.ndarray
    iteration: np.ndarray
    offset: np.ndarray
    stages: np.ndarray  # engines (DMA included) the loop instance's instructions use: its pipeline's depth
    # The same for the affine loops around such a loop (outer_slots), one row per level, outermost first:
    # `outer_segment` (first instruction of the run of iterations; -1 outside any), `outer_iteration` (the
    # iteration's rank in that run) and `outer_prefetch` (a load the iteration issues before its compute: what a
    # software pipeline issues ahead, spills.interleaved_positions). Shape (levels, instructions).
    outer_segment: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    outer_iteration: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    outer_prefetch: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))


@dataclass(frozen=True)
class SbufUse:
    """The SBUF chunk rows in (chunk, program order), what spills.py needs to find the live set."""

    inst: np.ndarray  # instruction of each row
    is_write: np.ndarray
    chunk_bytes: np.ndarray  # bytes per partition of the chunk
    partitions: np.ndarray  # partitions the access spans
    prev_inst: np.ndarray  # previous instruction touching this chunk (-1: none)
    producer: np.ndarray  # for reads: row (in these arrays) of the write that produced the data (-1: none)
    clean: np.ndarray  # for writes: the data is a copy of HBM (a DMA load), so evicting it needs no save
    # Rows standing for a repeated load of the same HBM region (see _repeated_loads): the first load's data
    # kept in SBUF, read again by each repeat. Not evicted -> the repeat is elided; evicted -> it runs.
    virtual: np.ndarray
    # For virtual rows: bytes of the whole HBM tensor the repeated load reads (spills.py keeps a repeat only when
    # the compiler could keep that whole tensor). 0 for the others.
    source_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # Per instruction (not per row): where it sits among the unrolled iterations of its innermost affine_range
    # loop (affine_slots), from which spills.py builds the compiler's interleaved order. Empty: program order.
    slots: AffineSlots | None = None
    # Per instruction: elided as loop-invariant computation or a dead load (valnum.py); empty: none. `plain`: this
    # use before value numbering (NeuronCoreSpec.value_numbering off).
    vn_elided: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    plain: SbufUse | None = None
    # Per instruction: its position with producer-consumer loops fused (fusion.py); None: program order.
    fused: np.ndarray | None = None
    # This use with loop-invariant products bounded per sequential_range iteration (valnum.py; used with
    # NeuronCoreSpec.sequential_outermost); None: the same products as this one.
    sequential_major: SbufUse | None = None

    @staticmethod
    def empty() -> SbufUse:
        z = np.zeros(0, dtype=np.int64)
        return SbufUse(z, z.astype(bool), z, z, z, z, z.astype(bool), z.astype(bool), z)


@dataclass(frozen=True)
class Dependencies:
    indptr: np.ndarray  # CSR over instructions: predecessors of i are indices[indptr[i]:indptr[i+1]]
    indices: np.ndarray
    sbuf: SbufUse
    # Each on-chip (or written HBM) read access, paired with the write access that last wrote its bytes (valnum.py).
    read_access: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    write_access: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hbm_written: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


def _owner(trace: Trace) -> np.ndarray:
    counts = np.asarray(trace.columns["access_count"], dtype=np.int64)
    return np.repeat(np.arange(len(trace), dtype=np.int64), counts)


def _chunk_sizes(tensor: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_tensors: int) -> np.ndarray:
    """Per tensor, the gcd of every access boundary, coarsened so no access spans too many chunks."""
    gran = np.zeros(n_tensors, dtype=np.int64)
    if len(tensor):
        order = np.argsort(tensor, kind="stable")
        t_sorted = tensor[order]
        starts = np.flatnonzero(np.r_[True, t_sorted[1:] != t_sorted[:-1]])
        g = np.gcd.reduceat(np.gcd(lo[order], hi[order]), starts)
        gran[t_sorted[starts]] = g
        width = np.zeros(n_tensors, dtype=np.int64)
        np.maximum.at(width, tensor, hi - lo)
        gran = np.maximum(gran, 1)
        gran = np.maximum(gran, -(-width // _MAX_CHUNKS_PER_ACCESS))
    return np.maximum(gran, 1)


def _exclusive_last(pos: np.ndarray, group_start: np.ndarray, run_start: np.ndarray) -> np.ndarray:
    """For each row, the largest marked position before its own instruction's run in its chunk, or -1."""
    filled = np.maximum.accumulate(pos)
    prev = run_start - 1
    out = np.where(prev >= 0, filled[np.maximum(prev, 0)], -1)
    return np.where(out >= group_start, out, -1)


def build_dependencies(trace: Trace) -> Dependencies:
    n = len(trace)
    acc = trace.access
    if n == 0 or len(acc["tensor"]) == 0:
        return Dependencies(np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), SbufUse.empty())
    tensor = np.asarray(acc["tensor"], dtype=np.int64)
    is_write = np.asarray(acc["is_write"]) != 0
    lo = np.asarray(acc["byte_lo"], dtype=np.int64)
    hi = np.maximum(np.asarray(acc["byte_hi"], dtype=np.int64), lo + 1)
    owner = _owner(trace)
    space = np.array([int(t.space) for t in trace.tensors], dtype=np.int64)
    n_tensors = len(trace.tensors)

    # HBM tensors matter only if something reads them after something wrote them.
    written = np.zeros(n_tensors, dtype=bool)
    written[tensor[is_write]] = True
    read = np.zeros(n_tensors, dtype=bool)
    read[tensor[~is_write]] = True
    keep = (space[tensor] != MemorySpace.HBM) | (written[tensor] & read[tensor])
    kept_access = np.flatnonzero(keep)
    tensor, is_write, lo, hi, owner = tensor[keep], is_write[keep], lo[keep], hi[keep], owner[keep]
    parts = (np.asarray(acc["part_hi"], dtype=np.int64) - np.asarray(acc["part_lo"], dtype=np.int64))[keep]

    gran = _chunk_sizes(tensor, lo, hi, n_tensors)
    g = gran[tensor]
    c_lo = lo // g
    c_hi = -(-hi // g)
    span = c_hi - c_lo
    extent = np.zeros(n_tensors, dtype=np.int64)
    np.maximum.at(extent, tensor, c_hi)
    base = np.concatenate(([0], np.cumsum(extent)[:-1]))

    # One row per (access, chunk), in program order.
    row_access = np.repeat(np.arange(len(tensor)), span)
    offset = np.arange(len(row_access)) - np.repeat(np.cumsum(span) - span, span)
    chunk = base[tensor[row_access]] + c_lo[row_access] + offset
    order = np.argsort(chunk, kind="stable")
    chunk = chunk[order]
    row_access = row_access[order]
    inst = owner[row_access]
    w = is_write[row_access]
    hbm = space[tensor[row_access]] == MemorySpace.HBM
    m = len(chunk)
    pos = np.arange(m)
    new_group = np.r_[True, chunk[1:] != chunk[:-1]]
    group_start = np.maximum.accumulate(np.where(new_group, pos, 0))
    new_run = new_group | np.r_[True, inst[1:] != inst[:-1]]
    run_start = np.maximum.accumulate(np.where(new_run, pos, 0))

    last_write = _exclusive_last(np.where(w, pos, -1), group_start, run_start)
    last_read = _exclusive_last(np.where(~w, pos, -1), group_start, run_start)

    raw = (~w) & (last_write >= 0)
    waw = w & ~hbm & (last_write >= 0)
    war = w & ~hbm & (last_read >= 0)
    succ = np.concatenate((inst[raw], inst[waw], inst[war]))
    pred = np.concatenate((inst[last_write[raw]], inst[last_write[waw]], inst[last_read[war]]))
    pairs = np.unique(succ * n + pred)
    succ, pred = pairs // n, pairs % n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, succ + 1, 1)
    indptr = np.cumsum(indptr)

    # SBUF rows for the spill model.
    sb = space[tensor[row_access]] == MemorySpace.SBUF
    index_in_sb = np.cumsum(sb) - 1
    prev = np.maximum(last_write, last_read)
    engine = np.asarray(trace.columns["engine"], dtype=np.int64)
    loads = (engine == Engine.DMA) & (np.asarray(trace.columns["hbm_read"], dtype=np.int64) > 0)
    sb_last_write = last_write[sb]
    sbuf = SbufUse(
        inst=inst[sb],
        is_write=w[sb],
        chunk_bytes=g[row_access][sb],
        partitions=np.maximum(parts[row_access][sb], 1),
        prev_inst=np.where(prev[sb] >= 0, inst[np.maximum(prev[sb], 0)], -1),
        producer=np.where(sb_last_write >= 0, index_in_sb[np.maximum(sb_last_write, 0)], -1),
        clean=w[sb] & loads[inst[sb]],
        virtual=np.zeros(int(sb.sum()), dtype=bool),
        source_bytes=np.zeros(int(sb.sum()), dtype=np.int64),
        slots=affine_slots(trace),
        fused=fused_order(trace, indptr, pred.astype(np.int64)),
    )
    read_write = np.unique(kept_access[row_access[raw]] * len(keep) + kept_access[row_access[last_write[raw]]])
    return Dependencies(indptr, pred.astype(np.int64), _repeated_loads(trace, sbuf, space, written),
                        read_write // len(keep), read_write % len(keep), written)


def affine_slots(trace: Trace) -> AffineSlots:
    """Where each instruction sits among the iterations of its innermost affine_range loop (see AffineSlots).

    Only loops whose body has no deeper affine loop count (the body of such a loop instance is contiguous in
    program order, so permuting inside it keeps every other instruction in place); static_range loops inside
    the body are part of the iteration (they are unrolled in it)."""
    n = len(trace)
    segment = np.full(n, -1, dtype=np.int64)
    iteration = np.zeros(n, dtype=np.int64)
    offset = np.zeros(n, dtype=np.int64)
    stages = np.zeros(n, dtype=np.int64)
    if n == 0 or not trace.loop_contexts:
        empty = np.zeros((0, n), dtype=np.int64)
        return AffineSlots(segment, iteration, offset, stages, empty, empty.copy(), empty.astype(bool))
    loops = trace.loops

    def depth_of(nest: tuple[tuple[int, int], ...]) -> int:
        for k in range(len(nest) - 1, -1, -1):
            loop = loops[nest[k][0]]
            if loop.kind == LoopKind.AFFINE and loop.trip_count > 1:
                return k
        return -1

    depths = [depth_of(nest) for nest in trace.loop_contexts]
    # A loop instance (its nest down to the loop, iteration left out) that holds a deeper affine loop is not a leaf.
    inner: set[tuple] = set()
    for nest, d in zip(trace.loop_contexts, depths, strict=True):
        for k in range(d):
            if loops[nest[k][0]].kind == LoopKind.AFFINE:
                inner.add(nest[:k] + (nest[k][0],))
    key_of: list[tuple | None] = []
    for nest, d in zip(trace.loop_contexts, depths, strict=True):
        key = nest[:d] + (nest[d][0],) if d >= 0 else None
        key_of.append(None if key is None or key in inner else key)
    ctx = np.asarray(trace.columns["loop_ctx"], dtype=np.int64)
    # A segment is a run of consecutive instructions of one loop instance: an instruction recorded with the
    # loop's context after something else ran in between (outside the loop) starts a new one, and so does one
    # whose iteration goes back (a trace that records code after the loop under its first iteration).
    count: dict[int, int] = {}
    previous: tuple | None = None
    start = last_it = -1
    for i, c in enumerate(ctx.tolist()):
        key = key_of[c]
        it = trace.loop_contexts[c][len(key) - 1][1] if key is not None else -1
        if key != previous or it < last_it:
            start, count, previous = i, {}, key
        last_it = it
        if key is None:
            continue
        segment[i] = start
        iteration[i] = it
        k = count.get(it, 0)
        offset[i] = k
        count[it] = k + 1
    inside = np.flatnonzero(segment >= 0)
    if len(inside):
        engine = np.asarray(trace.columns["engine"], dtype=np.int64)[inside]
        seg_engine = np.unique(segment[inside] * 8 + engine)
        per_segment = np.bincount(seg_engine // 8, minlength=n)
        stages[inside] = per_segment[segment[inside]]
    outer_segment, outer_iteration, outer_prefetch = outer_slots(trace, inner)
    return AffineSlots(segment, iteration, offset, stages, outer_segment, outer_iteration, outer_prefetch)


def outer_slots(trace: Trace, inner: set[tuple]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """AffineSlots' outer fields, one row per level of affine loops (trip count > 1) that hold a deeper affine
    loop (`inner`: their instances, as affine_slots keys them), outermost first: per instruction, the first
    instruction of the run of iterations of its loop at that level (-1: none), the iteration's rank in the run,
    and whether it is one of the loads the iteration's body issues before its compute (a load in the body
    itself or in loops of loads only: what a software pipeline issues ahead, spills.interleaved_positions).
    A loop whose body is one such loop and nothing else is one level with it, its iterations flattened
    (adamw's `for i0, i1` around `for i2`: 172 iterations); the matmul tutorial's `for m` (lhsT loads, then
    `for n`: rhs loads, then the blocks' matmuls and stores) is two."""
    n = len(trace)
    loops = trace.loops
    engine = np.asarray(trace.columns["engine"], dtype=np.int64)
    loads = (engine == Engine.DMA) & (np.asarray(trace.columns["hbm_read"], dtype=np.int64) > 0)
    ctx = np.asarray(trace.columns["loop_ctx"], dtype=np.int64)
    nests = [tuple((k, lid, it) for k, (lid, it) in enumerate(nest) if loops[lid].trip_count > 1)
             for nest in trace.loop_contexts]
    # Per loop source line: what its bodies hold (the next loop's line, or None for an instruction in the body
    # itself), and whether everything under it is a load.
    children: dict[int, set] = {}
    load_only: dict[int, bool] = {}
    per_ctx_loads = np.bincount(ctx, weights=loads, minlength=len(nests))
    per_ctx_all = np.bincount(ctx, minlength=len(nests))
    for c in np.flatnonzero(per_ctx_all).tolist():
        nest = nests[c]
        only = bool(per_ctx_loads[c] == per_ctx_all[c])
        for m, (_, lid, _) in enumerate(nest):
            line = loops[lid].line
            children.setdefault(line, set()).add(loops[nest[m + 1][1]].line if m + 1 < len(nest) else None)
            load_only[line] = load_only.get(line, True) and only

    def pipelined(c: int, k: int) -> bool:
        lid = trace.loop_contexts[c][k][0]
        return loops[lid].kind == LoopKind.AFFINE and trace.loop_contexts[c][:k] + (lid,) in inner

    def levels_of(c: int) -> list[tuple[tuple, tuple, bool]]:
        """(instance, iteration, prefetchable) per level of context `c`: the instance is the nest above the level
        and the level's loop lines; the iteration, the level's iterations; prefetchable, a load there goes ahead."""
        nest = nests[c]
        out: list[tuple[tuple, tuple, bool]] = []
        m = 0
        while m < len(nest):
            if not pipelined(c, nest[m][0]):
                m += 1
                continue
            start = m
            # One level with the loops whose body is exactly the next pipelined loop.
            while (m + 1 < len(nest) and pipelined(c, nest[m + 1][0])
                   and children.get(loops[nest[m][1]].line) == {loops[nest[m + 1][1]].line}):
                m += 1
            instance = (tuple((lid, it) for _, lid, it in nest[:start])
                        + tuple(loops[lid].line for _, lid, _ in nest[start:m + 1]))
            iteration = tuple(it for _, _, it in nest[start:m + 1])
            ahead = all(load_only.get(loops[lid].line, False) for _, lid, _ in nest[m + 1:])
            out.append((instance, iteration, ahead))
            m += 1
        return out

    per_ctx = [levels_of(c) for c in range(len(nests))]
    depth = max((len(v) for v in per_ctx), default=0)
    segment = np.full((depth, n), -1, dtype=np.int64)
    iteration = np.zeros((depth, n), dtype=np.int64)
    prefetch = np.zeros((depth, n), dtype=bool)
    ctx_list = ctx.tolist()
    for level in range(depth):
        previous: tuple | None = None
        last: tuple = ()
        start = count = -1
        for i, c in enumerate(ctx_list):
            lv = per_ctx[c]
            if level >= len(lv):
                previous = None
                continue
            instance, it, ahead = lv[level]
            if instance != previous or it < last:
                start, count, previous, last = i, 0, instance, it
            elif it != last:
                count, last = count + 1, it
            segment[level, i] = start
            iteration[level, i] = count
            prefetch[level, i] = ahead and bool(loads[i])
    return segment, iteration, prefetch


def _repeated_loads(trace: Trace, sbuf: SbufUse, space: np.ndarray, hbm_written: np.ndarray) -> SbufUse:
    """Add rows for loads that fetch an HBM region an earlier load already fetched.

    The Neuron compiler keeps such data in SBUF when it fits (matmul_add_rmsnorm's baseline re-loads its
    weights for every row block, yet neuron-profile counts them read about once). We model that as one SBUF
    copy live from the first load to the last repeat; the spill model then decides which repeats must
    really fetch again. Regions of HBM tensors the kernel writes are never treated this way.

    A repeat is the same load statement run again (same kernel source line): a loop-invariant load the compiler
    hoists out of its loop. Two different statements that load one region are two DMAs: rmsnorm_matmul's
    baseline loads each row block twice in one iteration (statistics, then the normalized copy) and
    neuron-profile counts those rows read 1.84 times, not once (trn1_nkibench_baselines.csv). Hand-built traces
    without source lines (line 0) keep every repeat of a region in one group.
    """
    acc = trace.access
    tensor = np.asarray(acc["tensor"], dtype=np.int64)
    is_write = np.asarray(acc["is_write"]) != 0
    owner = _owner(trace)
    engine = np.asarray(trace.columns["engine"], dtype=np.int64)
    on_dma = engine[owner] == Engine.DMA
    src = np.flatnonzero(on_dma & ~is_write & (space[tensor] == MemorySpace.HBM) & ~hbm_written[tensor])
    dst = np.flatnonzero(on_dma & is_write & (space[tensor] == MemorySpace.SBUF))
    # Loads with exactly one HBM source and one SBUF destination.
    n = len(trace)
    n_src = np.bincount(owner[src], minlength=n)
    n_dst = np.bincount(owner[dst], minlength=n)
    src = src[(n_src[owner[src]] == 1) & (n_dst[owner[src]] == 1)]
    if len(src) < 2:
        return sbuf
    dst_of = np.full(n, -1, dtype=np.int64)
    dst_of[owner[dst]] = dst
    dst = dst_of[owner[src]]
    lo, hi = np.asarray(acc["byte_lo"], dtype=np.int64), np.asarray(acc["byte_hi"], dtype=np.int64)
    line = np.asarray(trace.columns["line"], dtype=np.int64)  # one statement's repeats only (docstring)
    keys = np.stack([tensor[src], lo[src], hi[src], line[owner[src]]], axis=1)
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.reshape(-1)
    order = np.lexsort((owner[src], group))
    src, dst, group = src[order], dst[order], group[order]
    first = np.r_[True, group[1:] != group[:-1]]
    repeated_group = np.zeros(group.max() + 1, dtype=bool)
    repeated_group[group[~first]] = True
    keep = repeated_group[group]
    src, dst, group, first = src[keep], dst[keep], group[keep], first[keep]
    if len(src) == 0:
        return sbuf
    inst = owner[src]
    base = len(sbuf.inst)
    pos = np.arange(len(src))
    first_pos = np.maximum.accumulate(np.where(first, pos, 0))
    chunk = np.asarray(acc["byte_hi"], dtype=np.int64)[dst] - np.asarray(acc["byte_lo"], dtype=np.int64)[dst]
    parts = np.asarray(acc["part_hi"], dtype=np.int64)[dst] - np.asarray(acc["part_lo"], dtype=np.int64)[dst]
    prev_inst = np.where(first, -1, inst[np.maximum(pos - 1, 0)])
    return SbufUse(
        inst=np.concatenate((sbuf.inst, inst)),
        is_write=np.concatenate((sbuf.is_write, first)),
        chunk_bytes=np.concatenate((sbuf.chunk_bytes, chunk[first_pos])),
        partitions=np.concatenate((sbuf.partitions, np.maximum(parts[first_pos], 1))),
        prev_inst=np.concatenate((sbuf.prev_inst, prev_inst)),
        producer=np.concatenate((sbuf.producer, np.where(first, -1, base + first_pos))),
        clean=np.concatenate((sbuf.clean, first)),
        virtual=np.concatenate((sbuf.virtual, np.ones(len(src), dtype=bool))),
        source_bytes=np.concatenate((sbuf.source_bytes, np.array(
            [trace.tensors[int(t)].total_bytes for t in tensor[src]], dtype=np.int64))),
        slots=sbuf.slots,
        fused=sbuf.fused,
    )


def sequential_barriers(trace: Trace) -> np.ndarray:
    """Per instruction: True where it starts a new iteration of an enclosing sequential_range loop."""
    n = len(trace)
    ctx = np.asarray(trace.columns["loop_ctx"], dtype=np.int64)
    out = np.zeros(n, dtype=bool)
    if n < 2 or not trace.loop_contexts:
        return out
    seq_loops = {i for i, loop in enumerate(trace.loops) if loop.kind == LoopKind.SEQUENTIAL}
    if not seq_loops:
        return out
    seq_iters = [{lid: it for lid, it in nest if lid in seq_loops} for nest in trace.loop_contexts]
    change = np.flatnonzero(ctx[1:] != ctx[:-1]) + 1
    if len(change) == 0:
        return out
    pair_keys = ctx[change - 1] * len(trace.loop_contexts) + ctx[change]
    unique_keys, inverse = np.unique(pair_keys, return_inverse=True)
    is_barrier = np.zeros(len(unique_keys), dtype=bool)
    for k, key in enumerate(unique_keys):
        before = seq_iters[int(key) // len(trace.loop_contexts)]
        after = seq_iters[int(key) % len(trace.loop_contexts)]
        is_barrier[k] = any(lid in before and before[lid] != it for lid, it in after.items())
    out[change] = is_barrier[inverse]
    return out
