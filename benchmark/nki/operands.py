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

from . import dtypes as dt
from .addressing import Window
from .errors import NKICompileError, unsupported
from .indexing import Mask
from .tensors import Access, Derived, Tensor, View

_SCALARS = (int, float, bool, np.generic)


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


def partition_first(*arrays: Any) -> list[Any]:
    """NKI broadcasting is partition-first: pad lower-rank tiles with trailing unit dimensions."""
    nd = builtins.max((np.ndim(a) for a in arrays if isinstance(a, np.ndarray)), default=0)
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and 0 < a.ndim < nd:
            a = a.reshape(a.shape + (1,) * (nd - a.ndim))
        out.append(a)
    return out


def broadcast_full_shape(*accs: Any) -> tuple[int, ...]:
    """The unmasked shape of an elementwise result: the operands' full shapes, broadcast partition-first."""
    shapes = [a.full_shape for a in accs if isinstance(a, Access)]
    if not shapes:
        return ()
    nd = builtins.max(len(s) for s in shapes)
    shapes = [tuple(s) + (1,) * (nd - len(s)) for s in shapes]
    return tuple(np.broadcast_shapes(*shapes))


def as_fp32(x: Any) -> Any:
    """Engines compute in fp32: promote narrow floats before the math."""
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.dtype.itemsize < 4:
        return x.astype(np.float32)
    return x


def to_dtype(values: Any, d: dt.DType) -> np.ndarray:
    """`values` in the storage of dtype `d`, rounded as the device rounds (bf16, tf32, fp8)."""
    arr = np.asarray(values)
    if arr.dtype != d.storage:
        arr = arr.astype(d.storage)
    if d.mantissa_bits:
        arr = d.round(arr)
    return arr


def fit_to(values: Any, shape: tuple[int, ...], op: str) -> Any:
    """Match a result to a destination shape: equal, same size (reshape), or NKI partition-first broadcast."""
    if isinstance(values, _SCALARS):
        return values
    values = np.asarray(values)
    if values.shape == shape:
        return values
    size = 1
    for s in shape:
        size *= s
    if values.size == size:
        return values.reshape(shape)
    if values.ndim <= len(shape):
        padded = values.reshape(values.shape + (1,) * (len(shape) - values.ndim))
        try:
            return np.broadcast_to(padded, shape)
        except ValueError:
            pass
    raise NKICompileError(op, f"result shape {values.shape} does not fit destination shape {shape}")


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
