"""The NKI 0.6 view methods `tensor.slice`, `tensor.select` and `tensor.permute` (nki.language NkiTensor).

Each returns a view of the same storage without an instruction, which loads, stores, DMAs and ISA
operands take wherever they take `tensor[items]`. A view keeps, per axis of its base tensor, either the
selected element (an int) or (start, step, count, position in the view); its items are then one affine
`IndexExpr` per kept axis placed at its view position, so the usual addressing (addressing.py) cuts the
numpy view, transposed where the positions are out of order, and the recorder sees plain strides. A view
of `tensor[items]` (`t[0:64, :].slice(...)`) takes the items into its axes where each axis is pinned or walked
by one term; any other view is indexed through a tensor aliased onto its region, as `view[items]` is. Dynamic (tensor-valued) selection and `.indirect` are refused with the reason.
"""

from __future__ import annotations

import operator
from typing import Any

from engine.platforms.nki.simulator.errors import NKICompileError, unsupported
from engine.platforms.nki.simulator.semantics.addressing import affine_spec
from engine.platforms.nki.simulator.semantics.indexing import IndexExpr
from engine.platforms.nki.simulator.semantics.tensors import ON_CHIP, Derived, Tensor, View

Axis = int | tuple[int, int, int, int]  # selected element, or (start, step, count, view position)


class AxisView(View):
    """A view made by `.slice`/`.select`/`.permute`: `axes` says what each base axis became."""

    __slots__ = ("axes", "view_shape")

    def __init__(self, base: Tensor, axes: tuple[Axis, ...]) -> None:
        kept = [a for a in axes if not isinstance(a, int)]
        rank = len(kept)
        shape = [0] * rank
        for _start, _step, count, pos in kept:
            shape[pos] = count
        items = tuple(a if isinstance(a, int) else IndexExpr(a[0], ((a[3] - rank, a[1], a[2]),), rank)
                      for a in axes)
        super().__init__(base, items)
        self.axes = axes
        self.view_shape = tuple(shape)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.view_shape

    def __repr__(self) -> str:
        return f"<view of {self.base.name} {self.view_shape}>"


def _as_axis_view(x: Any, op: str) -> AxisView:
    """`x` as an AxisView: a tensor's identity view, or a view of the region another view resolves to."""
    if isinstance(x, AxisView):
        return x
    if isinstance(x, Tensor):
        base, shape = x, x.shape
    elif type(x) is View and x.base.alias is None and (direct := _indexed(_identity(x.base, x.base.shape),
                                                                            x.items)) is not None:
        return direct
    elif isinstance(x, View):
        region = x.access(op=op)
        base, shape = Tensor.aliasing(region), region.shape  # the alias keeps its tensor's shape: use the region's
    elif isinstance(x, Derived):
        raise unsupported(op, f"a view of the result of {x.kind}; take the view of the tile itself")
    else:
        raise NKICompileError(op, f"expected a tensor or a view, got {type(x).__name__}")
    return AxisView(base, tuple((0, 1, n, k) for k, n in enumerate(shape)))


def _identity(base: Tensor, shape: tuple[int, ...]) -> AxisView:
    return AxisView(base, tuple((0, 1, n, k) for k, n in enumerate(shape)))


def _indexed(view: AxisView, items: Any) -> AxisView | None:
    """`view[items]` as an AxisView of the same base, when every view axis is pinned or walked by one term
    of its own (ints, slices, one `nl.arange` per axis): the trace then keeps the exact footprint, which a
    tensor aliased onto the region would widen to the region's box. None otherwise."""
    spec = affine_spec(view.view_shape, items, None)
    if spec is None or spec.empty:
        return None
    rank = len(spec.out_shape)
    shown = {a[3]: k for k, a in enumerate(view.axes) if not isinstance(a, int)}
    axes: list[Axis] = list(view.axes)
    seen: set[int] = set()
    for d, (const, terms) in enumerate(zip(spec.consts, spec.terms, strict=True)):
        start, step, count, _pos = view.axes[shown[d]]  # type: ignore[misc]
        if not terms:
            if not 0 <= const < count:
                return None  # out of bounds: the general path reports it
            axes[shown[d]] = start + step * const
            continue
        if len(terms) != 1 or terms[0][0] + rank in seen:
            return None
        pos, coef, size = terms[0]
        if size and not (0 <= const < count and 0 <= const + coef * (size - 1) < count):
            return None
        seen.add(pos + rank)
        axes[shown[d]] = (start + step * const, step * coef, size, pos + rank)
    return AxisView(view.base, tuple(axes)) if len(seen) == rank else None


