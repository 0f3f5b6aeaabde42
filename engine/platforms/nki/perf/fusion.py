"""Loop fusion: the order in which the compiler runs producer-consumer loops.

The Neuron compiler's loop-level stage "performs layout, tiling and loop fusion optimizations" (nki/index.rst), its
middle end "loop-reordering and loop-fusion" (nki/library/specs/design-rmsnorm-quant.rst; aws-neuron-sdk @81ce03ae).
Evidence on trn1 (trn1_nkibench_baselines.csv): the swiglu baseline makes its gate projection for all three row
blocks in one `affine_range(3)` loop (48 MB, more than SBUF) and consumes it in the next `affine_range(3)`; in
program order all of it is live at once, yet neuron-profile counts only the kernel's own `_spill_163` and the
transposed input (16.8 MB saved once, reloaded in two of the three row blocks): the loops ran fused, down to the
row-block loops inside them.

`fused_order` returns each instruction's position in that order. At each loop level, two adjacent affine loops with
the same trip count fuse when the second reads what the first wrote (a dependency between them) and no dependency
goes from a later iteration of the first to an earlier one of the second; iteration k of the fused loop runs the
first loop's iteration k, then the second's, and a third loop joins on the same terms. Inside a fused iteration,
a loop that only loads (and waits on nothing there) runs first, as a prefetch, so the loops after it can fuse in
turn. spills.py takes the SBUF working set in this order (the schedule is unchanged: it already overlaps affine
iterations as the data allows).
"""

from __future__ import annotations

import numpy as np

from engine.platforms.nki.simulator.trace import Engine, LoopKind, Trace


class _Nest:
    """Per instruction, its loop and iteration at each nest level, and its predecessors (deps CSR)."""

    def __init__(self, trace: Trace, indptr: np.ndarray, indices: np.ndarray) -> None:
        ctx = np.asarray(trace.columns["loop_ctx"], dtype=np.int64)
        depth = max((len(nest) for nest in trace.loop_contexts), default=0)
        lids = np.full((len(trace.loop_contexts), depth), -1, dtype=np.int64)
        its = np.zeros((len(trace.loop_contexts), depth), dtype=np.int64)
        for c, nest in enumerate(trace.loop_contexts):
            for d, (lid, it) in enumerate(nest):
                lids[c, d], its[c, d] = lid, it
        self.lid, self.it = lids[ctx], its[ctx]
        self.depth = depth
        self.loops = trace.loops
        self.indptr, self.indices = indptr, indices
        engine = np.asarray(trace.columns["engine"], dtype=np.int64)
        self.load = (engine == Engine.DMA) & (np.asarray(trace.columns["hbm_read"], dtype=np.int64) > 0)
        self.fused = False

    def preds(self, block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(successor, predecessor) pairs of the instructions in `block`."""
        counts = self.indptr[block + 1] - self.indptr[block]
        succ = np.repeat(block, counts)
        starts = np.repeat(self.indptr[block] - np.cumsum(counts) + counts, counts)
        return succ, self.indices[starts + np.arange(len(succ))]

    def runs(self, block: np.ndarray, d: int) -> list[np.ndarray]:
        """`block` cut into loop instances at level d (and single straight-line instructions)."""
        if d >= self.depth:
            return [block]
        lid, it = self.lid[block, d], self.it[block, d]
        cut = np.r_[True, (lid[1:] != lid[:-1]) | (it[1:] < it[:-1]) | (lid[1:] < 0)]
        return np.split(block, np.flatnonzero(cut)[1:])

    def loop_of(self, run: np.ndarray, d: int) -> int:
        """The affine loop (trip count > 1) run is an instance of at level d, or -1."""
        if d >= self.depth:
            return -1
        lid = int(self.lid[run[0], d])
        if lid < 0 or self.loops[lid].kind != LoopKind.AFFINE or self.loops[lid].trip_count < 2:
            return -1
        return lid

    def joins(self, group: list[np.ndarray], run: np.ndarray, d: int) -> bool:
        first, this = self.loop_of(group[0], d), self.loop_of(run, d)
        if first < 0 or this < 0 or self.loops[first].trip_count != self.loops[this].trip_count:
            return False
        before = np.concatenate(group)
        succ, pred = self.preds(run)
        inside = np.isin(pred, before)
        if not inside.any():
            return False  # no producer-consumer pair: nothing to gain
        return bool((self.it[pred[inside], d] <= self.it[succ[inside], d]).all())

    def order(self, block: np.ndarray, d: int, prefetch: bool = False) -> np.ndarray:
        runs = self.runs(block, d)
        if prefetch:
            runs = self._prefetch_first(block, runs)
        groups: list[list[np.ndarray]] = []
        for run in runs:
            if groups and self.joins(groups[-1], run, d):
                groups[-1].append(run)
            else:
                groups.append([run])
        out = []
        for g in groups:
            if self.loop_of(g[0], d) < 0:
                out.append(g[0])  # straight-line code, or a loop that is not fused (sequential, static)
                continue
            members = np.concatenate(g)
            it = self.it[members, d]
            self.fused |= len(g) > 1
            for k in np.unique(it):
                body = members[it == k]  # each member's iteration k, in program order
                out.append(self.order(body, d + 1, prefetch=len(g) > 1))
        return np.concatenate(out) if out else block

    def _prefetch_first(self, block: np.ndarray, runs: list[np.ndarray]) -> list[np.ndarray]:
        """Loops that only load and wait on nothing in `block` first (a fused iteration's prefetches)."""
        first, rest = [], []
        for run in runs:
            _, pred = self.preds(run)
            if self.load[run].all() and not np.isin(pred, block).any():
                first.append(run)
            else:
                rest.append(run)
        return first + rest


def fused_order(trace: Trace, indptr: np.ndarray, indices: np.ndarray) -> np.ndarray | None:
    """Per instruction, its position in the compiler's order with producer-consumer loops fused; None: program
    order (nothing fuses)."""
    n = len(trace)
    if n == 0 or not trace.loop_contexts:
        return None
    nest = _Nest(trace, indptr, indices)
    order = nest.order(np.arange(n), 0)
    if not nest.fused:
        return None
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    return pos
