"""Tensor-valued indices (indirect DMA, gather/scatter): `data[idx_tile[i_p, 0], i_f]` (issue 34).

NKI lets a DMA address HBM through a tile of integers that lives on the chip (the nl.load/nl.store/dma_copy
pages of the API reference; AWS's tests test_nki_nl_load_store_indirect.py and test_nki_isa_dma_copy.py). The
simulator reads the index tile's values when the access is resolved and turns them into an explicit index
array, so the access becomes the non-affine (fancy) kind every other part of the simulator already knows:
bounds are checked element by element, reads copy, writes scatter.

The addresses then depend on values computed at run time. The recorded program (program.py) keeps them as
the constants of this run, so the replayer could not redo them on other inputs: the recorder lists the lines
with such accesses in `Program.indirect`, and replay.check_program refuses those programs with the reason.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError
from engine.platforms.nki.simulator.semantics.addressing import normalize_items
from engine.platforms.nki.simulator.semantics.indexing import ArrayIndex, IndexExpr
from engine.platforms.nki.simulator.semantics.tensors import Tensor, View


def has_tile_index(items: Any) -> bool:
    """Whether an index tuple holds a tile (a Tensor or a View of one) among its items."""
    if isinstance(items, tuple):
        return any(isinstance(it, (Tensor, View)) for it in items)
    return isinstance(items, (Tensor, View))


def tile_indices(sim: Any, items: Any, op: str) -> Any:
    """`items` with each tile replaced by an ArrayIndex of its values, in tile layout: the index tile's first
    axis is the partition axis of the access (a (64,) or (64, 1) tile indexes 64 partitions)."""
    single = not isinstance(items, tuple)
    out = []
    for it in ((items,) if single else items):
        if isinstance(it, (Tensor, View)):
            acc = sim.operand(it, None, op)
            values = np.asarray(sim.read(acc, op))
            if values.dtype.kind not in "iu":
                if values.dtype.kind != "f" or not np.array_equal(values, np.round(values)):
                    raise NKICompileError(op, f"an index tile must hold integers, got {values.dtype}")
            if values.ndim == 1:
                values = values[:, None]
            elif values.ndim > 2 or (values.ndim == 2 and values.shape[1] != 1 and values.shape[0] != 1):
                values = values.reshape(values.shape[0], -1)
            out.append(ArrayIndex(values.astype(np.int64)))
            recorder = getattr(sim, "recorder", None)
            if recorder is not None:
                recorder.program.indirect.append(sim.line_no)
        else:
            out.append(it)
    return out[0] if single else tuple(out)


def skip_out_of_bounds(sim: Any, src: Any, dst: Any, op: str) -> tuple[Any, Any]:
    """dma_copy(oob_mode=oob_mode.skip): the partitions whose index (in the one indirect side) falls outside
    its tensor are left out of both sides, so they are neither read nor written (the API reference's
    dma_copy; AWS's test_indirect_load_oob_skip). Returns (src, dst) as Views, or as given when nothing is
    indirect or every index is inside."""
    sides = [x for x in (src, dst) if isinstance(x, View) and has_tile_index(x.items)]
    if len(sides) != 1:
        return src, dst
    side = sides[0]
    items = list(side.items) if isinstance(side.items, tuple) else [side.items]
    axis = next(k for k, it in enumerate(items) if isinstance(it, (Tensor, View)))
    values = tile_indices(sim, items[axis], op).array
    valid = ((values >= 0) & (values < side.base.shape[axis])).reshape(values.shape[0], -1).all(axis=1)
    if valid.all():
        return src, dst
    items[axis] = ArrayIndex(values[valid])
    other = dst if side is src else src
    other_view = other if isinstance(other, View) else View(other, (Ellipsis,))

    o_items = normalize_items(other_view.items, len(other_view.base.shape))
    first = next(k for k, it in enumerate(o_items) if not isinstance(it, (int, np.integer)))
    it = o_items[first]
    if isinstance(it, slice):
        rows = np.arange(*it.indices(other_view.base.shape[first]))[:, None]
    elif isinstance(it, (IndexExpr, ArrayIndex)):
        rows = it.materialize()
    else:
        raise NKICompileError(op, "oob_mode.skip needs the other side indexed by a slice or an arange")
    o_items[first] = ArrayIndex(rows.reshape(rows.shape[0], -1)[valid][:, :1])
    for k in range(first + 1, len(o_items)):  # explicit indices cannot mix with slices: the free axes as aranges
        if isinstance(o_items[k], slice):
            columns = np.arange(*o_items[k].indices(other_view.base.shape[k]))
            o_items[k] = ArrayIndex(columns.reshape((1,) * (k - first) + (-1,)))
    new_side = View(side.base, tuple(items))
    new_other = View(other_view.base, tuple(o_items))
    return (new_side, new_other) if side is src else (new_other, new_side)
