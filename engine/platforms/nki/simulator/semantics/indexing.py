"""Index expressions: `nl.arange` iterators, affine arithmetic on them, and masks.

An `IndexExpr` is `const + sum(coef * iterator)`, each iterator occupying one position of the tile's
broadcast shape (positions are counted from the right, like numpy broadcasting, so `arange(128)[:, None]`
sits at position -2 of a 2-D tile). Keeping the expression symbolic lets an access become a strided
numpy view instead of fancy indexing. Operations that are not affine (`//`, `%`) fall back to an
explicit integer array (`ArrayIndex`).

A mask is a predicate over the same positions. A conjunction of one-iterator inequalities becomes a
*window* (a sub-range per position), which again keeps every access a view.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

# A term: (position, coefficient, size). Positions are negative: -1 is the last tile dimension.
Term = tuple[int, int, int]
_ALL = slice(None)


def is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


class IndexExpr:
    """An affine index: const + sum of coef * iterator over the tile dimensions. Immutable, so the
    placements `e[:, None]` and `e[None, :]` that kernels write on every call are computed once."""

    __slots__ = ("const", "terms", "ndim", "_column", "_row")

    def __init__(self, const: int, terms: tuple[Term, ...], ndim: int) -> None:
        self.const = const
        self.terms = terms
        self.ndim = ndim
        self._column: IndexExpr | None = None
        self._row: IndexExpr | None = None

    # -- shape -------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        sizes = [1] * self.ndim
        for pos, _coef, size in self.terms:
            sizes[pos] = size
        return tuple(sizes)

    def materialize(self) -> np.ndarray:
        out = np.full(self.shape, self.const, dtype=np.int64)
        for pos, coef, size in self.terms:
            shape = [1] * self.ndim
            shape[pos] = size
            out = out + coef * np.arange(size, dtype=np.int64).reshape(shape)
        return out

    # -- placement: arange(n)[:, None] ---------------------------------------------------------
    def __getitem__(self, key: Any) -> IndexExpr:
        if self.ndim == 1 and type(key) is tuple and len(key) == 2:
            # The common placements of a 1-D iterator: arange(n)[:, None] and arange(n)[None, :].
            first, second = key
            if second is None and type(first) is slice and first == _ALL:
                if self._column is None:
                    self._column = IndexExpr(self.const, tuple((p - 1, c, s) for p, c, s in self.terms), 2)
                return self._column
            if first is None and type(second) is slice and second == _ALL:
                if self._row is None:
                    self._row = IndexExpr(self.const, self.terms, 2)
                return self._row
        if not isinstance(key, tuple):
            key = (key,)
        kept = [k for k in key if k is not None]
        if len(kept) != self.ndim or any(not (isinstance(k, slice) and k == slice(None)) for k in kept):
            raise IndexError("an index expression can only be re-placed with ':' and None, e.g. [:, None]")
        new_ndim = len(key)
        old_to_new: list[int] = []
        for j, k in enumerate(key):
            if k is not None:
                old_to_new.append(j - new_ndim)
        terms = tuple((old_to_new[pos + self.ndim], coef, size) for pos, coef, size in self.terms)
        return IndexExpr(self.const, terms, new_ndim)

    # -- affine arithmetic ----------------------------------------------------------------------
    def _combine(self, other: IndexExpr, sign: int) -> IndexExpr:
        merged: dict[int, list[int]] = {}
        for pos, coef, size in self.terms:
            merged[pos] = [coef, size]
        for pos, coef, size in other.terms:
            if pos in merged:
                mine = merged[pos]
                if mine[1] != size:
                    if size == 1:
                        continue
                    if mine[1] == 1:
                        merged[pos] = [sign * coef, size]
                        continue
                    raise IndexError(f"index shapes do not broadcast: sizes {mine[1]} and {size} at one dimension")
                mine[0] += sign * coef
            else:
                merged[pos] = [sign * coef, size]
        terms = tuple(sorted((p, c, s) for p, (c, s) in merged.items()))
        return IndexExpr(self.const + sign * other.const, terms, max(self.ndim, other.ndim))

    def __add__(self, other: Any) -> Any:
        if is_int(other):
            return IndexExpr(self.const + int(other), self.terms, self.ndim)
        if isinstance(other, IndexExpr):
            return self._combine(other, 1)
        if isinstance(other, ArrayIndex):
            return ArrayIndex(self.materialize()) + other
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other: Any) -> Any:
        if is_int(other):
            return IndexExpr(self.const - int(other), self.terms, self.ndim)
        if isinstance(other, IndexExpr):
            return self._combine(other, -1)
        if isinstance(other, ArrayIndex):
            return ArrayIndex(self.materialize()) - other
        return NotImplemented

    def __rsub__(self, other: Any) -> Any:
        return (-self) + other

    def __neg__(self) -> IndexExpr:
        return IndexExpr(-self.const, tuple((p, -c, s) for p, c, s in self.terms), self.ndim)

    def __mul__(self, other: Any) -> Any:
        if is_int(other):
            k = int(other)
            return IndexExpr(self.const * k, tuple((p, c * k, s) for p, c, s in self.terms), self.ndim)
        if isinstance(other, (IndexExpr, ArrayIndex)):
            return ArrayIndex(self.materialize()) * other
        return NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other: Any) -> ArrayIndex:
        return ArrayIndex(self.materialize()) // other

    def __mod__(self, other: Any) -> ArrayIndex:
        return ArrayIndex(self.materialize()) % other

    # -- predicates -----------------------------------------------------------------------------
    def __lt__(self, other: Any) -> Mask:
        return Mask.leaf(self, "<", other)

    def __le__(self, other: Any) -> Mask:
        return Mask.leaf(self, "<=", other)

    def __gt__(self, other: Any) -> Mask:
        return Mask.leaf(self, ">", other)

    def __ge__(self, other: Any) -> Mask:
        return Mask.leaf(self, ">=", other)

    def __eq__(self, other: Any) -> Mask:  # type: ignore[override]
        return Mask.leaf(self, "==", other)

    def __ne__(self, other: Any) -> Mask:  # type: ignore[override]
        return Mask.leaf(self, "!=", other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = [str(self.const)] + [f"{c}*i{p}[{s}]" for p, c, s in self.terms]
        return "IndexExpr(" + " + ".join(parts) + ")"


class ArrayIndex:
    """A non-affine index: an explicit integer array in tile-broadcast layout."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = np.asarray(array, dtype=np.int64)

    @property
    def ndim(self) -> int:
        return self.array.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    def materialize(self) -> np.ndarray:
        return self.array

    def _binary(self, other: Any, fn: Any) -> ArrayIndex:
        if isinstance(other, (IndexExpr, ArrayIndex)):
            other = other.materialize()
        return ArrayIndex(fn(self.array, other))

    def __add__(self, o: Any) -> ArrayIndex:
        return self._binary(o, operator.add)

    __radd__ = __add__

    def __sub__(self, o: Any) -> ArrayIndex:
        return self._binary(o, operator.sub)

    def __rsub__(self, o: Any) -> ArrayIndex:
        return ArrayIndex(-self.array) + o

    def __mul__(self, o: Any) -> ArrayIndex:
        return self._binary(o, operator.mul)

    __rmul__ = __mul__

    def __floordiv__(self, o: Any) -> ArrayIndex:
        return self._binary(o, operator.floordiv)

    def __mod__(self, o: Any) -> ArrayIndex:
        return self._binary(o, operator.mod)

    def __neg__(self) -> ArrayIndex:
        return ArrayIndex(-self.array)

    def __lt__(self, o: Any) -> Mask:
        return Mask.leaf(self, "<", o)

    def __le__(self, o: Any) -> Mask:
        return Mask.leaf(self, "<=", o)

    def __gt__(self, o: Any) -> Mask:
        return Mask.leaf(self, ">", o)

    def __ge__(self, o: Any) -> Mask:
        return Mask.leaf(self, ">=", o)

    __hash__ = None  # type: ignore[assignment]


_CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
        "!=": operator.ne}


class Mask:
    """A predicate over tile positions: leaves are comparisons, combined with & | ~."""

    __slots__ = ("kind", "parts", "expr", "cmp", "value")

    def __init__(self, kind: str, parts: tuple[Mask, ...] = (), expr: Any = None, cmp: str = "",
                 value: Any = None) -> None:
        self.kind = kind  # "leaf", "and", "or", "not"
        self.parts = parts
        self.expr = expr
        self.cmp = cmp
        self.value = value

    @staticmethod
    def leaf(expr: Any, cmp: str, value: Any) -> Mask:
        if isinstance(value, (IndexExpr, ArrayIndex)):
            # move everything to the left: expr - value cmp 0
            return Mask("leaf", expr=expr - value, cmp=cmp, value=0)
        return Mask("leaf", expr=expr, cmp=cmp, value=value)

    def __and__(self, other: Mask) -> Mask:
        return Mask("and", (self, other))

    def __or__(self, other: Mask) -> Mask:
        return Mask("or", (self, other))

    def __invert__(self) -> Mask:
        return Mask("not", (self,))

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise TypeError("an NKI mask is a predicate over tile indices; it has no truth value in Python")

    # -- evaluation -------------------------------------------------------------------------------
    def window(self) -> dict[int, tuple[int, int, int]] | None:
        """{position: (lo, hi, size)} if the mask is a conjunction of one-iterator bounds, else None."""
        leaves: list[Mask] = []
        stack = [self]
        while stack:
            m = stack.pop()
            if m.kind == "and":
                stack.extend(m.parts)
            elif m.kind == "leaf":
                leaves.append(m)
            else:
                return None
        win: dict[int, tuple[int, int, int]] = {}
        for m in leaves:
            e = m.expr
            if not isinstance(e, IndexExpr) or not is_int(m.value) or m.cmp == "!=":
                return None
            active = [t for t in e.terms if t[2] > 1 or t[1] != 0]
            if len(active) > 1:
                return None
            if not active:
                ok = _CMP[m.cmp](e.const, m.value)
                if not ok:
                    return {-1: (0, 0, 0)}  # mask is everywhere false
                continue
            pos, coef, size = active[0]
            lo, hi = _solve(coef, e.const, m.cmp, int(m.value), size)
            if pos in win:
                plo, phi, psize = win[pos]
                if psize != size:
                    return None
                lo, hi = max(lo, plo), min(hi, phi)
            win[pos] = (lo, max(lo, hi), size)
        return win

    def evaluate(self) -> np.ndarray:
        """A boolean array in tile-broadcast layout (the slow, general path)."""
        if self.kind == "leaf":
            e = self.expr.materialize() if isinstance(self.expr, (IndexExpr, ArrayIndex)) else np.asarray(self.expr)
            return _CMP[self.cmp](e, self.value)
        if self.kind == "not":
            return ~self.parts[0].evaluate()
        a, b = (p.evaluate() for p in self.parts)
        return (a & b) if self.kind == "and" else (a | b)


