"""A sequential_range loop run outermost around loop-invariant work (NeuronCoreSpec.sequential_outermost).

`sequential_major_order` (perf-10) distributes and interchanges a sequential_range loop inside an affine one.
Evidence, one kernel: the lora baseline's `for i13 (12 column blocks):
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
