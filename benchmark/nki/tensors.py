"""Tensors in HBM, SBUF and PSUM, and the resolution of an index into a strided numpy view.

Storage is one numpy array per tensor, allocated with `np.zeros` so the operating system maps pages only
when they are touched: a compiler-style kernel may declare SBUF tensors far larger than SBUF (the real
compiler allocates by live range), and only the tiles it writes cost host memory. An optional boolean
array of the same shape tracks which elements were written, for the uninitialised-read rule. On-chip
tensors with leading block axes store one array per block instead, recycled by `BlockPool`.

`resolve` turns `tensor[items]` (ints, slices, `IndexExpr`s, optionally narrowed by a mask window) into
an `Access`: a numpy view of the elements, the bounding box per tensor axis (for the trace and the race
check), and the tile shape.
"""

from __future__ import annotations

import functools
import itertools
import mmap
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import dtypes as dt
from .errors import NKICompileError, NKIRuntimeError, unsupported
from .indexing import ArrayIndex, IndexExpr, _is_int
from .liveness import LIVE
from .trace import Memory

Window = dict[int, tuple[int, int, int]]  # position -> (lo, hi, size)


class Buffer:
    """nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, nl.private_hbm."""

    __slots__ = ("name", "memory")

    def __init__(self, name: str, memory: Memory) -> None:
        self.name = name
        self.memory = memory

    def __repr__(self) -> str:
        return f"nl.{self.name}"


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
    def memory(self) -> Memory:
        return self.tensor.memory

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


def _normalize_items(items: Any, ndim: int) -> list[Any]:
    if not isinstance(items, tuple):
        items = (items,)
    out: list[Any] = []
    for k, it in enumerate(items):
        if it is Ellipsis:
            rest = len(items) - k - 1
            out.extend([slice(None)] * (ndim - len(out) - rest))
        else:
            out.append(it)
    if len(out) > ndim:
        raise IndexError(f"too many indices: {len(out)} for a tensor of rank {ndim}")
    out.extend([slice(None)] * (ndim - len(out)))
    return out


class Spec:
    """The affine form of an access: per axis a constant and terms (position, coef, size)."""

    __slots__ = ("consts", "terms", "out_shape", "full_shape", "empty")

    def __init__(self, consts: list[int], terms: list[list[tuple[int, int, int]]], out_shape: list[int],
                 full_shape: tuple[int, ...], empty: bool) -> None:
        self.consts = consts
        self.terms = terms
        self.out_shape = out_shape
        self.full_shape = full_shape
        self.empty = empty


def affine_spec(shape: tuple[int, ...], items: Any, window: Window | None) -> Spec | None:
    """Affine form of `items` over a tensor of `shape`; None if an index is not affine (ArrayIndex)."""
    ndim = len(shape)
    norm = _normalize_items(items, ndim)
    has_expr = False
    n_slices = 0
    for it in norm:
        if isinstance(it, IndexExpr):
            has_expr = True
        elif isinstance(it, ArrayIndex):
            return None
        elif isinstance(it, slice):
            n_slices += 1
        elif not _is_int(it):
            if isinstance(it, np.ndarray) and it.dtype.kind in "iu":
                return None
            raise NKICompileError("index", f"unsupported index {it!r} of type {type(it).__name__}")
    consts: list[int] = []
    terms: list[list[tuple[int, int, int]]] = []
    # Slices are iterators of their own. Next to arange indices, a slice takes the tile dimension of
    # its place among the non-integer indices (x[i_p, 0:512] is a (128, 512) tile, like mgrid).
    n_free = sum(1 for it in norm if isinstance(it, (IndexExpr, slice)))
    rank = n_free
    if has_expr:
        rank = max(rank, max(it.ndim for it in norm if isinstance(it, IndexExpr)))
    j = 0
    for axis, it in enumerate(norm):
        if isinstance(it, IndexExpr):
            consts.append(it.const)
            terms.append(list(it.terms))
            j += 1
        elif isinstance(it, slice):
            start, stop, step = it.indices(shape[axis])
            size = len(range(start, stop, step))
            consts.append(start)
            terms.append([(j - n_free, step, size)])
            j += 1
        else:
            consts.append(int(it))
            terms.append([])
    out_shape = [1] * rank
    for axis_terms in terms:
        for pos, _c, size in axis_terms:
            cur = out_shape[pos]
            if cur == 1:
                out_shape[pos] = size
            elif size != 1 and size != cur:
                raise NKICompileError("index", f"index shapes do not broadcast: {cur} and {size}")
    full_shape = tuple(out_shape)
    empty = False
    if window:
        for pos, (lo, hi, wsize) in window.items():
            if -pos > rank:
                continue
            if wsize == 0:
                empty = True
                continue
            if out_shape[pos] != wsize:
                continue
            if hi <= lo:
                empty = True
            out_shape[pos] = max(0, hi - lo)
            for axis, axis_terms in enumerate(terms):
                new_terms = []
                for p, c, s in axis_terms:
                    if p == pos and s == wsize:
                        consts[axis] += c * lo
                        s = max(0, hi - lo)
                    new_terms.append((p, c, s))
                terms[axis] = new_terms
    if any(s == 0 for s in out_shape):
        empty = True
    return Spec(consts, terms, out_shape, full_shape, empty)