@functools.lru_cache(maxsize=4096)  # the same mask bound recurs every loop iteration
def _solve(coef: int, const: int, cmp: str, value: int, size: int) -> tuple[int, int]:
    """Range [lo, hi) of t in [0, size) with coef*t + const <cmp> value."""
    t = np.arange(size, dtype=np.int64)
    ok = np.flatnonzero(_CMP[cmp](coef * t + const, value))
    if ok.size == 0:
        return 0, 0
    lo, hi = int(ok[0]), int(ok[-1]) + 1
    if hi - lo != ok.size:  # not contiguous (cannot happen for monotone affine bounds)
        raise ValueError("mask is not an interval")
    return lo, hi


_ARANGES: dict[int, IndexExpr] = {}  # nl.arange(n), shared: index expressions are immutable


def arange(*args: int) -> IndexExpr:
    """nl.arange(stop) or nl.arange(start, stop[, step]): a 1-D iterator."""
    if len(args) == 1 and type(args[0]) is int:
        cached = _ARANGES.get(args[0])
        if cached is None:
            cached = IndexExpr(0, ((-1, 1, max(0, args[0])),), 1)
            if len(_ARANGES) < 4096:
                _ARANGES[args[0]] = cached
        return cached
    if len(args) == 1:
        start, stop, step = 0, args[0], 1
    elif len(args) == 2:
        (start, stop), step = args, 1
    else:
        start, stop, step = args
    size = max(0, -(-(int(stop) - int(start)) // int(step)))
    return IndexExpr(int(start), ((-1, int(step), size),), 1)


class _MGrid:
    """nl.mgrid[0:128, 0:512] -> one IndexExpr per dimension, placed like numpy.mgrid."""

    def __getitem__(self, key: Any) -> Any:
        if not isinstance(key, tuple):
            key = (key,)
        n = len(key)
        out = []
        for j, k in enumerate(key):
            start = k.start or 0
            step = k.step or 1
            e = arange(start, k.stop, step)
            out.append(IndexExpr(e.const, ((j - n, e.terms[0][1], e.terms[0][2]),), n))
        return out[0] if n == 1 else _Grid(out)


class _Grid(tuple):
    """The index expressions of an nl.mgrid, one per dimension: unpack it, or name them as NKI does (`.p`
    the partition index, `.x`, `.y`, `.z` the free ones)."""

    __slots__ = ()

    def _axis(self, k: int) -> Any:
        if k >= len(self):
            raise AttributeError(f"this mgrid has {len(self)} dimensions")
        return self[k]

    p = property(lambda self: self._axis(0))
    x = property(lambda self: self._axis(1))
    y = property(lambda self: self._axis(2))
    z = property(lambda self: self._axis(3))


mgrid = _MGrid()


def ds(start: int, size: int) -> slice:
    """nl.ds(start, size): a dynamic slice of `size` elements."""
    return slice(start, start + size)
