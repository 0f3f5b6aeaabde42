"""Memory a split loop's two processes share, and how written values cross from the child to the parent.

Mapped before the fork, so both processes see the same pages: the `Exchange` (the child copies the values
it wrote there, or makes its new blocks there to begin with, and the parent uses them in place) and the
storage of HBM outputs nothing has written yet (`share_storage`: the child writes them in place).
`storage_cut` and `cut_view` say where a written view sits in its tensor's storage, so the parent can
cut the same region out of its own copy.
"""

from __future__ import annotations

import math
import mmap
import sys
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from engine.platforms.nki.simulator.semantics.tensors import Access, Tensor

_MAP_NORESERVE = 0x4000  # Linux; not in Python's mmap module before 3.13


class Exchange:
    """Memory shared with a split's child, mapped before the fork: the child copies the values it wrote
    into it, and the parent uses them in place (a block it lacks becomes a view of this memory).
    Address space only: pages exist once written."""

    SIZE = 1 << 36

    def __init__(self) -> None:
        self.buf = mmap.mmap(-1, self.SIZE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
        self.address = np.frombuffer(self.buf, dtype=np.uint8, count=1).ctypes.data
        self.used = 0

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Fresh zeroed storage in the shared memory (a child's new block, `recycling.BlockRecycler.take`)."""
        nbytes = math.prod(shape) * dtype.itemsize
        start = -(-self.used // 64) * 64
        if start + nbytes > self.SIZE:
            raise MemoryError("the exchange memory is full")
        self.used = start + nbytes
        return self.get((start, dtype.str, tuple(shape)))

    def put(self, values: np.ndarray) -> tuple[int, str, tuple[int, ...]] | None:
        """Where `values` are in the shared memory: in place if they already are (a block made by
        `zeros`), else copied in; None when the region is full."""
        if values.flags.c_contiguous:
            offset = values.ctypes.data - self.address
            if 0 <= offset and offset + values.nbytes <= self.SIZE:
                return offset, values.dtype.str, tuple(values.shape)
        start = -(-self.used // 64) * 64
        if start + values.nbytes > self.SIZE:
            return None
        self.used = start + values.nbytes
        self.get((start, values.dtype.str, values.shape))[...] = values
        return start, values.dtype.str, tuple(values.shape)

    def get(self, where: tuple[int, str, tuple[int, ...]]) -> np.ndarray:
        start, dtype, shape = where
        return np.frombuffer(self.buf, dtype=dtype, count=math.prod(shape), offset=start).reshape(shape)


def share_storage(t: Tensor) -> bool:
    """Move an HBM tensor nothing has written yet (an output) into memory a forked child shares, so the
    child's writes need no copying back. False when something else holds a view of its storage."""
    data = t.data
    if data is None or t.blocks is not None or t.init is None or data.base is not None or data.nbytes < 2**20 \
            or sys.getrefcount(data) > 3 or t.init.any():
        return False
    buf = mmap.mmap(-1, data.nbytes, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    t.data = np.frombuffer(buf, dtype=data.dtype).reshape(data.shape)  # zeros, like the calloc'd original
    return True


def storage_cut(t: Tensor, acc: Access) -> tuple[Any, int, tuple[int, ...], tuple[int, ...]] | None:
    """Where an access's view sits in its tensor's storage: (block key or None, element offset, shape,
    element strides), or None when the view is not inside that storage."""
    view = acc.array
    if t.blocks is not None:
        block = t.blocks.get(acc.key) if acc.key is not None else None
        if block is None or block.data is None:  # never touched, or evicted
            return None
        base, key = block.data, acc.key
    else:
        base, key = t.data, None
    if base is None or not np.shares_memory(base, view) or view.dtype != base.dtype:
        return None
    item = view.itemsize
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if offset % item or any(s % item for s in view.strides):
        return None
    return key, offset // item, tuple(view.shape), tuple(s // item for s in view.strides)


def cut_view(base: np.ndarray, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """The view `storage_cut` described, on another array with the same layout."""
    flat = base.reshape(-1)
    item = base.itemsize
    return as_strided(flat[offset:] if offset else flat, shape=shape, strides=tuple(s * item for s in strides))


def in_shared_memory(a: np.ndarray) -> bool:
    """Whether `a` views a shared mapping (an `Exchange`, or an output `share_storage` moved): memory the
    other process of a split may write."""
    base = a
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # np.frombuffer's arrays end in a view of the mapping
        base = base.obj
    return isinstance(base, mmap.mmap)
