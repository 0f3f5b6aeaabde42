"""`neuronxcc.nki.isa` (nisa): the functional ISA of SDK 2.26 — each call returns its result tile.

Semantics and operand rules come from the nki.isa reference pages (SDK 2.21-2.26). The engine of an
instruction is the one its page names; `engine=` overrides it where the page allows a choice.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError, unsupported
from engine.platforms.nki.simulator.semantics import alu
from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.semantics.indexing import ArrayIndex, IndexExpr
from engine.platforms.nki.simulator.semantics.indirect import has_tile_index, skip_out_of_bounds, tile_indices
from engine.platforms.nki.simulator.semantics.operands import (
    broadcast_full_shape,
    free_axes,
    mask_window,
    result_dtype,
)
from engine.platforms.nki.simulator.semantics.ops import ENGINE_CHOICES
from engine.platforms.nki.simulator.semantics.runtime import active, instruction
from engine.platforms.nki.simulator.semantics.tensors import PSUM, SBUF, Access, Tensor, View
from engine.platforms.nki.simulator.trace import Engine, MemorySpace


class engine(IntEnum):  # noqa: N801 - the NKI name
    unknown = 0
    tensor = 1
    vector = 2
    scalar = 3
    gpsimd = 4
    sync = 5


unknown_engine = engine.unknown
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd


class reduce_cmd(IntEnum):  # noqa: N801
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4  # NKI 0.6: seed the accumulator from reduce_init


class dge_mode(IntEnum):  # noqa: N801
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class nc_version(IntEnum):  # noqa: N801
    gen2 = 2
    gen3 = 3


class oob_mode(IntEnum):  # noqa: N801
    error = 0
    skip = 1


_PLATFORM_VERSION = {"trn1": nc_version.gen2, "trn2": nc_version.gen3}


def get_nc_version() -> nc_version:
    return _PLATFORM_VERSION.get(active("get_nc_version").platform.name, nc_version.gen2)


_ENGINES = {engine.tensor: Engine.TENSOR, engine.vector: Engine.VECTOR, engine.scalar: Engine.SCALAR,
            engine.gpsimd: Engine.GPSIMD}


def engine_of(value: Any, default: Engine, op: str | None = None) -> Engine:
    """The engine `engine=value` picks (`default` for none or unknown); one the page of `op` does not name is a
    compile error (ops.ENGINE_CHOICES)."""
    if value is None:
        return default
    try:
        chosen = _ENGINES.get(engine(int(value)), default)
    except (ValueError, TypeError):
        return default
    allowed = ENGINE_CHOICES.get(op) if op is not None else None
    if allowed is not None and chosen not in allowed:
        names = [e.name.lower() for e in sorted(allowed)]
        names = ", ".join(names[:-1]) + " or " + names[-1]
        raise NKICompileError(op, f"{op} runs on the {names} engine, not the {chosen.name.lower()} engine")
    return chosen


def _ensure_on_chip(acc: Any, op: str, what: str, spaces: frozenset = frozenset((MemorySpace.SBUF,))) -> None:
    if isinstance(acc, Access) and acc.space not in spaces:
        where = " or ".join(sorted(m.name for m in spaces))
        raise NKICompileError(op, f"{what} must be in {where}, but {acc.tensor.name!r} is in {acc.space.name}")


# -- Tensor Engine ----------------------------------------------------------------------------------
@instruction("nc_matmul")
def nc_matmul(stationary: Any, moving: Any, *, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, tile_position: Any = (),
              tile_size: Any = (), mask: Any = None, perf_mode: Any = None, _op: str = "nc_matmul",
              **_: Any) -> Any:
    """stationary.T @ moving on the Tensor Engine; fp32 result in PSUM.

    perf_mode double_row (NeuronCore-v3 and newer, fp8 operands; the 0.6 reference's nc_matmul "Layout"): the
    contraction is split between the partition dimension and a first free dimension of 2 in both operands, so a
    [128, 2, M] stationary and a [128, 2, N] moving tile make a 256-deep matmul."""
    sim = active(_op).begin(_op)
    win = mask_window(mask)
    # Mask positions refer to the result (M, N): rows come from the stationary free axis.
    st_win = {-1: win[-2]} if win and -2 in win else None
    mv_win = {-1: win[-1]} if win and -1 in win else None
    st = sim.operand(stationary, st_win)
    mv = sim.operand(moving, mv_win)
    for acc, what in ((st, "stationary"), (mv, "moving")):
        if not isinstance(acc, Access):
            raise NKICompileError(_op, f"{what} must be a tile")
        _ensure_on_chip(acc, _op, f"{what} operand")
    k, m = st.partitions, st.free
    k2, n = mv.partitions, mv.free
    if str(getattr(perf_mode, "value", perf_mode) or "none").startswith("double_row"):
        k, m, k2, n = _double_row(sim, _op, st, mv)
    if k != k2:
        raise NKICompileError(_op, f"stationary and moving must share the partition (contraction) size: {k} vs {k2}")
    if st.full_shape and (st.full_shape[-1] if len(st.full_shape) > 1 else 1) > 128:
        raise NKICompileError(_op, f"stationary free size {st.full_shape[-1]} exceeds 128")
    if m > 128:
        raise NKICompileError(_op, f"stationary free size {m} exceeds 128")
    if n > 512:
        raise NKICompileError(_op, f"moving free size {n} exceeds 512")
    # A LazyMatmul is computed on use: PSUM accumulations are queued until their destination is read.
    out = sim.compute("matmul", (k, m, n, bool(is_transpose)), [st, mv], _op,
                      identity_key=(id(mv.tensor), mv.tensor.version, mv.box))
    full_m = st.full_shape[-1] if len(st.full_shape) > 1 else 1
    full_n = mv.full_shape[-1] if len(mv.full_shape) > 1 else 1
    return sim.result(out, dt.float32, engine=Engine.TENSOR, reads=[st, mv],
                      window=win, full_shape=(full_m, full_n), allowed=frozenset((MemorySpace.PSUM,)), default=PSUM,
                      flops=2 * m * n * k, partitions=k, free=n, is_transpose=bool(is_transpose),
                      native_acc=True, compute=st.tensor.dtype.name)


FP8 = frozenset({"float8_e4m3", "float8_e5m2", "float8_e4m3fn"})


def _double_row(sim: Any, op: str, st: Access, mv: Access) -> tuple[int, int, int, int]:
    """(K, M, K, N) of a double_row matmul, after its rules: NeuronCore-v3+, fp8 operands, a first free
    dimension of 2."""
    cores = {"trn1": 2, "trn2": 3, "trn3": 4}
    have = cores.get(sim.platform.name, 2)
    if have < 3:
        raise NKICompileError(op, f"perf_mode double_row exists only on NeuronCore-v3 and newer (trn2); "
                                  f"{sim.platform.name} is NeuronCore-v{have}")
    for acc, what in ((st, "stationary"), (mv, "moving")):
        if len(acc.shape) != 3 or acc.shape[1] != 2:
            raise NKICompileError(op, f"perf_mode double_row needs a {what} tile [partitions, 2, free], got "
                                      f"{list(acc.shape)}")
        if acc.tensor.dtype.name not in FP8:
            raise NKICompileError(op, f"perf_mode double_row needs float8 operands; the {what} tile is "
                                      f"{acc.tensor.dtype.name}")
    return 2 * st.partitions, st.shape[2], 2 * mv.partitions, mv.shape[2]


@instruction("nc_transpose")
def nc_transpose(data: Any, *, mask: Any = None, dtype: Any = None, engine: Any = None, **_: Any) -> Any:
    """Partition <-> free transpose: Tensor Engine (to PSUM) unless engine=vector (32x32 blocks)."""
    sim = active("nc_transpose").begin("nc_transpose")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    eng = engine_of(engine, Engine.TENSOR, "nc_transpose")
    shape = (acc.partitions, acc.free) if len(acc.shape) != 2 else acc.shape
    if eng == Engine.TENSOR:
        _ensure_on_chip(acc, "nc_transpose", "data")
        if acc.partitions > 128 or acc.free > 128:
            raise NKICompileError("nc_transpose", f"Tensor Engine transpose takes at most 128x128, got {shape}")
        d = dt.as_dtype(dtype) if dtype is not None else dt.float32
        values = sim.compute("transpose", (acc.partitions, acc.free, d.name), [acc])
        return sim.result(values, d, engine=Engine.TENSOR, reads=[acc], default=PSUM,
                          allowed=frozenset((MemorySpace.PSUM,)), flops=2 * acc.partitions * acc.free * acc.partitions,
                          partitions=acc.partitions, free=acc.free, is_transpose=True,
                          full_shape=tuple(reversed(acc.full_shape)), window=_swap(win),
                          compute=acc.tensor.dtype.name)
    if acc.partitions > 32 or acc.free > 32:
        raise NKICompileError("nc_transpose", f"Vector Engine transpose takes at most 32x32, got {shape}")
    d = result_dtype(dtype, acc)
    values = sim.compute("transpose", (acc.partitions, acc.free, d.name), [acc])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc], is_transpose=True,
                      full_shape=tuple(reversed(acc.full_shape)), window=_swap(win))


def _swap(win: dict | None) -> dict | None:
    if not win:
        return win
    return {(-1 if p == -2 else -2 if p == -1 else p): v for p, v in win.items()}


# -- Scalar Engine ----------------------------------------------------------------------------------
@instruction("activation")
def activation(op: Any, data: Any, *, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: Any = None, reduce_cmd: Any = None, mask: Any = None, dtype: Any = None,
               **_: Any) -> Any:
    """op(data * scale + bias) per element on the Scalar Engine, optional free-axis reduction."""
    sim = active("activation").begin("activation")
    return _activation(sim, "activation", op, data, bias, scale, reduce_op, reduce_res, mask, dtype)


def _activation(sim: Any, name: str, op: Any, data: Any, bias: Any, scale: Any, reduce_op: Any,
                reduce_res: Any, mask: Any, dtype: Any) -> Any:
    win = mask_window(mask)
    acc = sim.operand(data, win)
    fn = alu.op_name(op, name)
    alu.unary(fn, name)
    b_acc = sim.operand(bias, _part_window(win)) if bias is not None else None
    s_acc = sim.operand(scale, _part_window(win))
    reads = [r for r in (acc, s_acc, b_acc) if isinstance(r, Access)]
    rname = None
    if reduce_res is not None:
        rname = alu.op_name(reduce_op, name) if reduce_op is not None else "add"
    d = result_dtype(dtype, acc)
    values, red = sim.compute("activation", (fn, rname, d.name, name), [acc, s_acc, b_acc])
    tile = sim.result(values, d, engine=Engine.SCALAR, reads=reads, window=win, full_shape=acc.full_shape,
                      free=acc.free, compute="float32")
    if reduce_res is not None:
        _side_write(sim, reduce_res, red, name)
    return tile


def _part_window(win: dict | None) -> dict | None:
    """A per-partition operand follows only the partition part of a mask."""
    if win and -2 in win:
        return {-2: win[-2]}
    return None


def _side_write(sim: Any, target: Any, values: np.ndarray, op: str) -> None:
    """Instructions with a second output (reduce_res) write it in place."""
    if isinstance(target, View):
        acc = target.base.access(target.items, None, op)
    elif isinstance(target, Tensor):
        acc = target.whole(None, op)
    else:
        raise NKICompileError(op, "reduce_res must be a tile")
    sim.write(acc, values, op)


@instruction("activation_reduce")
def activation_reduce(op: Any, data: Any, *, reduce_op: Any, reduce_res: Any, bias: Any = None,
                      scale: Any = 1.0, mask: Any = None, dtype: Any = None, **_: Any) -> Any:
    sim = active("activation_reduce").begin("activation_reduce")
    return _activation(sim, "activation_reduce", op, data, bias, scale, reduce_op, reduce_res, mask, dtype)


# -- Vector Engine ----------------------------------------------------------------------------------
@instruction("tensor_tensor")
def tensor_tensor(data1: Any, data2: Any, op: Any, *, dtype: Any = None, mask: Any = None, engine: Any = None,
                  **_: Any) -> Any:
    sim = active("tensor_tensor").begin("tensor_tensor")
    win = mask_window(mask)
    a = sim.operand(data1, win)
    b = sim.operand(data2, win)
    for acc in (a, b):
        if not isinstance(acc, Access):
            raise NKICompileError("tensor_tensor", "both operands must be tiles (use tensor_scalar for scalars)")
    if a.space == MemorySpace.PSUM and b.space == MemorySpace.PSUM:
        raise NKICompileError("tensor_tensor", "data1 and data2 cannot both be in PSUM")
    fn = alu.op_name(op, "tensor_tensor")
    alu.binary(fn, "tensor_tensor")
    d = result_dtype(dtype, a, b)
    values = sim.compute("binary", (fn, d.name), [a, b])
    return sim.result(values, d, engine=engine_of(engine, Engine.VECTOR, "tensor_tensor"), reads=[a, b], window=win,
                      full_shape=broadcast_full_shape(a, b))


@instruction("tensor_scalar")
def tensor_scalar(data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, *, dtype: Any = None, mask: Any = None,
                  engine: Any = None, **_: Any) -> Any:
    """(data op0 operand0) op1 operand1; operands are scalars or one value per partition."""
    sim = active("tensor_scalar").begin("tensor_scalar")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    operands: list[Any] = [acc]
    specs: list[Any] = []
    for op, operand, reverse in ((op0, operand0, reverse0), (op1, operand1, reverse1)):
        if op is None:
            operands.append(None)
            specs.append(None)
            continue
        fn = alu.op_name(op, "tensor_scalar")
        alu.binary(fn, "tensor_scalar")
        operands.append(sim.operand(operand, _part_window(win)))
        specs.append((fn, bool(reverse)))
    d = result_dtype(dtype, acc)
    values = sim.compute("tensor_scalar", (specs[0], specs[1], d.name), operands)
    n_ops = sum(1 for spec in specs if spec is not None)
    return sim.result(values, d, engine=engine_of(engine, Engine.VECTOR, "tensor_scalar"),
                      reads=[r for r in operands if isinstance(r, Access)], window=win,
                      full_shape=acc.full_shape, flops=acc.size * max(1, n_ops))


@instruction("scalar_tensor_tensor")
def scalar_tensor_tensor(*, data: Any, op0: Any, operand0: Any, op1: Any, operand1: Any, reverse0: bool = False,
                         reverse1: bool = False, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    """(data op0 operand0) op1 operand1 with operand0 per-partition and operand1 a tile."""
    sim = active("scalar_tensor_tensor").begin("scalar_tensor_tensor")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    o0 = sim.operand(operand0, _part_window(win))
    o1 = sim.operand(operand1, win)
    f0 = alu.op_name(op0, "scalar_tensor_tensor")
    f1 = alu.op_name(op1, "scalar_tensor_tensor")
    alu.binary(f0, "scalar_tensor_tensor")
    alu.binary(f1, "scalar_tensor_tensor")
    d = result_dtype(dtype, acc)
    values = sim.compute("scalar_tensor_tensor", (f0, f1, bool(reverse0), bool(reverse1), d.name), [acc, o0, o1])
    reads = [r for r in (acc, o0, o1) if isinstance(r, Access)]
    return sim.result(values, d, engine=Engine.VECTOR, reads=reads, window=win,
                      full_shape=acc.full_shape, flops=2 * acc.size)


@instruction("tensor_reduce")
def tensor_reduce(op: Any, data: Any, axis: Any, *, dtype: Any = None, mask: Any = None, negate: bool = False,
                  keepdims: bool = False, **_: Any) -> Any:
    sim = active("tensor_reduce").begin("tensor_reduce")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    axes = free_axes(axis, len(acc.shape), "tensor_reduce")
    combine = alu.op_name(op, "tensor_reduce")
    alu.reducer(combine, "tensor_reduce")
    d = result_dtype(dtype, acc)
    out = sim.compute("reduce", (combine, axes, bool(keepdims), 0, bool(negate), d.name), [acc])
    full = list(acc.full_shape)
    for ax in sorted(axes, reverse=True):
        if keepdims:
            full[ax] = 1
        else:
            del full[ax]
    return sim.result(out, d, engine=Engine.VECTOR, reads=[acc], window=win, full_shape=tuple(full),
                      free=acc.free, flops=acc.size)


@instruction("tensor_tensor_scan")
def tensor_tensor_scan(data0: Any, data1: Any, initial: Any, op0: Any, op1: Any, reverse0: bool = False,
                       reverse1: bool = False, *, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    """result[:, i] = op1(op0(data0[:, i], result[:, i-1]), data1[:, i]) along the free axis."""
    sim = active("tensor_tensor_scan").begin("tensor_tensor_scan")
    win = mask_window(mask)
    a = sim.operand(data0, win)
    b = sim.operand(data1, win)
    if a.space == MemorySpace.PSUM and b.space == MemorySpace.PSUM:
        raise NKICompileError("tensor_tensor_scan", "data0 and data1 cannot both be in PSUM")
    init_acc = sim.operand(initial, _part_window(win))
    n0 = alu.op_name(op0, "tensor_tensor_scan")
    n1 = alu.op_name(op1, "tensor_tensor_scan")
    d = result_dtype(dtype, a, b)
    values = sim.compute("scan", (n0, n1, bool(reverse0), bool(reverse1), d.name), [a, b, init_acc])
    reads = [r for r in (a, b, init_acc) if isinstance(r, Access)]
    return sim.result(values, d, engine=Engine.VECTOR, reads=reads, window=win,
                      full_shape=a.full_shape, flops=2 * a.size)


@instruction("reciprocal")
def reciprocal(data: Any, *, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("reciprocal").begin("reciprocal")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    d = result_dtype(dtype, acc)
    values = sim.compute("reciprocal", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc], window=win, full_shape=acc.full_shape)


@instruction("tensor_copy")
def tensor_copy(src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = None, **_: Any) -> Any:
    sim = active("tensor_copy").begin("tensor_copy")
    win = mask_window(mask)
    acc = sim.operand(src, win)
    d = result_dtype(dtype, acc)
    values = sim.compute("convert", (d.name,), [acc])
    return sim.result(values, d, engine=engine_of(engine, Engine.VECTOR, "tensor_copy"), reads=[acc], window=win,
                      full_shape=acc.full_shape)


@instruction("memset")
def memset(shape: Any, value: Any, dtype: Any, *, mask: Any = None, engine: Any = None, **_: Any) -> Any:
    sim = active("memset").begin("memset")
    win = mask_window(mask)
    d = dt.as_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    values = sim.compute("memset", (_windowed(shape, win), value, d.name), [])
    return sim.result(values, d, engine=engine_of(engine, Engine.VECTOR, "memset"), reads=[], window=win,
                      full_shape=shape)


def _windowed(shape: tuple[int, ...], win: dict | None) -> tuple[int, ...]:
    if not win:
        return shape
    out = list(shape)
    for pos, (lo, hi, size) in win.items():
        if -pos <= len(out) and out[pos] == size:
            out[pos] = max(0, hi - lo)
    return tuple(out)


@instruction("iota")
def iota(expr: Any, dtype: Any, *, mask: Any = None, **_: Any) -> Any:
    """Materialise an index expression into a tile (GpSimd Engine)."""
    sim = active("iota").begin("iota")
    if not isinstance(expr, (IndexExpr, ArrayIndex)):
        raise NKICompileError("iota", "iota takes an index expression built from nl.arange")
    d = dt.as_dtype(dtype)
    values = expr.materialize().astype(d.storage)
    win = mask_window(mask)
    if win:
        index = [slice(None)] * values.ndim
        for pos, (lo, hi, size) in win.items():
            if -pos <= values.ndim and values.shape[pos] == size:
                index[pos] = slice(lo, hi)
        full = values.shape
        values = sim.compute("constant", (d.name,), [values[tuple(index)]])
        return sim.result(values, d, engine=Engine.GPSIMD, reads=[], window=win, full_shape=full)
    return sim.result(sim.compute("constant", (d.name,), [values]), d, engine=Engine.GPSIMD, reads=[])


@instruction("dma_copy")
def dma_copy(*, dst: Any, src: Any, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = None,
             dge_mode: Any = None, **_: Any) -> None:
    """A DMA between any two memories, written straight into dst."""
    sim = active("dma_copy").begin("dma_copy")
    win = mask_window(mask)
    if oob_mode is not None and int(oob_mode) == 1:  # oob_mode.skip
        src, dst = skip_out_of_bounds(sim, src, dst, "dma_copy")
    s = sim.operand(src, win, on_chip=False)
    if isinstance(dst, View):
        items = tile_indices(sim, dst.items, "dma_copy") if has_tile_index(dst.items) else dst.items
        out = dst.base.access(items, win, "dma_copy")
    elif isinstance(dst, Tensor):
        out = dst.whole(win, "dma_copy")
    else:
        raise NKICompileError("dma_copy", "dst must be a tensor")
    values = sim.compute("move", (), [s])
    acc_op = alu.op_name(dst_rmw_op, "dma_copy") if dst_rmw_op is not None else None
    sim.write(out, values, "dma_copy", accumulate=acc_op)
    sim.emit("dma_copy", Engine.DMA, out.tensor.dtype.name, out.partitions, out.free, 0, [s], [out], sim.line_no,
             sim.ctx)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def missing(*_: Any, **__: Any) -> Any:
        raise unsupported(f"nisa.{name}")

    return missing


_ = (SBUF, unsupported)
