"""Loop interchange around a loop-invariant product (issue 19, perf-9 candidate; NeuronCoreSpec.loop_interchange,
off).

Evidence, one kernel: the NKIBench bmm baseline (trn1_nkibench_baselines.csv) is `for i0 (16 batches): for i1 (4
column blocks): load rhs[i0, i1]; for i2: transpose lhs[i0, i2] (the same in every i1); matmul`. Value numbering
(valnum.py) runs the transposes once per batch and keeps the product (16 KiB per partition), so in program order
nothing spills. trn1 counts spill_save 12,582,912 B and spill_reload 33,816,576 B, which only the whole transposed
input (16 MiB on 64 partitions, 64 blocks of 256 KiB, one per (i0, i2)) kept across an *outer* i1 explains: 48
blocks saved once (12 MiB; 16 blocks stay), and with a 5-block window chosen by furthest next use, the 48 are
reloaded 129 times in the three later i1 passes (129 x 256 KiB = 33,816,576 B, exactly). The compiler's middle end
does "loop-reordering" (nki/library/specs/design-rmsnorm-quant.rst, aws-neuron-sdk @81ce03ae), and the kernel's
own buffers are laid out i1-major (`v7[i1, i0, ...]`, `v9[i1, i0, ...]`).

`interchanged_order` returns each instruction's position with such a nest run inner-loop-major: an affine loop whose
every iteration is exactly one instance of one inner affine loop (a perfect nest) and whose inner loop repeats
value-numbered (elided) instructions in its later iterations. spills.py then takes the working set in that order,
as it does fusion.py's. The schedule is unchanged.

`sequential_major_order` (NeuronCoreSpec.sequential_outermost, perf-10 candidate) is the same move for a
sequential_range loop inside an affine one. Evidence, one kernel: the lora baseline's `for i13 (12 column blocks):
for i14 in sequential_range(4) (K chunks): load and transpose x's chunk (the same in every i13), multiply by W,
accumulate; then the block's epilogue`. trn1 reads x twice in all and transposes it twice (transpose_flops 3.50),
saves the transposed x once and reloads it in 11 blocks (reloads exceed saves by exactly 10 x its 320 tiles), and
saves the accumulators four times per block, not three: the final values wait for an epilogue that runs after the
whole K loop (measurements/lora_spill_decode.py: 4,075 / 7,275 tiles saved / reloaded; this order gives 4,160 /
7,360). A sequential loop gets "much more conservative loop-level optimizations" than affine ones ([NKI-SEQ] in
engine/platforms/nki/hardware.py), so it is the affine loop that moves inside, and the statements after the sequential loop
are split off (loop distribution: affine iterations carry no dependency).
"""

from __future__ import annotations

import numpy as np

from engine.platforms.nki.simulator.trace import LoopKind, Trace


def interchanged_order(trace: Trace, vn_elided: np.ndarray, base: np.ndarray | None = None) -> np.ndarray | None:
    """Per instruction, its position with each perfect two-loop affine nest whose inner loop repeats elided
    loop-invariant work run inner-loop-major; `base`: the order to start from (fusion.fused_order; None: program
    order). None when nothing is interchanged."""
    n = len(trace)
    if n == 0 or len(vn_elided) != n or not vn_elided.any() or not trace.loop_contexts:
        return None
    lid, it = _nest_columns(trace)
    index = np.arange(n) if base is None else base.astype(np.int64)
    key_outer, key_inner = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    start = index.copy()  # an interchanged nest's instructions sort together, where its first one was
    for d in range(lid.shape[1] - 1):
        for outer in np.unique(lid[:, d][lid[:, d] >= 0]):
            rows = np.flatnonzero(lid[:, d] == outer)
            if (key_outer[rows] != 0).any() or not _swappable(trace, int(outer), lid[rows, d + 1]):
                continue
            if not (vn_elided[rows] & (it[rows, d + 1] > 0)).any():
                continue  # nothing the inner loop's later iterations reuse: no reason to reorder
            # Inner iteration first, then outer; each (inner, outer) body keeps its own order (the sort below).
            key_outer[rows] = 1 + it[rows, d + 1]
            key_inner[rows] = it[rows, d]
            start[rows] = index[rows].min()  # a loop id is one instance of the loop (trace.loops)
    if not key_outer.any():
        return None
    order = np.lexsort((index, key_inner, key_outer, start))
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    return pos


