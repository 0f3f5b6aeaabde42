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

from .errors import NKICompileError
from .indexing import ArrayIndex
from .tensors import Tensor, View


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
