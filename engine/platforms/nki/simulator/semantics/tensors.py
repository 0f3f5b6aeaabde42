"""Tensors in HBM, SBUF and PSUM, and the resolution of `tensor[items]` into a region of their storage.

Storage is one numpy array per tensor, allocated with `np.zeros` so the operating system maps pages only
when they are touched: a compiler-style kernel may declare SBUF tensors far larger than SBUF (the real
compiler allocates by live range), and only the tiles it writes cost host memory. An optional boolean
array of the same shape tracks which elements were written, for the uninitialised-read rule. On-chip
tensors with leading block axes store one array per block instead (`blocks`), kept by a block recycler
(recycling.py; `recycler` here is all this module asks of it).

`Tensor.access` turns `tensor[items]` (ints, slices, `IndexExpr`s, optionally narrowed by a mask window)
into an `Access`: a numpy view of the elements, the bounding box per tensor axis (for the trace and the
race check), and the tile shape (the index arithmetic is addressing.py's).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from engine.platforms.nki.simulator.errors import (
    BlockRecyclingMiss,
    NKICompileError,
    NKIRuntimeError,
    unsupported,
)
from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.semantics.addressing import (
    Window,
    affine_spec,
    apply_recipe,
    bounds,
    cached_shape,
    normalize_items,
    view_recipe,
)
from engine.platforms.nki.simulator.semantics.indexing import ArrayIndex, IndexExpr
from engine.platforms.nki.simulator.semantics.semantics import derive  # it builds on this module's neighbours
from engine.platforms.nki.simulator.trace import MemorySpace


class Buffer:
    """nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, nl.private_hbm."""

    __slots__ = ("name", "space")

    def __init__(self, name: str, space: MemorySpace) -> None:
        self.name = name
        self.space = space

    def __repr__(self) -> str:
        return f"nl.{self.name}"


SBUF = Buffer("sbuf", MemorySpace.SBUF)
PSUM = Buffer("psum", MemorySpace.PSUM)
HBM = Buffer("hbm", MemorySpace.HBM)
SHARED_HBM = Buffer("shared_hbm", MemorySpace.HBM)
PRIVATE_HBM = Buffer("private_hbm", MemorySpace.HBM)
ON_CHIP = frozenset((MemorySpace.SBUF, MemorySpace.PSUM))


class ParDim(int):
    """nl.par_dim(n): marks the partition axis of a declared on-chip tensor."""

    def __repr__(self) -> str:
        return f"par_dim({int(self)})"


class Access:
    """A resolved region of a tensor: a numpy view plus what the trace and the rules need."""

    __slots__ = ("tensor", "array", "init", "box", "shape", "full_shape", "key", "exact", "recipe")

    def __init__(self, tensor: Tensor, array: np.ndarray, init: np.ndarray | None,
                 box: tuple[tuple[int, int], ...], shape: tuple[int, ...], full_shape: tuple[int, ...],
                 key: tuple[int, ...] | None, exact: bool = True) -> None:
        self.tensor = tensor
        self.array = array
        self.init = init
        self.box = box
        self.shape = shape
        self.full_shape = full_shape
        self.key = key  # leading pinned indices: the race-check bucket (None: spans buckets)
        self.exact = exact  # the box is the exact footprint (affine access), not a loose bound
        self.recipe: tuple[Any, ...] | None = None  # how the view was cut out of its block (blocked tensors)

    @property
    def space(self) -> MemorySpace:
        return self.tensor.space

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.tensor.dtype.itemsize

    @property
    def partitions(self) -> int:
        return self.shape[0] if self.shape else 1

    @property
    def free(self) -> int:
        p = self.partitions
        return self.size // p if p else 0


class BlockStorage(Protocol):
    """What a blocked tensor's accesses ask of the block recycler that stores it (recycling.BlockRecycler)."""

    def block(self, t: Tensor, key: tuple[int, ...]) -> Any:
        """The block `key` of `t` when `t.blocks` has no live one for it (made now, or revived)."""

    def revisit(self, t: Tensor, key: tuple[int, ...]) -> None:
        """A tile aliasing block `key` of `t` is used again."""

    def mark_written(self, t: Tensor, dst: Access) -> None:
        """`dst`, inside one block of `t`, was written (runtime.Simulator.write)."""


