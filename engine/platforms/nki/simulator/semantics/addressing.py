"""How `tensor[items]` addresses elements: the affine form of the indices, the bounding box, the numpy view.

An index on each axis is an int, a slice, or an affine `IndexExpr` (`128*i + nl.arange(128)[:, None]`).
`affine_spec` writes them as one constant per axis plus terms (tile position, coefficient, size),
narrowed by a mask window; `bounds` gives the bounding box per axis (the trace's region and the race
check's); `view_recipe` says how to cut the elements out of an array without copying (basic slicing,
or explicit strides), and `apply_recipe` cuts them. `AccessShape` is all of that with the constants set
aside, computed once per call site and reused every loop iteration. Nothing here knows tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from engine.platforms.nki.simulator.errors import NKICompileError
from engine.platforms.nki.simulator.semantics.indexing import ArrayIndex, IndexExpr, is_int

Window = dict[int, tuple[int, int, int]]  # position -> (lo, hi, size)


def normalize_items(items: Any, ndim: int) -> list[Any]:
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
    norm = normalize_items(items, ndim)
    has_expr = False
    n_slices = 0
    for it in norm:
        if isinstance(it, IndexExpr):
            has_expr = True
        elif isinstance(it, ArrayIndex):
            return None
        elif isinstance(it, slice):
            n_slices += 1
        elif not is_int(it):
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


def bounds(spec: Spec) -> list[tuple[int, int]]:
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
        if type(view) is not np.ndarray:
            # Every axis pinned to one element (a (1, 1) tile): numpy returns a scalar copy, and a write into
            # it would be lost; the Ellipsis makes numpy return a 0-d view instead.
            view = arr[(*index, Ellipsis)]
        if extra is not None:
            view = view.transpose(extra)
        if view.shape != out_shape:
            view = view.reshape(out_shape)
        return view
    strides = tuple(sum(c * st for c, st in zip(row, arr.strides, strict=True)) for row in extra)
    return as_strided(arr[index], shape=out_shape, strides=strides)


class AccessShape:
    """What an access looks like once the constants of its indices are set aside (see `tensors._resolve_cached`).

    `affine_spec` is linear in the index constants: every axis's constant is the constant of the item on
    that axis plus a delta from slices and the mask window, and the bounds move with it. So the spec of
    the same items with all constants zero, computed once, serves every loop iteration."""

    __slots__ = ("axis_item", "delta", "box0", "shape", "full_shape", "empty", "simple", "axes", "order",
                 "coefs", "key_pinned", "key_len", "block_coefs", "plan")

    def __init__(self, spec: Spec, axis_item: list[int], key_len: int) -> None:
        self.axis_item = axis_item
        self.delta = spec.consts
        self.box0 = bounds(spec)
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


_SHAPES: dict[tuple, AccessShape] = {}
_SHAPES_LIMIT = 65536  # distinct access shapes; a kernel has a few hundred call sites


def cached_shape(shape: tuple[int, ...], items: Any, window: Window | None,
                 key_len: int) -> tuple[AccessShape, list[int]] | None:
    """The `AccessShape` of `items` over a tensor of `shape` (made once per distinct shape of access) and
    the constant of each item; None for items other than ints, slices, Ellipsis and affine `IndexExpr`s.
    `key_len`: the tensor's leading axes that name a race-check bucket (or a block)."""
    if not isinstance(items, tuple):
        items = (items,)
    key: list[Any] = [shape, tuple(window.items()) if window else None]
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
        found = _SHAPES.get(skey)
    except TypeError:  # a slice bound that is not hashable
        return None
    if found is None:
        zeroed = tuple(IndexExpr(0, it.terms, it.ndim) if type(it) is IndexExpr else 0 if type(it) is int else it
                       for it in items)
        spec = affine_spec(shape, zeroed, window)
        if spec is None:  # pragma: no cover - only ArrayIndex items are not affine
            return None
        markers = normalize_items(tuple(Ellipsis if it is Ellipsis else k for k, it in enumerate(items)), len(shape))
        axis_item = [m if type(m) is int else -1 for m in markers]
        if len(_SHAPES) >= _SHAPES_LIMIT:
            _SHAPES.clear()
        _SHAPES[skey] = found = AccessShape(spec, axis_item, key_len)
    return found, consts
