"""Values stay on the device: host-side reads of a tensor's values are compile errors.

A kernel is traced once, on shapes: its Python code runs on the host, its tensors' values exist only on
the device. Reading a value on the host (to branch on it, or to compute with numpy) is a compile error
on Neuron, and here it would let a kernel's control flow, and so its instruction stream, depend on its
inputs, which the evaluation's verifier (one recorded program, replayed on every seed) relies on never
happening. The simulator itself reads storage (`Tensor.data`, `Access.array`), never these methods.
`install()` puts them on `Tensor`, `View` and `Derived` (language.py calls it with the operators).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.platforms.nki.simulator.errors import NKICompileError
from engine.platforms.nki.simulator.semantics.tensors import Derived, Tensor, View
from engine.platforms.nki.simulator.trace import MemorySpace

_HOST_READS = {
    "__bool__": ("bool", "its truth value (`if tile:`, `bool(tile)`, `and`/`or`/`not`)"),
    "__float__": ("float", "`float(tile)`"),
    "__int__": ("int", "`int(tile)`"),
    "__index__": ("index", "it as a Python integer (`range(tile)`, an index)"),
    "__complex__": ("complex", "`complex(tile)`"),
    "__iter__": ("iteration", "its elements by iterating over it (`for v in tile`, `list(tile)`, unpacking)"),
    "__array__": ("numpy conversion", "it as a numpy array (`np.asarray(tile)`, a numpy function on it)"),
    "item": ("item", "`tile.item()`"),
    "tolist": ("tolist", "`tile.tolist()`"),
}


def _tile_name(x: Any) -> str:
    while isinstance(x, Derived):
        x = x.source
    if isinstance(x, View):
        x = x.base
    return repr(x.name) if isinstance(x, Tensor) else type(x).__name__


def _host_read(op: str, what: str) -> Callable[..., Any]:
    def refuse(self: Any, *_: Any, **__: Any) -> Any:
        raise NKICompileError(op, f"reads {what} of tensor {_tile_name(self)} on the host: NKI tensor values live "
                                  "on the device and cannot steer Python control flow or become host values "
                                  "(the Neuron compiler rejects this too); compute with nl/nisa operations, "
                                  "and use masks or nl.where for data-dependent choices")

    refuse.__name__ = f"refuse_{op.replace(' ', '_')}"
    return refuse


# numpy's arithmetic with a tile on either side (`np.float32(2) * tile`, `array + tile`) is the tile's own
# operator (language.py installs them), so it becomes an instruction; any other numpy ufunc on a tile reads
# its values on the host.
_UFUNC_OPERATORS = {"add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
                    "multiply": ("__mul__", "__rmul__"), "divide": ("__truediv__", "__rtruediv__"),
                    "power": ("__pow__", None)}


def _array_ufunc(self: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    operators = _UFUNC_OPERATORS.get(getattr(ufunc, "__name__", ""))
    if operators is not None and method == "__call__" and not kwargs and len(inputs) == 2:
        forward, reflected = operators
        if inputs[0] is self:
            return getattr(self, forward)(inputs[1])
        if inputs[1] is self and reflected is not None:
            return getattr(self, reflected)(inputs[0])
    name = getattr(ufunc, "__name__", "ufunc") + ("" if method == "__call__" else f".{method}")
    raise NKICompileError("numpy", f"applies numpy's {name} to tensor {_tile_name(self)}, which reads its values "
                                   "on the host: NKI tensor values live on the device (use the nl/nisa operation)")


def _tensor_truth(refuse: Callable[..., Any]) -> Callable[..., Any]:
    """`if imm1:` on an HBM tensor (a kernel argument that may be None) asks whether the argument was given,
    not what it holds: AWS's NKI tests rely on it (test_nki_isa_tensor_scalar_cumulative), so an HBM tensor
    handle is true. An on-chip tile's truth would read its values: still refused."""

    def truth(self: Tensor) -> bool:
        if self.space == MemorySpace.HBM:
            return True
        return refuse(self)

    return truth


def install() -> None:
    for cls in (Tensor, View, Derived):
        for method, (op, what) in _HOST_READS.items():
            setattr(cls, method, _host_read(op, what))
        cls.__array_ufunc__ = _array_ufunc  # type: ignore[attr-defined]
    Tensor.__bool__ = _tensor_truth(Tensor.__bool__)  # type: ignore[method-assign]