def _resolve_cached(t: Tensor, items: Any, window: Window | None, op: str) -> Access | None:
    """`Tensor.access` for ints, slices, Ellipsis and affine `IndexExpr`s, reusing the access's shape.

    Returns None (the caller takes the general path) for anything else, and for accesses that are out of
    bounds, so the general path raises its usual error."""
    found = cached_shape(t.shape, items, window, t.race_key_len)
    if found is None:
        return None
    shape, consts = found
    # One pass over the axes: the constant, the bounds (checked), and the basic-indexing item.
    axis_consts = []
    box = []
    index: list[Any] = []
    empty = shape.empty
    for (k, d, lo_off, hi_off, live), size in zip(shape.plan, t.shape, strict=True):
        c = d + consts[k] if k >= 0 else d
        lo = c + lo_off
        hi = c + hi_off
        if (lo < 0 or hi > size) and not empty:
            return None
        axis_consts.append(c)
        box.append((lo, hi))
        if live is None:
            index.append(c)
        else:
            stop = c + live[0] * live[1]
            index.append(slice(c, stop if stop >= 0 else None, live[0]))
    race_key = tuple(axis_consts[:shape.key_len]) if shape.key_pinned else None
    blocks = t.blocks
    if blocks is not None:
        # A blocked tensor: the pinned leading indices name one block, the rest cuts into it.
        if race_key is None or empty:
            return None
        block = blocks.get(race_key)
        if block is None or block.retired:  # not made yet, retired or evicted
            block = t.recycler.block(t, race_key)  # type: ignore[union-attr]
        n = shape.key_len
        if shape.simple:
            recipe: tuple[Any, ...] = (True, tuple(index[n:]), shape.order, shape.shape)
        else:
            origin = tuple(slice(c, None) if c >= 0 else slice(0, None) for c in axis_consts[n:])
            recipe = (False, origin, shape.block_coefs, shape.shape)
        init = block.init
        acc = Access(t, apply_recipe(block.data, recipe), apply_recipe(init, recipe) if init is not None else None,
                     tuple(box), shape.shape, shape.full_shape, race_key)
        acc.recipe = recipe
        return acc
    if t.data is None:
        t.allocate()
    data = t.data
    if not empty:
        if shape.simple:
            recipe = (True, tuple(index), shape.order, shape.shape)
        else:
            origin = tuple(slice(c, None) if c >= 0 else slice(0, None) for c in axis_consts)
            recipe = (False, origin, shape.coefs, shape.shape)
        array = apply_recipe(data, recipe)
        init = apply_recipe(t.init, recipe) if t.init is not None else None
    else:
        array = np.zeros(shape.shape, data.dtype)
        init = None
    return Access(t, array, init, tuple(box), shape.shape, shape.full_shape, race_key)


_SERIALS = itertools.count()


def next_serial() -> int:
    """A serial larger than every tensor's made so far and smaller than every later one's."""
    return next(_SERIALS)


