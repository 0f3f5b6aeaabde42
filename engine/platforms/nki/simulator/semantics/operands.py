"""What every NKI instruction does with its operands, shared by `nl` (language.py) and `nisa` (isa.py).

- a `mask=` becomes a window on the tile's dimensions (`mask_window`);
- the result's dtype is the one asked for, else float32 if any operand is float32, else the first
  operand's (`result_dtype`);
- engines compute in float32 (`as_fp32`) and round into the result's dtype (`to_dtype`);
- broadcasting is partition-first: a (128,) tile is one value per partition (`partition_first`,
  `broadcast_full_shape`, `fit_to`);
- reductions run along free axes, never the partition axis (`free_axes`).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError, unsupported
from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.semantics.addressing import Window
from engine.platforms.nki.simulator.semantics.indexing import Mask
from engine.platforms.nki.simulator.semantics.semantics import as_fp32, fit_to, partition_first, to_dtype
from engine.platforms.nki.simulator.semantics.tensors import Access, Derived, Tensor, View

__all__ = ["as_fp32", "broadcast_full_shape", "fit_to", "free_axes", "mask_window", "partition_first", "result_dtype",
           "to_dtype"]


def mask_window(mask: Any) -> Window | None:
    """The window a `mask=` leaves of each tile dimension, or None without a mask."""
    if mask is None:
        return None
    if not isinstance(mask, Mask):
        raise NKICompileError("mask", f"mask must be a predicate over index expressions, got {mask!r}")
    win = mask.window()
    if win is None:
        raise unsupported("mask", "a mask that is not a conjunction of bounds on single indices")
    return win


def _dtype_of(x: Any) -> dt.DType | None:
    if isinstance(x, Access):
        return x.tensor.dtype
    if isinstance(x, (Tensor, View, Derived)):
        return x.dtype
    return None


def result_dtype(dtype: Any, *operands: Any) -> dt.DType:
    """`dtype` if given; else float32 when any operand is float32, else the first tile operand's dtype."""
    if dtype is not None:
        return dt.as_dtype(dtype)
    found = [d for d in (_dtype_of(o) for o in operands) if d is not None]
    if not found:
        return dt.float32
    if builtins.any(d is dt.float32 for d in found):
        return dt.float32
    return found[0]


def broadcast_full_shape(*accs: Any) -> tuple[int, ...]:
    """The unmasked shape of an elementwise result: the operands' full shapes, broadcast partition-first."""
    shapes = [a.full_shape for a in accs if isinstance(a, Access)]
    if not shapes:
        return ()
    nd = builtins.max(len(s) for s in shapes)
    shapes = [tuple(s) + (1,) * (nd - len(s)) for s in shapes]
    return tuple(np.broadcast_shapes(*shapes))


def free_axes(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    """The axes a reduction runs along (all free axes by default); the partition axis is rejected."""
    if axis is None:
        axes = tuple(range(1, ndim))
    elif isinstance(axis, (list, tuple)):
        axes = tuple(int(a) % ndim for a in axis)
    else:
        axes = (int(axis) % ndim,)
    if 0 in axes:
        raise NKICompileError(op, "reductions run along free axes; axis 0 is the partition axis "
                                  "(transpose first, or use nisa.tensor_partition_reduce)")
    return axes


def reduced_window(win: Any, ndim: int, axes: tuple[int, ...], keepdims: bool) -> Any:
    """The mask window of a reduction's operand (positions counted from its last axis) on the result's axes: a
    reduced axis leaves the window (all of it was reduced, or its one element kept), the others move up."""
    if not win:
        return win
    kept = [ax for ax in range(ndim) if keepdims or ax not in axes]
    out = {}
    for pos, bounds in win.items():
        axis = ndim + pos
        if axis in axes or axis not in kept:
            continue
        out[kept.index(axis) - len(kept)] = bounds
    return out or None