def _bounds(spec: Spec) -> list[tuple[int, int]]:
    box = []
    for const, axis_terms in zip(spec.consts, spec.terms, strict=True):
        lo = hi = const
        for _p, c, s in axis_terms:
            if s > 1:
                span = c * (s - 1)
                if span < 0:
                    lo += span
                else:
                    hi += span
        box.append((lo, hi + 1))
    return box


def view_recipe(spec: Spec) -> tuple[Any, ...]:
    """How to cut the access out of an array: basic indexing (+ transpose/reshape) or explicit strides."""
    simple = True
    seen: set[int] = set()
    for axis_terms in spec.terms:
        live = [t for t in axis_terms if t[2] > 1]
        if len(live) > 1:
            simple = False
            break
        for p, _c, _s in live:
            if p in seen:
                simple = False
                break
            seen.add(p)
    rank = len(spec.out_shape)
    out_shape = tuple(spec.out_shape)
    if simple:
        index: list[Any] = []
        positions: list[int] = []
        for const, axis_terms in zip(spec.consts, spec.terms, strict=True):
            live = [t for t in axis_terms if t[2] > 1]
            if not live:
                index.append(const)
                continue
            p, c, s = live[0]
            stop = const + c * s
            index.append(slice(const, stop if stop >= 0 else None, c))
            positions.append(p + rank)
        order = None
        if positions != sorted(positions):
            order = sorted(range(len(positions)), key=positions.__getitem__)
        return (True, tuple(index), order, out_shape)
    origin = tuple(slice(c, None) if c >= 0 else slice(0, None) for c in spec.consts)
    coefs = [[0] * len(spec.consts) for _ in range(rank)]
    for axis, axis_terms in enumerate(spec.terms):
        for p, c, s in axis_terms:
            if s > 1:
                coefs[p][axis] += c
    return (False, origin, coefs, out_shape)


def apply_recipe(arr: np.ndarray, recipe: tuple[Any, ...]) -> np.ndarray:
    """A numpy view of `arr` with the access's tile shape (no copy)."""
    simple, index, extra, out_shape = recipe
    if simple:
        view = arr[index]
        if extra is not None:
            view = view.transpose(extra)
        if view.shape != out_shape:
            view = view.reshape(out_shape)
        return view
    strides = tuple(sum(c * st for c, st in zip(row, arr.strides, strict=True)) for row in extra)
    return as_strided(arr[index], shape=out_shape, strides=strides)


def build_view(arr: np.ndarray, spec: Spec) -> np.ndarray:
    return apply_recipe(arr, view_recipe(spec))


class _Shape:
    """What an access looks like once the constants of its indices are set aside (see `_resolve_cached`).

    `affine_spec` is linear in the index constants: every axis's constant is the constant of the item on
    that axis plus a delta from slices and the mask window, and the bounds move with it. So the spec of
    the same items with all constants zero, computed once, serves every loop iteration."""

    __slots__ = ("axis_item", "delta", "box0", "shape", "full_shape", "empty", "simple", "axes", "order",
                 "coefs", "key_pinned", "key_len", "block_coefs", "plan")

    def __init__(self, spec: Spec, axis_item: list[int], key_len: int) -> None:
        self.axis_item = axis_item
        self.delta = spec.consts
        self.box0 = _bounds(spec)
        self.shape = tuple(spec.out_shape)
        self.full_shape = spec.full_shape
        self.empty = spec.empty
        recipe = view_recipe(spec)
        self.simple = recipe[0]
        self.coefs = None if self.simple else recipe[2]
        self.order = recipe[2] if self.simple else None
        # Per axis: None for a pinned index, (coef, size) for the one live term of a basic slice.
        axes: list[tuple[int, int] | None] = []
        for axis_terms in spec.terms:
            live = [(c, s) for _p, c, s in axis_terms if s > 1]
            axes.append(live[0] if live else None)
        self.axes = axes
        self.key_len = key_len
        self.key_pinned = all(not any(s > 1 for _p, _c, s in spec.terms[axis]) for axis in range(key_len))
        # The same cut out of one block of a blocked tensor (the pinned leading axes dropped).
        self.block_coefs = None if self.simple else [row[key_len:] for row in self.coefs]
        self.plan = [(k, d, lo - d, hi - d, live)
                     for k, d, (lo, hi), live in zip(axis_item, self.delta, self.box0, axes, strict=True)]