class Tensor:
    """A tensor in HBM, SBUF or PSUM. On-chip tensors have a partition axis (par_dim, else axis 0)."""

    __slots__ = ("name", "shape", "dtype", "space", "buffer", "partition_axis", "data", "init", "trace_id",
                 "scope", "alias", "is_tile", "records", "race_key_len", "version", "deferred",
                 "poisoned", "blocks", "recycler", "readers", "fill", "serial", "home", "__weakref__")

    def __init__(self, name: str, shape: tuple[int, ...], dtype: dt.DType, buffer: Buffer, *,
                 data: np.ndarray | None = None, initialised: bool = False, poison: bool = False,
                 scope: tuple = (), is_tile: bool = False, lazy: bool = False) -> None:
        part_axes = [i for i, s in enumerate(shape) if isinstance(s, ParDim)]
        if len(part_axes) > 1:
            raise NKICompileError("ndarray", f"tensor {name!r} declares {len(part_axes)} partition dimensions")
        self.shape = tuple(int(s) for s in shape)
        self.name = name
        self.dtype = dtype
        self.buffer = buffer
        self.space = buffer.space
        if self.space == MemorySpace.HBM:
            self.partition_axis = -1
        else:
            self.partition_axis = part_axes[0] if part_axes else 0
        # Unwritten elements of a poisoned tensor (an HBM output) read back as NaN: filled in by
        # `reveal_unwritten` at the end instead of up front, so the output is touched only once.
        self.poisoned = poison and dt.is_float(dtype)
        if data is None and not lazy:
            data = np.zeros(self.shape, dtype=dtype.storage)  # calloc: untouched pages cost nothing
        self.data = data
        self.init = None if initialised or lazy else np.zeros(self.shape, dtype=np.bool_)
        self.trace_id = -1
        self.scope = scope
        self.alias: Access | None = None
        self.is_tile = is_tile
        self.records: dict[Any, list] = {}
        self.version = 0
        self.deferred: dict | None = None  # queued PSUM accumulation groups (accumulation.py)
        self.blocks: dict[tuple[int, ...], Any] | None = None  # per-block storage (recycling.BlockRecycler.adopt)
        self.recycler: BlockStorage | None = None
        self.readers: list[Tensor] | None = None  # tensors with queued matmuls reading this one
        self.fill: Any = None  # a blocked nl.zeros/nl.full tensor: the value every new block starts with
        self.serial = next(_SERIALS)  # creation order: tells tensors from before a split loop (parallel.py)
        self.home: int | None = None  # a declared tensor's home loop line (liveness.py), when known
        # Race-check buckets: the leading block indices of on-chip tensors, the leading axes of HBM ones.
        if self.space == MemorySpace.HBM:
            self.race_key_len = max(0, len(self.shape) - 2)
        else:
            self.race_key_len = self.partition_axis

    @classmethod
    def tile(cls, name: str, shape: tuple[int, ...], dtype: dt.DType, buffer: Buffer, data: np.ndarray | None,
             initialised: bool, scope: tuple) -> Tensor:
        """An instruction's on-chip result tile: `Tensor(..., is_tile=True, lazy=data is None)` without the
        checks a declared shape needs (one is made per instruction)."""
        t = cls.__new__(cls)
        t.shape = shape
        t.name = name
        t.dtype = dtype
        t.buffer = buffer
        t.space = buffer.space
        hbm = t.space == MemorySpace.HBM
        t.partition_axis = -1 if hbm else 0
        t.race_key_len = max(0, len(shape) - 2) if hbm else 0
        t.poisoned = False
        t.data = data
        t.init = None if initialised or data is None else np.zeros(shape, dtype=np.bool_)
        t.trace_id = -1
        t.scope = scope
        t.alias = None
        t.is_tile = True
        t.records = {}
        t.version = 0
        t.deferred = t.blocks = t.recycler = t.readers = t.fill = t.home = None
        t.serial = next(_SERIALS)
        return t

    @classmethod
    def aliasing(cls, acc: Access) -> Tensor:
        """A stand-in for `acc.tensor` whose accesses index into the region `acc` (a view of a view)."""
        t = cls.__new__(cls)
        for slot in cls.__slots__:
            if slot not in ("alias", "__weakref__"):
                setattr(t, slot, getattr(acc.tensor, slot))
        t.alias = acc
        return t

    def allocate(self) -> None:
        """Storage for a tile whose values arrive later (a deferred matmul result)."""
        if self.data is None:
            self.data = np.zeros(self.shape, dtype=self.dtype.storage)
            self.init = np.zeros(self.shape, dtype=np.bool_)

    def reveal_unwritten(self) -> np.ndarray:
        """The data, with never-written elements of a poisoned tensor set to NaN."""
        if self.poisoned and self.init is not None and not self.init.all():
            np.copyto(self.data, np.nan, where=~self.init)
        return self.data

    # -- properties kernels use -----------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def bytes_per_partition(self) -> int:
        if self.space == MemorySpace.HBM:
            return 0
        n = 1
        for axis, s in enumerate(self.shape):
            if axis > self.partition_axis:
                n *= s
        return n * self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def __repr__(self) -> str:
        return f"<{self.space.name} tensor {self.name} {self.shape} {self.dtype.name}>"

    def __len__(self) -> int:
        return self.shape[0]

    # -- resolution -----------------------------------------------------------------------------
    def access(self, items: Any, window: Window | None = None, op: str = "index") -> Access | FancyAccess:
        if self.alias is not None:
            return compose(self.alias, items, window, op)
        fast = _resolve_cached(self, items, window, op)
        if fast is not None:
            return fast
        if self.blocks is not None:
            raise BlockRecyclingMiss(f"tensor {self.name!r} is accessed across blocks")
        if self.data is None:
            self.allocate()
        spec = affine_spec(self.shape, items, window)
        if spec is None:
            return fancy_access(self, self.data, self.init, items, op)
        box = bounds(spec)
        if not spec.empty:
            for axis, (lo, hi) in enumerate(box):
                if lo < 0 or hi > self.shape[axis]:
                    bad = lo if lo < 0 else hi - 1
                    raise NKIRuntimeError(op, f"index {bad} is out of bounds for axis {axis} of size "
                                              f"{self.shape[axis]} of tensor {self.name!r} {self.shape}")
            recipe = view_recipe(spec)
            array = apply_recipe(self.data, recipe)
            init = apply_recipe(self.init, recipe) if self.init is not None else None
        else:
            array = np.zeros(spec.out_shape, self.data.dtype)
            init = None
        n = self.race_key_len
        key: tuple[int, ...] | None = tuple(spec.consts[:n])
        for axis in range(n):
            if spec.terms[axis] and any(s > 1 for _p, _c, s in spec.terms[axis]):
                key = None
                break
        return Access(self, array, init, tuple(box), tuple(spec.out_shape), spec.full_shape, key)

    def whole(self, window: Window | None = None, op: str = "index") -> Access | FancyAccess:
        return self.access((Ellipsis,), window, op)