def sequential_major_order(trace: Trace, vn_elided: np.ndarray, base: np.ndarray | None = None) -> np.ndarray | None:
    """Per instruction, its position with each affine loop whose body holds one sequential_range loop that repeats
    elided loop-invariant work in the affine loop's later iterations run sequential-loop-major: the statements
    before the sequential loop for every affine iteration, then each sequential iteration across every affine
    iteration, then the statements after it per affine iteration (loop distribution, then interchange: legal
    because affine iterations carry no dependency). `base`: the order to start from. None: nothing moves."""
    n = len(trace)
    if n == 0 or len(vn_elided) != n or not vn_elided.any() or not trace.loop_contexts:
        return None
    lid, it = _nest_columns(trace)
    index = np.arange(n) if base is None else base.astype(np.int64)
    stage, k1, k2 = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    start = index.copy()
    moved = np.zeros(n, dtype=bool)
    for d in range(lid.shape[1] - 1):
        for outer in np.unique(lid[:, d][lid[:, d] >= 0]):
            rows = np.flatnonzero(lid[:, d] == outer)
            loop = trace.loops[int(outer)]
            if moved[rows].any() or loop.kind != LoopKind.AFFINE or loop.trip_count < 2:
                continue
            inner = lid[rows, d + 1]
            seq = np.array([x >= 0 and trace.loops[int(x)].kind == LoopKind.SEQUENTIAL
                            and trace.loops[int(x)].trip_count > 1 for x in inner.tolist()], dtype=bool)
            if not seq.any() or len({trace.loops[int(x)].line for x in np.unique(inner[seq])}) != 1:
                continue
            if not (vn_elided[rows[seq]] & (it[rows[seq], d] > 0)).any():
                continue  # the sequential loop repeats nothing across the affine loop: no reason to reorder
            a = it[rows, d]
            first_seq = np.full(loop.trip_count, np.iinfo(np.int64).max)
            np.minimum.at(first_seq, a[seq], index[rows[seq]])
            before = ~seq & (index[rows] < first_seq[a])
            stage[rows] = np.where(seq, 1, np.where(before, 0, 2))
            k1[rows] = np.where(seq, it[rows, d + 1], a)  # sequential iteration first, then the affine one
            k2[rows] = np.where(seq, a, 0)
            start[rows] = index[rows].min()
            moved[rows] = True
    if not moved.any():
        return None
    order = np.lexsort((index, k2, k1, stage, start))
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    return pos


def _nest_columns(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per instruction and nest level: its loop id (-1: none) and iteration."""
    ctx = np.asarray(trace.columns["loop_ctx"], dtype=np.int64)
    depth = max(len(nest) for nest in trace.loop_contexts)
    lids = np.full((len(trace.loop_contexts), depth), -1, dtype=np.int64)
    its = np.zeros((len(trace.loop_contexts), depth), dtype=np.int64)
    for c, nest in enumerate(trace.loop_contexts):
        for d, (lid, it) in enumerate(nest):
            lids[c, d], its[c, d] = lid, it
    return lids[ctx], its[ctx]


def _swappable(trace: Trace, outer: int, inner: np.ndarray) -> bool:
    """The outer loop is affine and every instruction of it sits in one inner affine loop statement (a perfect
    nest: each outer iteration runs its own instance of it), each of more than one iteration."""
    if len(inner) == 0 or (inner < 0).any():
        return False
    instances = [trace.loops[int(lid)] for lid in np.unique(inner)]
    if len({(loop.line, loop.trip_count) for loop in instances}) != 1:
        return False
    return all(loop.kind == LoopKind.AFFINE and loop.trip_count > 1 for loop in (trace.loops[outer], instances[0]))
