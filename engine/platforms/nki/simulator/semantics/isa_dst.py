"""Top-level `nki.isa` (SDK 2.30 documentation): ISA calls take the destination tile first.

Each call computes like its functional twin in `isa.py` and then writes straight into `dst`, so one
call is one instruction in the trace with `dst` as its destination.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError, unsupported
from engine.platforms.nki.simulator.semantics import isa as _f
from engine.platforms.nki.simulator.semantics.runtime import active, instruction
from engine.platforms.nki.simulator.semantics.tensors import Accumulate, Tensor, View


def get_nc_version() -> Any:
    return _f.get_nc_version()


def _into(dst: Any, tile: Any, op: str, accumulate: str | None = None) -> None:
    sim = active(op)
    if isinstance(dst, View):
        base, items = dst.base, dst.items
    elif isinstance(dst, Tensor):
        base, items = dst, (Ellipsis,)
    else:
        raise NKICompileError(op, f"dst must be a tile, got {type(dst).__name__}")
    value = Accumulate(View(base, items), tile, accumulate) if accumulate else tile
    sim.assign(base, items, value)


@instruction("nc_matmul")
def nc_matmul(dst: Any, stationary: Any, moving: Any, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, accumulate: Any = None,
              tile_position: Any = (), tile_size: Any = (), perf_mode: Any = None, name: Any = None, **_: Any) -> None:
    """dst (PSUM) = stationary.T @ moving, or dst += ... when accumulating.

    accumulate=None (the default) accumulates into a PSUM destination, as the 2.30 tutorials rely on
    (a K loop of nc_matmul calls into one uninitialised PSUM tile): elements not written yet start at
    zero."""
    base = dst.base if isinstance(dst, View) else dst
    if accumulate is None:
        accumulate = base.space.name == "PSUM"
        if accumulate:
            # Before the matmul is issued (the record keeps program order): the previous instruction is
            # flushed first, then the elements never written start at zero.
            sim = active("nc_matmul").begin("nc_matmul")
            acc = base.access(dst.items if isinstance(dst, View) else (Ellipsis,), None, "nc_matmul")
            if acc.init is not None and not acc.init.all():
                zeros = sim.compute("keep_written", (), [acc, np.array(acc.init)], raw=True)
                sim.write(acc, zeros, "nc_matmul", race_accumulate=True)
    tile = _f.nc_matmul(stationary, moving, is_transpose=is_transpose, perf_mode=perf_mode)
    _into(dst, tile, "nc_matmul", "add" if accumulate else None)


@instruction("nc_transpose")
def nc_transpose(dst: Any, data: Any, engine: Any = None, name: Any = None, **_: Any) -> None:
    _into(dst, _f.nc_transpose(data, engine=engine), "nc_transpose")


@instruction("activation")
def activation(dst: Any, op: Any, data: Any, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: Any = None, reduce_cmd: Any = None, name: Any = None, **_: Any) -> None:
    _into(dst, _f.activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                             dtype=dst.dtype), "activation")


@instruction("activation_reduce")
def activation_reduce(dst: Any, op: Any, data: Any, reduce_op: Any, reduce_res: Any, bias: Any = None,
                      scale: Any = 1.0, name: Any = None, **_: Any) -> None:
    _into(dst, _f.activation_reduce(op, data, reduce_op=reduce_op, reduce_res=reduce_res, bias=bias, scale=scale,
                                    dtype=dst.dtype), "activation_reduce")


@instruction("tensor_tensor")
def tensor_tensor(dst: Any, data1: Any, data2: Any, op: Any, engine: Any = None, name: Any = None, **_: Any) -> None:
    _into(dst, _f.tensor_tensor(data1, data2, op, dtype=dst.dtype, engine=engine), "tensor_tensor")


@instruction("tensor_scalar")
def tensor_scalar(dst: Any, data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, engine: Any = None, name: Any = None, **_: Any) -> None:
    _into(dst, _f.tensor_scalar(data, op0, operand0, reverse0, op1, operand1, reverse1, dtype=dst.dtype,
                                engine=engine), "tensor_scalar")


@instruction("scalar_tensor_tensor")
def scalar_tensor_tensor(dst: Any, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any,
                         reverse0: bool = False, reverse1: bool = False, name: Any = None, **_: Any) -> None:
    _into(dst, _f.scalar_tensor_tensor(data=data, op0=op0, operand0=operand0, op1=op1, operand1=operand1,
                                       reverse0=reverse0, reverse1=reverse1, dtype=dst.dtype),
          "scalar_tensor_tensor")


@instruction("tensor_reduce")
def tensor_reduce(dst: Any, op: Any, data: Any, axis: Any, negate: bool = False, keepdims: bool = False,
                  name: Any = None) -> None:
    _into(dst, _f.tensor_reduce(op, data, axis, negate=negate, keepdims=keepdims, dtype=dst.dtype),
          "tensor_reduce")


@instruction("tensor_tensor_scan")
def tensor_tensor_scan(dst: Any, data0: Any, data1: Any, initial: Any, op0: Any, op1: Any, reverse0: bool = False,
                       reverse1: bool = False, name: Any = None, **_: Any) -> None:
    _into(dst, _f.tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0, reverse1, dtype=dst.dtype),
          "tensor_tensor_scan")


@instruction("tensor_copy")
def tensor_copy(dst: Any, src: Any, engine: Any = None, name: Any = None, **_: Any) -> None:
    _into(dst, _f.tensor_copy(src, dtype=dst.dtype, engine=engine), "tensor_copy")


@instruction("reciprocal")
def reciprocal(dst: Any, data: Any, name: Any = None, **_: Any) -> None:
    _into(dst, _f.reciprocal(data, dtype=dst.dtype), "reciprocal")


@instruction("memset")
def memset(dst: Any, value: Any, engine: Any = None, name: Any = None, **_: Any) -> None:
    _into(dst, _f.memset(tuple(dst.shape), value, dst.dtype, engine=engine), "memset")


@instruction("iota")
def iota(dst: Any, expr: Any, name: Any = None, **_: Any) -> None:
    _into(dst, _f.iota(expr, dst.dtype), "iota")


@instruction("dma_copy")
def dma_copy(dst: Any, src: Any, dst_rmw_op: Any = None, oob_mode: Any = None, dge_mode: Any = None,
             name: Any = None) -> None:
    _f.dma_copy(dst=dst, src=src, dst_rmw_op=dst_rmw_op)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def missing(*_: Any, **__: Any) -> Any:
        raise unsupported(f"nisa.{name}")

    return missing


# The ISA enums, as in the functional generation (kernels pass them as engine=..., reduce_cmd=...).
engine = _f.engine
reduce_cmd = _f.reduce_cmd
dge_mode = _f.dge_mode
oob_mode = _f.oob_mode
nc_version = _f.nc_version
unknown_engine, tensor_engine, vector_engine = _f.unknown_engine, _f.tensor_engine, _f.vector_engine
scalar_engine, gpsimd_engine = _f.scalar_engine, _f.gpsimd_engine