class FancyAccess(Access):
    """An access through explicit index arrays (non-affine indices): reads copy, writes scatter."""

    __slots__ = ("index", "base", "base_init")

    def __init__(self, tensor: Tensor, base: np.ndarray, base_init: np.ndarray | None, index: tuple,
                 box: tuple[tuple[int, int], ...], shape: tuple[int, ...]) -> None:
        super().__init__(tensor, None, None, box, shape, shape, None, exact=False)  # type: ignore[arg-type]
        self.index = index
        self.base = base
        self.base_init = base_init


def fancy_access(tensor: Tensor, base: np.ndarray, base_init: np.ndarray | None, items: Any,
                 op: str) -> FancyAccess:
    norm = normalize_items(items, base.ndim)
    arrays = []
    for it in norm:
        if isinstance(it, (IndexExpr, ArrayIndex)):
            arrays.append(it.materialize())
        elif isinstance(it, slice):
            raise unsupported(op, "slices mixed with non-affine indices")
        elif isinstance(it, np.ndarray):
            arrays.append(it.astype(np.int64))
        else:
            arrays.append(np.int64(it))
    rank = max(np.ndim(a) for a in arrays)
    arrays = [np.asarray(a).reshape((1,) * (rank - np.ndim(a)) + np.shape(a)) for a in arrays]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    box = []
    for axis, a in enumerate(arrays):
        lo, hi = int(a.min()), int(a.max()) + 1
        if lo < 0 or hi > base.shape[axis]:
            bad = lo if lo < 0 else hi - 1
            raise NKIRuntimeError(op, f"index {bad} is out of bounds for axis {axis} of size {base.shape[axis]}"
                                      f" of tensor {tensor.name!r}")
        box.append((lo, hi))
    return FancyAccess(tensor, base, base_init, tuple(arrays), tuple(box), tuple(shape))


def compose(parent: Access, items: Any, window: Window | None, op: str) -> Access:
    """Index into an already resolved region (a tile aliased onto a destination, or a view of a view)."""
    if isinstance(parent, FancyAccess):
        raise unsupported(op, "indexing a tile produced by a non-affine access")
    blocks = parent.tensor.blocks
    if blocks is not None:
        parent.tensor.recycler.revisit(parent.tensor, parent.key)  # type: ignore[union-attr,arg-type]
    arr = parent.array
    spec = affine_spec(arr.shape, items, window)
    if spec is None:
        raise unsupported(op, "non-affine index into a tile view")
    box = bounds(spec)
    if not spec.empty:
        for axis, (lo, hi) in enumerate(box):
            if lo < 0 or hi > arr.shape[axis]:
                bad = lo if lo < 0 else hi - 1
                raise NKIRuntimeError(op, f"index {bad} is out of bounds for axis {axis} of size "
                                          f"{arr.shape[axis]} of tile {parent.tensor.name!r} {arr.shape}")
        recipe = view_recipe(spec)
        array = apply_recipe(arr, recipe)
        init = apply_recipe(parent.init, recipe) if parent.init is not None else None
    else:
        array = np.zeros(spec.out_shape, arr.dtype)
        init = None
    # The trace keeps the parent's bounding box: a conservative footprint.
    return Access(parent.tensor, array, init, parent.box, tuple(spec.out_shape), spec.full_shape, parent.key,
                  exact=False)