def _int_arg(value: Any, what: str, op: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise NKICompileError(op, f"{what} must be an integer, got {type(value).__name__}") from None


def _view_axis(view: AxisView, dim: Any, op: str) -> int:
    """The base axis shown at view dimension `dim`."""
    d = _int_arg(dim, "dim", op)
    rank = len(view.view_shape)
    if not 0 <= d < rank:
        raise NKICompileError(op, f"dim {d} is out of range for a view of shape {view.view_shape} (0 to {rank - 1})")
    return next(k for k, a in enumerate(view.axes) if not isinstance(a, int) and a[3] == d)


def _on_chip(view: AxisView) -> bool:
    return view.base.space in ON_CHIP


def slice_view(self: Any, dim: Any, start: Any, end: Any, step: Any = 1) -> AxisView:
    """`t.slice(dim, start, end, step=1)`: elements start, start+step, ... < end of dimension `dim`
    (`t[:, start:end:step]` for dim=1); 0 <= start < end <= t.shape[dim], step >= 1."""
    view = _as_axis_view(self, "slice")
    k = _view_axis(view, dim, "slice")
    lo, hi, st = (_int_arg(v, name, "slice") for v, name in ((start, "start"), (end, "end"), (step, "step")))
    size = view.view_shape[int(dim)]
    if not 0 <= lo < hi <= size:
        raise NKICompileError("slice", f"start {lo} and end {hi} must satisfy 0 <= start < end <= {size} "
                                       f"(dimension {int(dim)} of shape {view.view_shape})")
    if st < 1:
        raise NKICompileError("slice", f"step must be 1 or more, got {st}")
    b_start, b_step, _count, pos = view.axes[k]  # type: ignore[misc]
    axes = list(view.axes)
    axes[k] = (b_start + b_step * lo, b_step * st, len(range(lo, hi, st)), pos)
    return AxisView(view.base, tuple(axes))


def select_view(self: Any, dim: Any, index: Any) -> AxisView:
    """`t.select(dim, index)`: element `index` of dimension `dim`, the dimension removed (`t[:, index]` for
    dim=1). On-chip, dimension 0 (the partitions) stays, one partition long, as integer indexing keeps it."""
    view = _as_axis_view(self, "select")
    k = _view_axis(view, dim, "select")
    if isinstance(index, (Tensor, View, Derived)):
        raise unsupported("select", "a dynamic select (an index tensor resolved at run time); index with the "
                                    "index tile instead (`t[idx_tile[0, 0], ...]` in a load or dma_copy)")
    i = _int_arg(index, "index", "select")
    size = view.view_shape[int(dim)]
    if not 0 <= i < size:
        raise NKICompileError("select", f"index {i} is out of range for dimension {int(dim)} of shape "
                                        f"{view.view_shape} (0 to {size - 1})")
    b_start, b_step, _count, pos = view.axes[k]  # type: ignore[misc]
    axes = list(view.axes)
    if pos == 0 and _on_chip(view):
        axes[k] = (b_start + b_step * i, b_step, 1, 0)
        return AxisView(view.base, tuple(axes))
    axes[k] = b_start + b_step * i
    axes = [a if isinstance(a, int) or a[3] < pos else (a[0], a[1], a[2], a[3] - 1) for a in axes]
    return AxisView(view.base, tuple(axes))


def permute_view(self: Any, dims: Any) -> AxisView:
    """`t.permute(dims)`: view dimension j is dimension dims[j] of t; on-chip, dims[0] must be 0."""
    view = _as_axis_view(self, "permute")
    rank = len(view.view_shape)
    try:
        order = tuple(_int_arg(d, "each of dims", "permute") for d in dims)
    except TypeError:
        raise NKICompileError("permute", f"dims must be a tuple of dimensions, got {type(dims).__name__}") from None
    if sorted(order) != list(range(rank)):
        raise NKICompileError("permute", f"dims {order} must be a permutation of {tuple(range(rank))} "
                                         f"(a view of shape {view.view_shape})")
    if _on_chip(view) and order[0] != 0:
        raise NKICompileError("permute", f"dims {order}: on-chip tensors keep the partition dimension first "
                                         f"(dims[0] must be 0)")
    new_pos = {old: new for new, old in enumerate(order)}
    axes = tuple(a if isinstance(a, int) else (a[0], a[1], a[2], new_pos[a[3]]) for a in view.axes)
    return AxisView(view.base, axes)


def indirect_view(self: Any, index: Any = None, num_elem: Any = None) -> Any:
    raise unsupported("indirect", "Tensor Indirection views (.indirect, NeuronCore-v4) are not simulated; "
                                  "index with an index tile in a load or dma_copy instead")


def axis_view_getitem(self: AxisView, items: Any) -> View:
    composed = _indexed(self, items)
    if composed is not None:
        return composed
    return View(Tensor.aliasing(self.access()), items)


def install() -> None:
    AxisView.__getitem__ = axis_view_getitem  # type: ignore[method-assign]
    for cls in (Tensor, View):
        cls.slice = slice_view  # type: ignore[attr-defined]
        cls.select = select_view  # type: ignore[attr-defined]
        cls.permute = permute_view  # type: ignore[attr-defined]
        cls.indirect = indirect_view  # type: ignore[attr-defined]
