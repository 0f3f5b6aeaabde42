"""SBUF capacity pressure turned into HBM traffic.

Along the compiler's order, a chunk of SBUF data is live from its write to its last read. That order is program
order, except that the compiler pipelines the iterations of an unrolled affine_range loop over the engines its
body uses ([NKI-AFFINE] in engine/platforms/nki/hardware.py): one iteration per engine runs side by side, so their tiles are
live together (interleaved_positions; a loop whose tiles fit one at a time may not fit three at a time, which is
why tiling a long free axis, as the fused Mamba tutorial's v3 does, removes spills). Where the live bytes
per partition exceed the SBUF capacity, something must leave: like a compiler's allocator, we evict the
data whose next use is furthest away. Concretely, every read of a chunk closes a "gap" since the chunk's
previous access; gaps that cross a point of excess are candidates, and the longest ones are evicted first
(one length threshold, found by bisection, the largest that brings the live set under capacity everywhere).
An evicted gap costs a reload before the read. Data that is a plain copy of HBM (written by a DMA load) is
reloaded from its source; anything else is a spill: saved once after it is written, reloaded at each
evicted read, and counted in spill_save_bytes / spill_reload_bytes.

Repeated loads of one HBM region (deps._repeated_loads) take part as "virtual" chunks: a repeat whose gap is
not evicted is elided (the compiler kept the data), an evicted one runs as traced. The kept copy and the tiles
the loads write are one copy of the data: it is counted once (_live_with_kept_copies). A kept product of loop-invariant
transposes (valnum.py) is a virtual chunk too, but dirty: an evicted repeat stays elided and reloads the product,
saved once after its first instance. The loops' order is the compiler's fused one where it fuses producer-consumer
loops (fusion.py, SbufUse.fused); the kept copies' repeats are then chained in that order.

How many iterations are in flight is bounded by SBUF (pipeline_depth): a software pipeline needs a slot per step
in flight, so the compiler pipelines as deep as the live set fits, and where even one iteration at a time does not
fit it still double-buffers (`affine_interleave_unfit`, hardware.py) and spills. With `affine_outer_pipeline` the
affine loops around those are pipelined to the same depth, their loads issued ahead (interleaved_positions). A gap's length is counted in
`weight` per instruction: the kernel's own statements, not the matmuls and copies lowering.py adds for one
partition broadcast (they hold no data of their own), so lowering changes what instructions cost, not which data
is evicted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from engine.platforms.nki.perf.deps import AffineSlots, SbufUse


@dataclass(frozen=True)
class SpillPlan:
    reload_bytes: np.ndarray  # per instruction: bytes to bring back from HBM before it can run
    save_bytes: np.ndarray  # per instruction: bytes written to HBM after it (spill saves)
    spill_reload_total: float  # reloads of spilled (dirty) data
    spill_save_total: float
    refetch_total: float  # reloads of clean data (HBM copies), counted as plain hbm reads
    elided: np.ndarray  # per instruction: a repeated load whose data stayed in SBUF (costs nothing)
    reload_after: np.ndarray  # per instruction: after which instruction its reload may start (-1 none, -2 on use)
    # Per instruction: the SBUF partition rows its reloads / saves span, one DMA descriptor each (empty: unknown)
    reload_rows: np.ndarray = field(default_factory=lambda: np.zeros(0))
    save_rows: np.ndarray = field(default_factory=lambda: np.zeros(0))


def live_bytes(use: SbufUse, n: int) -> np.ndarray:
    """Live SBUF bytes per partition after each instruction, in program order."""
    live = np.zeros(n + 1)
    if len(use.inst) == 0:
        return live[:n]
    writes = np.flatnonzero(use.is_write)
    last_use = use.inst.copy()
    reads = np.flatnonzero(~use.is_write & (use.producer >= 0))
    np.maximum.at(last_use, use.producer[reads], use.inst[reads])
    np.add.at(live, use.inst[writes], use.chunk_bytes[writes])
    np.add.at(live, last_use[writes] + 1, -use.chunk_bytes[writes])
    return np.cumsum(live)[:n]


def _tile_ends(use: SbufUse, n: int) -> np.ndarray:
    """Per instruction: the last instruction that reads the SBUF data it wrote (kept copies aside); -1 for one that
    writes nothing."""
    last_use = use.inst.copy()
    reads = np.flatnonzero(~use.is_write & (use.producer >= 0) & ~use.virtual)
    np.maximum.at(last_use, use.producer[reads], use.inst[reads])
    ends = np.full(n, -1, dtype=np.int64)
    writes = np.flatnonzero(use.is_write & ~use.virtual)
    np.maximum.at(ends, use.inst[writes], last_use[writes])
    return ends


def _live_with_kept_copies(use: SbufUse, n: int, repeats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The live bytes per partition with each repeated load's kept copy counted once, and per row the start of
    its gap (the previous access + 1, except for a repeat: see below).

    A repeat the compiler skips reads the SBUF copy an earlier load of the region left there, so that copy and
    the tile the repeat would write are the same bytes. While the earlier tile is still read, it is the copy;
    the copy alone costs space only from the earlier tile's last read to the repeat, and that is the gap whose
    eviction makes the repeat run (a re-fetch). Where the earlier tile is still read after the repeat (the
    pipelined order of spills.interleaved_positions), there is no gap: one copy serves both tiles."""
    gap_start = use.prev_inst + 1
    if len(repeats) == 0:
        return live_bytes(use, n), gap_start
    live = np.concatenate((live_bytes(replace(use, chunk_bytes=np.where(use.virtual, 0, use.chunk_bytes)), n), [0.0]))
    tile_end = _tile_ends(use, n)
    prev, here = use.prev_inst[repeats], use.inst[repeats]
    start = np.maximum(tile_end[prev], prev) + 1
    gap_start[repeats] = start
    size = use.chunk_bytes[repeats].astype(np.float64)
    delta = np.zeros(n + 1)
    gap = here > start
    np.add.at(delta, start[gap], size[gap])
    np.add.at(delta, here[gap], -size[gap])
    # No gap: the two tiles overlap from the repeat to the earlier one's last read; count them once there.
    overlap_end = np.minimum(tile_end[prev], np.maximum(tile_end[here], here))
    both = ~gap & (overlap_end >= here)
    np.add.at(delta, here[both], -size[both])
    np.add.at(delta, overlap_end[both] + 1, size[both])
    return (live + np.cumsum(delta))[:n], gap_start


