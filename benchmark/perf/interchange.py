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
"""

from __future__ import annotations

import numpy as np

from benchmark.nki.trace import LoopKind, Trace


def interchanged_order(trace: Trace, vn_elided: np.ndarray, base: np.ndarray | None = None) -> np.ndarray | None:
    """Per instruction, its position with each perfect two-loop affine nest whose inner loop repeats elided
    loop-invariant work run inner-loop-major; `base`: the order to start from (fusion.fused_order; None: program
    order). None when nothing is interchanged."""
    n = len(trace)
    if n == 0 or len(vn_elided) != n or not vn_elided.any() or not trace.loop_contexts:
        return None
    ctx = np.asarray(trace.columns["loop_ctx"], dtype=np.int64)
    depth = max(len(nest) for nest in trace.loop_contexts)
    lids = np.full((len(trace.loop_contexts), depth), -1, dtype=np.int64)
    its = np.zeros((len(trace.loop_contexts), depth), dtype=np.int64)
    for c, nest in enumerate(trace.loop_contexts):
        for d, (lid, it) in enumerate(nest):
            lids[c, d], its[c, d] = lid, it
    lid, it = lids[ctx], its[ctx]
    index = np.arange(n) if base is None else base.astype(np.int64)
    key_outer, key_inner = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    start = index.copy()  # an interchanged nest's instructions sort together, where its first one was
    for d in range(depth - 1):
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


def _swappable(trace: Trace, outer: int, inner: np.ndarray) -> bool:
    """The outer loop is affine and every instruction of it sits in one inner affine loop statement (a perfect
    nest: each outer iteration runs its own instance of it), each of more than one iteration."""
    if len(inner) == 0 or (inner < 0).any():
        return False
    instances = [trace.loops[int(lid)] for lid in np.unique(inner)]
    if len({(loop.line, loop.trip_count) for loop in instances}) != 1:
        return False
    return all(loop.kind == LoopKind.AFFINE and loop.trip_count > 1 for loop in (trace.loops[outer], instances[0]))