class View:
    """`tensor[items]` before it is used: resolved lazily, once the instruction's mask is known."""

    __slots__ = ("base", "items")

    def __init__(self, base: Tensor, items: Any) -> None:
        self.base = base
        self.items = items

    def access(self, window: Window | None = None, op: str = "index") -> Access:
        return self.base.access(self.items, window, op)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.access().shape

    @property
    def dtype(self) -> dt.DType:
        return self.base.dtype

    @property
    def space(self) -> MemorySpace:
        return self.base.space

    def __repr__(self) -> str:
        return f"<view of {self.base.name} {self.shape}>"


class Accumulate:
    """What `view += value` hands to `__setitem__`: accumulate `value` into the view."""

    __slots__ = ("view", "value", "op")

    def __init__(self, view: View, value: Any, op: str) -> None:
        self.view = view
        self.value = value
        self.op = op  # "add", "subtract", "multiply", ...


class Derived:
    """A tile view computed from another operand without an instruction (broadcast_to, reshape)."""

    __slots__ = ("source", "shape", "kind", "arg")

    def __init__(self, source: Any, shape: tuple[int, ...], kind: str, arg: Any = None) -> None:
        self.source = source
        self.shape = tuple(shape)
        self.kind = kind
        self.arg = arg

    @property
    def dtype(self) -> dt.DType:
        return self.source.dtype

    def view(self, src: Access, values: np.ndarray, window: Window | None, op: str) -> Access:
        """This view of `src`, whose values are `values`, narrowed by `window`: no instruction, no copy."""
        array, shape = derive(values, self.kind, self.shape, window, op)
        acc = DerivedAccess(src.tensor, array, None, src.box, tuple(array.shape), shape, src.key, exact=False)
        acc.derivation = (src, self.kind, self.shape, window)
        return acc


class DerivedAccess(Access):
    """An access through a `Derived` view: `derivation` = (source access, kind, shape, mask window), how the
    view was made (the executable record replays it; program.py)."""

    __slots__ = ("derivation",)


def trace_rows(reads: list[Any], writes: list[Any], tensor_id: Callable[[Tensor], int]) -> tuple[list[int], list[tuple]]:
    """What an instruction's trace row says of its accesses (the scalars among them skipped): the bytes
    read and written in HBM, SBUF and PSUM, and per access its region, (tensor id, is write, partition
    range, byte range within a partition). HBM tensors use partition range 0-1 and row-major offsets."""
    moved = [0, 0, 0, 0, 0, 0]  # hbm r/w, sbuf r/w, psum r/w
    rows = []
    for is_write, accs in ((0, reads), (1, writes)):
        for acc in accs:
            if not isinstance(acc, Access):
                continue
            t = acc.tensor
            item = t.dtype.itemsize
            n = item
            for size in acc.shape:
                n *= size
            moved[2 * int(t.space) + is_write] += n
            tid = t.trace_id if t.trace_id >= 0 else tensor_id(t)
            box = acc.box
            k = t.partition_axis
            lo = hi = 0
            for (b_lo, b_hi), stride in zip(box, _partition_strides(t.shape, k), strict=True):
                lo += b_lo * stride
                hi += (b_hi - 1) * stride
            if k < 0:
                rows.append((tid, is_write, 0, 1, lo * item, (hi + 1) * item))
            else:
                rows.append((tid, is_write, box[k][0], box[k][1], lo * item, (hi + 1) * item))
    return moved, rows


@functools.lru_cache(maxsize=1024)
def _partition_strides(shape: tuple[int, ...], partition_axis: int) -> tuple[int, ...]:
    """Per-partition element strides: row-major over the axes other than the partition axis (all axes
    for an HBM tensor, whose partition axis is -1)."""
    strides = [0] * len(shape)
    acc = 1
    for axis in range(len(shape) - 1, -1, -1):
        if axis != partition_axis:
            strides[axis] = acc
            acc *= shape[axis]
    return tuple(strides)