def interleaved_positions(use: SbufUse, n: int, depth: int, base: np.ndarray | None = None,
                          outer: bool = False) -> np.ndarray | None:
    """Each instruction's position in the compiler's order, where the iterations of an unrolled innermost
    affine_range loop run `depth` at a time in lockstep (instruction k of each, then k + 1 of each, ...); None
    when that is program order. `base`: the order the loops run in (fusion.fused_order; None: program order).
    `outer`: the affine loops around such a loop are software-pipelined too, level by level (deps.outer_slots),
    each iteration's loads (in its body or in loops of loads only) issued one iteration ahead (iteration i + 1's
    loads before iteration i's compute and store: double buffering, [STREAM], [PERF-GUIDE] "Opt #4"); the outer
    runs are keyed by their first instruction's place in `base`, so they keep the fused order."""
    slots = use.slots
    if depth <= 1 or slots is None or len(slots.segment) != n:
        return base
    index = np.arange(n) if base is None else base
    outer_segment = slots.outer_segment if outer and slots.outer_segment.shape[1:] == (n,) else np.zeros((0, n))
    if not (outer_segment >= 0).any() and not (slots.segment >= 0).any():
        return base
    inside = slots.segment >= 0
    # Outside any such loop an instruction is its own segment; the segments keep their (fused) program order.
    segment = np.where(inside, index[np.maximum(slots.segment, 0)], index)
    # A software pipeline over the loop body's engines keeps one iteration per engine in flight.
    group = np.where(inside, slots.iteration // np.maximum(np.minimum(slots.stages, depth), 1), 0)
    keys = [index, slots.iteration, slots.offset, group, segment]
    # The levels of loops around, innermost first (lexsort's last key is its first): at each, an iteration's
    # prefetched loads go with the body of the iteration before, ahead of it (double buffering: one ahead, not
    # depth - 1, which pushes the next iterations' loads ahead of this one's on an in-order queue).
    for level in range(len(outer_segment) - 1, -1, -1):
        around = outer_segment[level] >= 0
        prefetch = slots.outer_prefetch[level] & around
        rank = _cached_run_ranks(slots, level, base, index, around)
        step = np.where(around, rank + np.where(prefetch, 0, 1), 0)
        keys += [~prefetch, step, np.where(around, index[np.maximum(outer_segment[level], 0)], index)]
    order = np.lexsort(tuple(keys))
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    return pos


_RANKS: list[tuple[AffineSlots, int, np.ndarray | None, np.ndarray]] = []  # (slots, level, base, ranks), newest last


def _cached_run_ranks(slots: AffineSlots, level: int, base: np.ndarray | None, index: np.ndarray,
                      around: np.ndarray) -> np.ndarray:
    """_run_ranks of one level, which depends on neither the depth nor the live set: one estimate asks for it at
    every depth pipeline_depth tries (lora: 23 times). Keyed by the very objects (held, so never reused)."""
    for held_slots, held_level, held_base, ranks in _RANKS:
        if held_slots is slots and held_level == level and held_base is base:
            return ranks
    ranks = _run_ranks(slots.outer_segment[level], slots.outer_iteration[level], index, around)
    _RANKS.append((slots, level, base, ranks))
    del _RANKS[:-8]
    return ranks


def _run_ranks(segment: np.ndarray, iteration: np.ndarray, index: np.ndarray, around: np.ndarray) -> np.ndarray:
    """Per instruction: its outer iteration's rank within its run in the order the loops run in (`index`), not
    in program order: an interchanged nest (interchange.py) runs a flattened level's iterations inner-loop-major,
    and the pipeline issues the next iteration's loads in that order. Program or fused order: `iteration` itself."""
    rank = np.zeros(len(segment), dtype=np.int64)
    rows = np.flatnonzero(around)
    if len(rows) == 0:
        return rank
    groups, inverse = np.unique(np.stack((segment[rows], iteration[rows])), axis=1, return_inverse=True)
    inverse = inverse.reshape(-1)
    first = np.full(groups.shape[1], np.iinfo(np.int64).max)
    np.minimum.at(first, inverse, index[rows])
    order = np.lexsort((first, groups[0]))  # by run, then where each iteration starts
    new_run = np.r_[True, groups[0][order][1:] != groups[0][order][:-1]]
    starts = np.maximum.accumulate(np.where(new_run, np.arange(len(order)), 0))
    group_rank = np.empty(len(order), dtype=np.int64)
    group_rank[order] = np.arange(len(order)) - starts
    rank[rows] = group_rank[inverse]
    return rank


def _kept_repeats_only(use: SbufUse, capacity: float) -> SbufUse:
    """`use` with the repeated loads the compiler cannot keep made ordinary loads.

    A repeated load is kept in SBUF only when the compiler could keep the whole input tensor there: the
    matmul tutorial's tiled kernel reloads its 64 MiB lhsT tile by tile (measured 1.21x slower than hoisting
    the loads), while matmul_add_rmsnorm's 16 MiB weights are read once (neuron-profile). The others run."""
    if len(use.source_bytes):
        cacheable = ~use.virtual | (use.source_bytes <= capacity)
        if not cacheable.all():
            use = replace(use, chunk_bytes=np.where(cacheable, use.chunk_bytes, 0),
                          virtual=use.virtual & cacheable, is_write=use.is_write | ~cacheable)
    return use


def _moved(use: SbufUse, pos: np.ndarray, rechain: bool = False) -> SbufUse:
    """`use` with every instruction at its position `pos` in the compiler's order (`rechain`: kept copies' repeats
    chained in that order, for an order that moves whole statements: fusion.py)."""
    vn_elided = use.vn_elided
    if len(vn_elided) == len(pos):
        vn_elided = np.empty_like(use.vn_elided)
        vn_elided[pos] = use.vn_elided
    inst = pos[use.inst]
    prev = np.where(use.prev_inst >= 0, pos[np.maximum(use.prev_inst, 0)], -1)
    if rechain:
        # A kept copy's repeats in the new order: each one's gap starts at the one before it *there* (fused loops
        # can put a later statement's repeat before an earlier statement's).
        rows = np.flatnonzero(use.virtual & ~use.is_write & (use.producer >= 0))
        if len(rows):
            rows = rows[np.lexsort((inst[rows], use.producer[rows]))]
            same = np.r_[False, use.producer[rows][1:] == use.producer[rows][:-1]]
            prev[rows] = np.where(same, inst[np.roll(rows, 1)], inst[use.producer[rows]])
    return replace(use, inst=inst, prev_inst=prev, vn_elided=vn_elided)


def pipeline_depth(use: SbufUse, n: int, capacity_per_partition: float, partitions: int, interleave: int,
                   unfit: int = 0, *, outer: bool = False, outer_over_kept: bool = False) -> int:
    """How many iterations of each unrolled affine loop the compiler keeps in flight: the most, up to `interleave`,
    whose live set fits `capacity_per_partition`; where none does, `unfit` (0: `interleave`, no SBUF bound).
    `outer_over_kept`: where the loops around
    (`outer`) fit only without the kept copies, they are pipelined anyway at the depth the innermost loops fit at
    without them, and the kept copies give way (NeuronCoreSpec.affine_outer_over_kept_copies)."""
    if outer and outer_over_kept:
        inner = pipeline_depth(use, n, capacity_per_partition, partitions, interleave, unfit)
        both = pipeline_depth(use, n, capacity_per_partition, partitions, interleave, unfit, outer=True)
        if both >= inner or inner <= 1:
            return both
        own = replace(_kept_repeats_only(use, capacity_per_partition * partitions),
                      chunk_bytes=np.where(use.virtual, 0, use.chunk_bytes))
        pos = interleaved_positions(own, n, inner, own.fused, True)
        moved = own if pos is None else _moved(own, pos, own.fused is not None)
        return inner if live_bytes(moved, n).max(initial=0.0) <= capacity_per_partition else both
    if unfit <= 0 or interleave <= 1:
        return interleave
    use = _kept_repeats_only(use, capacity_per_partition * partitions)
    repeats = np.flatnonzero(use.virtual & ~use.is_write)
    for depth in range(interleave, 0, -1):
        pos = interleaved_positions(use, n, depth, use.fused, outer)
        live, _ = _live_with_kept_copies(use if pos is None else _moved(use, pos, use.fused is not None), n, repeats)
        if live.max(initial=0.0) <= capacity_per_partition:
            return depth
    return min(unfit, interleave)


def outer_fits(use: SbufUse, n: int, capacity_per_partition: float, partitions: int, depth: int) -> bool:
    """Whether the live set fits `capacity_per_partition` with the loops around the innermost affine ones
    pipelined (`interleaved_positions` with `outer`) at `depth`, kept copies counted."""
    use = _kept_repeats_only(use, capacity_per_partition * partitions)
    repeats = np.flatnonzero(use.virtual & ~use.is_write)
    pos = interleaved_positions(use, n, depth, use.fused, True)
    live, _ = _live_with_kept_copies(use if pos is None else _moved(use, pos, use.fused is not None), n, repeats)
    return bool(live.max(initial=0.0) <= capacity_per_partition)


def plan_spills(use: SbufUse, n: int, capacity_per_partition: float, partitions: int = 128,
                interleave: int = 1, *, weight: np.ndarray | None = None, outer: bool = False,
                keep_prefetch: bool = False) -> SpillPlan:
    """The spills of `use`'s live set, taken in the compiler's order (`interleave` iterations of each unrolled
    affine loop side by side, as pipeline_depth decides: interleaved_positions) and returned per instruction of
    the trace. `weight`: what each instruction counts for in a gap's length (None: 1 each). `outer`: the loops
    around those pipelined too (interleaved_positions). `keep_prefetch`: a load those loops issue ahead keeps its
    tile until its first read (the pipeline's point; NeuronCoreSpec.affine_outer_over_kept_copies)."""
    pos = interleaved_positions(use, n, interleave, use.fused, outer)
    ahead = _prefetched(use, n) if outer and keep_prefetch and interleave > 1 else None
    if pos is None:
        return _plan(use, n, capacity_per_partition, partitions, weight, ahead)
    order = np.empty(n, dtype=np.int64)
    order[pos] = np.arange(n)
    moved_weight = None
    if weight is not None:
        moved_weight = np.empty(n)
        moved_weight[pos] = weight
    moved_ahead = None
    if ahead is not None:
        moved_ahead = np.empty(n, dtype=bool)
        moved_ahead[pos] = ahead
    plan = _plan(_moved(use, pos, use.fused is not None), n, capacity_per_partition, partitions, moved_weight,
                 moved_ahead)
    after = plan.reload_after[pos]
    rows = {k: getattr(plan, k)[pos] for k in ("reload_rows", "save_rows") if len(getattr(plan, k)) == n}
    return replace(plan, reload_bytes=plan.reload_bytes[pos], save_bytes=plan.save_bytes[pos],
                   elided=plan.elided[pos], reload_after=np.where(after >= 0, order[np.maximum(after, 0)], after),
                   **rows)


def _prefetched(use: SbufUse, n: int) -> np.ndarray | None:
    """Per instruction: a load the affine loops around an innermost one issue an iteration ahead (deps.outer_slots)."""
    slots = use.slots
    if slots is None or slots.outer_prefetch.shape[1:] != (n,):
        return None
    return slots.outer_prefetch.any(axis=0)


def _cover(rank: np.ndarray, kept: np.ndarray, lo: np.ndarray, hi: np.ndarray, size: np.ndarray,
           excess: np.ndarray) -> np.ndarray:
    """The candidate gaps [lo, hi) to evict so that no point stays over capacity, chosen point by point in order:
    at each point still over, among the gaps over it a kept copy's first, then the one that reaches furthest,
    then `rank`'s order. Where the excess comes in many short stretches (matmul_add_rmsnorm's row loop pipelined
    over its kept weights) this evicts the fewest chunks, where a prefix of `rank` takes 2.4 times as many."""
    first = np.empty(len(rank), dtype=np.int64)
    first[rank] = np.arange(len(rank))
    relief = np.zeros(len(excess))
    taken = np.zeros(len(rank), dtype=bool)
    for t in np.flatnonzero(excess > 0).tolist():
        while excess[t] - relief[t] > 1e-9:
            over = np.flatnonzero(~taken & (lo <= t) & (hi > t))
            if len(over) == 0:
                break
            pick = over[np.lexsort((first[over], -hi[over], ~kept[over]))[0]]
            taken[pick] = True
            relief[lo[pick]:hi[pick]] += size[pick]
    return np.flatnonzero(taken)


def _fewest_that_fit(count: int, fits: Callable[[int], bool]) -> int:
    """The smallest k in [0, count] for which `fits(k)` (true from some k on), else `count`: a binary search."""
    low, high = 0, count
    while low < high:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid + 1
    return low


def _plan(use: SbufUse, n: int, capacity_per_partition: float, partitions: int,
          weight: np.ndarray | None = None, ahead: np.ndarray | None = None) -> SpillPlan:
    zeros = np.zeros(n)
    use = _kept_repeats_only(use, capacity_per_partition * partitions)
    repeats = np.flatnonzero(use.virtual & ~use.is_write)
    all_elided = np.zeros(n, dtype=bool)
    all_elided[use.inst[repeats]] = True
    if len(use.vn_elided) == n:
        all_elided |= use.vn_elided  # loop-invariant computation and dead loads (valnum.py)
    live, gap_start = _live_with_kept_copies(use, n, repeats)
    excess = live - capacity_per_partition
    if n == 0 or excess.max(initial=0.0) <= 0:
        return SpillPlan(zeros, zeros.copy(), 0.0, 0.0, 0.0, all_elided, np.full(n, -1, dtype=np.int64))
    pressured = np.concatenate(([0], np.cumsum(excess > 0)))  # pressured[i] = points < i under pressure
    gap_rows = np.flatnonzero(~use.is_write & (use.prev_inst >= 0) & (use.producer >= 0))
    if ahead is not None:
        # A tile loaded an iteration ahead stays until its first read: evicting it there would undo the prefetch
        # the pipeline issued it for ([PERF-GUIDE] "Opt #4"); the kept copies give way instead.
        written = use.inst[use.producer[gap_rows]]
        gap_rows = gap_rows[~(ahead[written] & (use.prev_inst[gap_rows] == written) & ~use.virtual[gap_rows])]
    lo, hi = gap_start[gap_rows], use.inst[gap_rows]  # not resident over [lo, hi)
    crosses = (hi > lo) & (pressured[hi] - pressured[lo] > 0)
    gap_rows, lo, hi = gap_rows[crosses], lo[crosses], hi[crosses]
    if len(gap_rows) == 0:
        return SpillPlan(zeros, zeros.copy(), 0.0, 0.0, 0.0, all_elided, np.full(n, -1, dtype=np.int64))
    if weight is None:
        length = (hi - lo).astype(np.float64)
    else:  # counted in the kernel's statements (module docstring)
        at = np.concatenate(([0.0], np.cumsum(weight)))
        length = at[hi] - at[lo]
    size = use.chunk_bytes[gap_rows].astype(np.float64)

    # Rank the candidates: longest gap first; equal gaps grouped by the data they hold, so a partly evicted
    # tensor is evicted whole-chunk by whole-chunk rather than spread thinly.
    keys = (use.inst[gap_rows], use.producer[gap_rows], -length)
    kept = use.virtual[gap_rows] & use.clean[use.producer[gap_rows]]
    if ahead is not None:  # the kept copies give way first (a redundant load the compiler skipped runs again)
        keys += (~kept,)
    rank = np.lexsort(keys)

    def fits(k: int) -> bool:
        chosen = rank[:k]
        relief = (np.bincount(lo[chosen], size[chosen], minlength=n + 1)
                  - np.bincount(hi[chosen], size[chosen], minlength=n + 1))
        return bool((excess - np.cumsum(relief)[:n]).max() <= 0)

    if ahead is not None:
        chosen = _cover(rank, kept, lo, hi, size, excess)
    else:
        chosen = rank[:_fewest_that_fit(len(rank), fits)]  # the fewest evictions that fit (all if none do)
    product = use.virtual[gap_rows] & ~use.clean[use.producer[gap_rows]]
    if product[chosen].any():
        # A kept product (valnum.py) is one tensor the compiler made and spills whole: every chunk of it leaves
        # across its gaps of the kind the planner had to evict. A product's gaps are a loop's period or a few
        # statements (swiglu: 2,272-2,329 instructions, or 11-68 between two statements' uses in one fused
        # iteration), so "at least half the shortest evicted one" picks the period; trn1 saves swiglu's 16.8 MB
        # transposed input once and reloads it in two of its three row blocks.
        shortest = length[chosen][product[chosen]].min()
        period = product & (length >= 0.5 * shortest)
        chosen = np.union1d(chosen, np.flatnonzero(period))
    evicted = gap_rows[chosen]
    reload_after_rows = use.prev_inst[evicted]
    # An evicted repeat load simply runs (its own DMA is the re-fetch); the others are elided. An evicted kept
    # product (valnum.py: its first instance is a dirty write) is reloaded like any spill.
    runs = use.virtual[evicted] & use.clean[use.producer[evicted]]
    elided = all_elided.copy()
    elided[use.inst[evicted[runs]]] = False
    reload_after_rows = reload_after_rows[~runs]
    evicted = evicted[~runs]
    # A re-fetch of clean data is an ordinary load the compiler prefetches: it may start once the previous
    # use of the chunk is done. A spill reload is placed just before its use (-2: when the engine gets there).
    producer_clean = use.clean[use.producer[evicted]]
    reload_after = np.full(n, -1, dtype=np.int64)
    np.maximum.at(reload_after, use.inst[evicted], np.where(producer_clean, reload_after_rows, -1))
    dirty_reload = np.zeros(n, dtype=bool)
    dirty_reload[use.inst[evicted[~producer_clean]]] = True
    reload_after[dirty_reload] = -2
    total = use.chunk_bytes[evicted].astype(np.float64) * use.partitions[evicted]
    reload_bytes = np.zeros(n)
    np.add.at(reload_bytes, use.inst[evicted], total)
    producer = use.producer[evicted]
    dirty = ~use.clean[producer]
    save_rows = np.unique(producer[dirty])
    save_bytes = np.zeros(n)
    saved = use.chunk_bytes[save_rows].astype(np.float64) * use.partitions[save_rows]
    np.add.at(save_bytes, use.inst[save_rows], saved)
    reload_rows = np.zeros(n)
    np.add.at(reload_rows, use.inst[evicted], use.partitions[evicted])
    save_rows_at = np.zeros(n)
    np.add.at(save_rows_at, use.inst[save_rows], use.partitions[save_rows])
    return SpillPlan(reload_bytes, save_bytes, float(total[dirty].sum()), float(saved.sum()),
                     float(total[~dirty].sum()), elided, reload_after, reload_rows, save_rows_at)