_SHAPES: dict[tuple, _Shape] = {}
_SHAPES_LIMIT = 65536  # distinct access shapes; a kernel has a few hundred call sites


def _resolve_cached(t: Tensor, items: Any, window: Window | None, op: str) -> Access | None:
    """`Tensor.access` for ints, slices, Ellipsis and affine `IndexExpr`s, reusing the access's shape.

    Returns None (the caller takes the general path) for anything else, and for accesses that are out of
    bounds, so the general path raises its usual error."""
    if not isinstance(items, tuple):
        items = (items,)
    key: list[Any] = [t.shape, tuple(window.items()) if window else None]
    consts: list[int] = []
    for it in items:
        cls = type(it)
        if cls is IndexExpr:
            key.append((it.terms, it.ndim))
            consts.append(it.const)
        elif cls is int:
            key.append(0)
            consts.append(it)
        elif cls is slice:
            key.append((it.start, it.stop, it.step))
            consts.append(0)
        elif it is Ellipsis:
            key.append(1)
            consts.append(0)
        else:
            return None
    skey = tuple(key)
    try:
        shape = _SHAPES.get(skey)
    except TypeError:  # a slice bound that is not hashable
        return None
    if shape is None:
        zeroed = tuple(IndexExpr(0, it.terms, it.ndim) if type(it) is IndexExpr else 0 if type(it) is int else it
                       for it in items)
        spec = affine_spec(t.shape, zeroed, window)
        if spec is None:  # pragma: no cover - only ArrayIndex items are not affine
            return None
        markers = _normalize_items(tuple(Ellipsis if it is Ellipsis else k for k, it in enumerate(items)),
                                   len(t.shape))
        axis_item = [m if type(m) is int else -1 for m in markers]
        if len(_SHAPES) >= _SHAPES_LIMIT:
            _SHAPES.clear()
        _SHAPES[skey] = shape = _Shape(spec, axis_item, t.race_key_len)
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
        entry = blocks.get(race_key)
        if entry is None:
            entry = t.pool.take(t, race_key)  # type: ignore[union-attr]
        elif entry is EVICTED:
            raise BlockRecyclingMiss(f"block {race_key} of tensor {t.name!r} is used after it was recycled")
        elif entry[2]:
            t.pool.revive(t, race_key, entry)  # type: ignore[union-attr]
        n = shape.key_len
        if shape.simple:
            recipe: tuple[Any, ...] = (True, tuple(index[n:]), shape.order, shape.shape)
        else:
            origin = tuple(slice(c, None) if c >= 0 else slice(0, None) for c in axis_consts[n:])
            recipe = (False, origin, shape.block_coefs, shape.shape)
        init = entry[1]
        acc = Access(t, apply_recipe(entry[0], recipe), apply_recipe(init, recipe) if init is not None else None,
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


EVICTED: list = [None, None, False, False, None]  # the block entry of a recycled block


class BlockRecyclingMiss(Exception):
    """A recycled block was needed again: `simulate` re-runs the kernel without recycling."""


class Arena:
    """Zeroed storage for many small, long-lived arrays, carved from large chunks.

    A block is a few hundred KiB; allocated on its own, every 4 KiB page of it faults on first touch
    (measured here: 2.6-3.4 s per GiB of 256 KiB blocks). numpy asks for transparent huge pages on
    allocations of 4 MiB and more, so blocks carved from one 64 MiB chunk fault a 2 MiB page at a time
    (0.9-1.3 s per GiB, same machine and load). Chunks are never freed piecemeal: only storage that
    lives until the simulation ends comes from here."""

    CHUNK_BYTES = 64 * 2**20
    ALIGN = 64

    def __init__(self) -> None:
        self.chunk: np.ndarray | None = None
        self.offset = 0

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes * 4 > self.CHUNK_BYTES:  # big enough for numpy's own huge-page allocation
            return np.zeros(shape, dtype=dtype)
        if self.chunk is None or self.offset + nbytes > self.CHUNK_BYTES:
            self.chunk = np.zeros(self.CHUNK_BYTES, dtype=np.uint8)
            self.offset = 0
        start = self.offset
        self.offset = start + (nbytes + self.ALIGN - 1) // self.ALIGN * self.ALIGN
        return self.chunk[start:start + nbytes].view(dtype).reshape(shape)


class BlockPool:
    """Recycles the storage of on-chip blocks that are dead, instead of faulting in fresh pages.

    Compiler-style kernels declare on-chip tensors with leading block axes (`(86, 2, par_dim(128), 1024)`)
    and give every loop iteration its own block, so a kernel writes gigabytes of fresh memory that the
    device holds in a few megabytes. Such a tensor stores one array per block. At the end of every
    iteration of a tensor's home loop (liveness.py; the outermost loop when the source does not tell),
    the blocks of it touched in that iteration are *retired*: they keep their values, and touching one
    again revives it. Once more than `retired_limit` bytes are retired, the oldest are *evicted*, blocks
    retired once before blocks revived at least once: their arrays are reused for new blocks of the same
    shape (init masks cleared, or refilled for `nl.zeros`/`nl.full` tensors). Touching an evicted block, a
    tile aliasing one, or a blocked tensor across several blocks raises `BlockRecyclingMiss`, and the
    simulation starts over with plain storage, so results never depend on the guess."""

    def __init__(self, retired_limit: int) -> None:
        self.retired_limit = retired_limit
        self.free: dict[tuple, list[tuple[np.ndarray, np.ndarray | None]]] = {}
        # Retired blocks in retirement order: retired once, and revived ones.
        self.retired: dict[tuple[int, tuple[int, ...]], tuple[Tensor, tuple[int, ...], list]] = {}
        self.retired_revived: dict[tuple[int, tuple[int, ...]], tuple[Tensor, tuple[int, ...], list]] = {}
        self.retired_bytes = 0
        # Blocks touched since their home loop's iteration began, per home (None: not known, outermost).
        self.touched: dict[int | None, list[tuple[Tensor, tuple[int, ...], list]]] = {}
        self.arena = Arena()
        self.home: dict[int, int | None] = {}  # id(tensor) -> its home loop's line (liveness.py)
        # A split loop's child: new blocks of the tensors whose values go to the parent are made in the
        # memory the two share (`outgoing(t)`, `outgoing_arena.zeros`), so handing them over copies nothing.
        self.outgoing: Any = None
        self.outgoing_arena: Any = None

    def adopt(self, t: Tensor, home: int | None = None) -> None:
        """Give an on-chip tensor with leading block axes per-block storage. `home`: the line of the loop
        whose iterations its blocks die with, LIVE, or None when the source does not tell."""
        t.data = None
        t.init = None
        t.blocks = {}
        t.pool = self
        self.home[id(t)] = home

    def take(self, t: Tensor, key: tuple[int, ...]) -> list:
        shape = t.shape[len(key):]
        storage = np.dtype(t.dtype.storage)
        fill = t.fill
        free = self.free.get((shape, storage))
        if free:
            data, mask = free.pop()
            if fill is not None:
                data.fill(fill)
        else:
            arena = self.outgoing_arena if self.outgoing is not None and self.outgoing(t) else self.arena
            data, mask = arena.zeros(shape, storage), None
            if fill is not None and fill != 0:
                data.fill(fill)
        # A block of an uninitialised tensor starts with nothing written: a read-only view of False, so
        # reads fail without touching memory; the first write drops it (the whole block) or stores a
        # mask (part of it; `Simulator.write`). The old values of a reused block stay, unreadable.
        init = None if fill is not None else _nothing_written(shape)
        # data, init mask (None once every element is written, or for a filled tensor), retired, revived,
        # and the mask's storage (allocated at the first partial write, kept for reuse)
        entry = [data, init, False, False, mask]
        t.blocks[key] = entry  # type: ignore[index]
        self._touch(t, key, entry)
        return entry

    def mask(self, entry: list) -> np.ndarray:
        """A block's first partial write: its init mask, all False, as real storage."""
        mask = entry[4]
        if mask is None:
            mask = entry[4] = self.arena.zeros(entry[0].shape, np.dtype(np.bool_))
        else:
            mask.fill(False)
        entry[1] = mask
        return mask

    def _touch(self, t: Tensor, key: tuple[int, ...], entry: list) -> None:
        home = self.home.get(id(t))
        if home == LIVE:
            return  # never retired
        touched = self.touched.get(home)
        if touched is None:
            self.touched[home] = touched = []
        touched.append((t, key, entry))

    def revive(self, t: Tensor, key: tuple[int, ...], entry: list) -> None:
        (self.retired_revived if entry[3] else self.retired).pop((id(t), key))
        entry[2] = False
        entry[3] = True
        self.retired_bytes -= _entry_bytes(entry)
        self._touch(t, key, entry)

    def end_iteration(self, home: int | None) -> None:
        """An iteration of the loop at line `home` ended (None: of an outermost loop, which ends every
        home): retire the blocks whose home it is, then evict the oldest beyond the limit. Blocks that
        queued matmuls still write or read stay touched until a later end."""
        homes = list(self.touched) if home is None else [home]
        for h in homes:
            touched = self.touched.get(h)
            if not touched:
                continue
            kept = []
            for t, key, entry in touched:
                if entry[2]:
                    continue
                if t.deferred or (t.readers and any(r.deferred for r in t.readers)):
                    kept.append((t, key, entry))
                    continue
                entry[2] = True
                (self.retired_revived if entry[3] else self.retired)[(id(t), key)] = (t, key, entry)
                self.retired_bytes += _entry_bytes(entry)
            self.touched[h] = kept
        while self.retired_bytes > self.retired_limit and (self.retired or self.retired_revived):
            queue = self.retired or self.retired_revived
            t, key, entry = queue.pop(next(iter(queue)))
            self.retired_bytes -= _entry_bytes(entry)
            t.blocks[key] = EVICTED  # type: ignore[index]
            if not in_shared_memory(entry[0]):  # a block adopted from a split's child stays its tensor's
                self.free.setdefault((entry[0].shape, entry[0].dtype), []).append((entry[0], entry[4]))


def in_shared_memory(a: np.ndarray) -> bool:
    """Whether `a` views a shared mapping (parallel.Exchange): memory a later split's child would write
    in place, so it is never handed to another tensor."""
    base = a
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # np.frombuffer's arrays end in a view of the mapping
        base = base.obj
    return isinstance(base, mmap.mmap)


@functools.lru_cache(maxsize=1024)
def _nothing_written(shape: tuple[int, ...]) -> np.ndarray:
    """A read-only all-False init mask of `shape` that owns no memory, shared by every fresh block."""
    return np.broadcast_to(np.False_, shape)


def _entry_bytes(entry: list) -> int:
    return entry[0].nbytes + (entry[4].nbytes if entry[4] is not None else 0)


_SERIALS = itertools.count()


def next_serial() -> int:
    """A serial larger than every tensor's made so far and smaller than every later one's."""
    return next(_SERIALS)


class Tensor:
    """A tensor in one of the memories. On-chip tensors have a partition axis (par_dim, else axis 0)."""

    __slots__ = ("name", "shape", "dtype", "memory", "buffer", "partition_axis", "data", "init", "trace_id",
                 "scope", "alias", "is_tile", "records", "race_key_len", "version", "deferred",
                 "poisoned", "blocks", "pool", "readers", "fill", "serial", "home", "__weakref__")

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
        self.memory = buffer.memory
        if self.memory == Memory.HBM:
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
        self.deferred: dict | None = None  # queued matmul accumulations (runtime.Simulator._defer)
        self.blocks: dict[tuple[int, ...], list] | None = None  # per-block storage (BlockPool.adopt)
        self.pool: BlockPool | None = None
        self.readers: list[Tensor] | None = None  # tensors with queued matmuls reading this one
        self.fill: Any = None  # a blocked nl.zeros/nl.full tensor: the value every new block starts with
        self.serial = next(_SERIALS)  # creation order: tells tensors from before a split loop (parallel.py)
        self.home: int | None = None  # a declared tensor's home loop line (liveness.py), when known
        # Race-check buckets: the leading block indices of on-chip tensors, the leading axes of HBM ones.
        if self.memory == Memory.HBM:
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
        t.memory = buffer.memory
        hbm = t.memory == Memory.HBM
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
        t.deferred = t.blocks = t.pool = t.readers = t.fill = t.home = None
        t.serial = next(_SERIALS)
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
        if self.memory == Memory.HBM:
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
        return f"<{self.memory.name} tensor {self.name} {self.shape} {self.dtype.name}>"

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
        box = _bounds(spec)
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
    norm = _normalize_items(items, base.ndim)
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
        entry = blocks.get(parent.key)  # type: ignore[arg-type]
        if entry is None or entry is EVICTED:
            raise BlockRecyclingMiss(f"a tile aliasing a recycled block of {parent.tensor.name!r} is used")
        if entry[2]:
            parent.tensor.pool.revive(parent.tensor, parent.key, entry)  # type: ignore[union-attr]
    arr = parent.array
    spec = affine_spec(arr.shape, items, window)
    if spec is None:
        raise unsupported(op, "non-affine index into a tile view")
    box = _bounds(spec)
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
    def memory(self) -> Memory:
        return self.base.memory

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
