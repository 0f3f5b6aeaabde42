"""`neuronxcc.nki.isa` (nisa): the functional ISA of SDK 2.26 — each call returns its result tile.

Semantics and operand rules come from the nki.isa reference pages (SDK 2.21-2.26). The engine of an
instruction is the one its page names; `engine=` overrides it where the page allows a choice.
"""

from __future__ import annotations

import math
from enum import IntEnum
from typing import Any

import numpy as np

from . import alu
from . import dtypes as dt
from .errors import NKICompileError, unsupported
from .indexing import ArrayIndex, IndexExpr
from .operands import (
    as_fp32,
    broadcast_full_shape,
    free_axes,
    mask_window,
    partition_first,
    result_dtype,
    to_dtype,
)
from .runtime import active, instruction
from .tensors import PSUM, SBUF, Access, Tensor, View
from .trace import Engine, MemorySpace


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


def engine_of(value: Any, default: Engine) -> Engine:
    if value is None:
        return default
    try:
        return _ENGINES.get(engine(int(value)), default)
    except (ValueError, TypeError):
        return default


def _ensure_on_chip(acc: Any, op: str, what: str, spaces: frozenset = frozenset((MemorySpace.SBUF,))) -> None:
    if isinstance(acc, Access) and acc.space not in spaces:
        where = " or ".join(sorted(m.name for m in spaces))
        raise NKICompileError(op, f"{what} must be in {where}, but {acc.tensor.name!r} is in {acc.space.name}")


def _vector_or_scalar(acc: Any, op: str, what: str) -> Any:
    """A per-partition operand: a scalar, or a tile with one element per partition."""
    sim = active(op)
    if isinstance(acc, Access):
        values = as_fp32(sim.read(acc))
        if values.ndim >= 2 and int(np.prod(values.shape[1:])) != 1:
            raise NKICompileError(op, f"{what} must be a scalar or one element per partition, got shape "
                                      f"{values.shape}")
        return values.reshape(values.shape[0], 1) if values.ndim else values
    return acc


# -- Tensor Engine ----------------------------------------------------------------------------------
_IDENTITY_CACHE: dict[tuple, bool] = {}


def _is_identity(acc: Access, values: np.ndarray) -> bool:
    n, m = values.shape[0], (values.shape[1] if values.ndim > 1 else 1)
    if values.ndim != 2 or n != m:
        return False
    key = (id(acc.tensor), acc.tensor.version, acc.box)
    hit = _IDENTITY_CACHE.get(key)
    if hit is None:
        hit = bool(np.array_equal(values, np.eye(n, dtype=values.dtype)))
        if len(_IDENTITY_CACHE) > 4096:
            _IDENTITY_CACHE.clear()
        _IDENTITY_CACHE[key] = hit
    return hit


def _blasable(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """A 2-D operand BLAS can take as is (unit stride on one axis); otherwise a contiguous copy.

    numpy's matmul on other strided views falls back to a slow non-BLAS loop."""
    if x.ndim == 2 and x.shape == (rows, cols):
        s0, s1 = x.strides
        item = x.itemsize
        if (s1 == item and s0 >= cols * item) or (s0 == item and s1 >= rows * item):
            return x
    return np.ascontiguousarray(x).reshape(rows, cols)


@instruction("nc_matmul")
def nc_matmul(stationary: Any, moving: Any, *, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, tile_position: Any = (),
              tile_size: Any = (), mask: Any = None, _op: str = "nc_matmul", **_: Any) -> Any:
    """stationary.T @ moving on the Tensor Engine; fp32 result in PSUM."""
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
    if k != k2:
        raise NKICompileError(_op, f"stationary and moving must share the partition (contraction) size: {k} vs {k2}")
    if st.full_shape and (st.full_shape[-1] if len(st.full_shape) > 1 else 1) > 128:
        raise NKICompileError(_op, f"stationary free size {st.full_shape[-1]} exceeds 128")
    if m > 128:
        raise NKICompileError(_op, f"stationary free size {m} exceeds 128")
    if n > 512:
        raise NKICompileError(_op, f"moving free size {n} exceeds 512")
    a = _blasable(as_fp32(sim.read(st)), k, m)
    b = _blasable(as_fp32(sim.read(mv)), k, n)
    lazy = None
    if is_transpose and _is_identity(mv, b):
        out = a.T  # a view: written straight into the destination, or copied into a tile of its own
    else:
        out, lazy = None, (a, b)  # computed on use: PSUM accumulations are queued until their destination is read
    full_m = st.full_shape[-1] if len(st.full_shape) > 1 else 1
    full_n = mv.full_shape[-1] if len(mv.full_shape) > 1 else 1
    return sim.result(out, dt.float32, engine=Engine.TENSOR, reads=[st, mv], lazy=lazy,
                      window=win, full_shape=(full_m, full_n), allowed=frozenset((MemorySpace.PSUM,)), default=PSUM,
                      flops=2 * m * n * k, partitions=k, free=n, is_transpose=bool(is_transpose),
                      native_acc=True, compute=st.tensor.dtype.name)


@instruction("nc_transpose")
def nc_transpose(data: Any, *, mask: Any = None, dtype: Any = None, engine: Any = None, **_: Any) -> Any:
    """Partition <-> free transpose: Tensor Engine (to PSUM) unless engine=vector (32x32 blocks)."""
    sim = active("nc_transpose").begin("nc_transpose")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    eng = engine_of(engine, Engine.TENSOR)
    values = sim.read(acc)
    if values.ndim != 2:
        values = values.reshape(acc.partitions, acc.free)
    if eng == Engine.TENSOR:
        _ensure_on_chip(acc, "nc_transpose", "data")
        if acc.partitions > 128 or acc.free > 128:
            raise NKICompileError("nc_transpose", f"Tensor Engine transpose takes at most 128x128, got "
                                                  f"{values.shape}")
        d = dt.as_dtype(dtype) if dtype is not None else dt.float32
        return sim.result(to_dtype(values.T, d), d, engine=Engine.TENSOR, reads=[acc], default=PSUM,
                          allowed=frozenset((MemorySpace.PSUM,)), flops=2 * acc.partitions * acc.free * acc.partitions,
                          partitions=acc.partitions, free=acc.free, is_transpose=True,
                          full_shape=tuple(reversed(acc.full_shape)), window=_swap(win),
                          compute=acc.tensor.dtype.name)
    if acc.partitions > 32 or acc.free > 32:
        raise NKICompileError("nc_transpose", f"Vector Engine transpose takes at most 32x32, got {values.shape}")
    d = result_dtype(dtype, acc)
    return sim.result(to_dtype(values.T, d), d, engine=Engine.VECTOR, reads=[acc], is_transpose=True,
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
    fn = alu.unary(alu.op_name(op, name), name)
    reads = [acc]
    x = as_fp32(sim.read(acc))
    b_acc = sim.operand(bias, _part_window(win)) if bias is not None else None
    s_acc = sim.operand(scale, _part_window(win))
    scale_v = _vector_or_scalar(s_acc, name, "scale")
    if isinstance(s_acc, Access):
        reads.append(s_acc)
    x2 = x.reshape(x.shape[0], -1) if x.ndim > 2 else x
    if x2.ndim == 1:
        x2 = x2.reshape(-1, 1)
    pre = x2 * scale_v if not (isinstance(scale_v, (int, float)) and scale_v == 1.0) else x2
    if b_acc is not None:
        bias_v = _vector_or_scalar(b_acc, name, "bias")
        if isinstance(b_acc, Access):
            reads.append(b_acc)
        pre = pre + bias_v
    out = fn(pre.astype(np.float32, copy=False)).reshape(x.shape)
    d = result_dtype(dtype, acc)
    tile = sim.result(to_dtype(out, d), d, engine=Engine.SCALAR, reads=reads, window=win, full_shape=acc.full_shape,
                      free=acc.free, compute="float32")
    if reduce_res is not None:
        rname = alu.op_name(reduce_op, name) if reduce_op is not None else "add"
        red = alu.reducer(rname, name)(out.reshape(out.shape[0], -1), axis=1, keepdims=True)
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
    fn = alu.binary(alu.op_name(op, "tensor_tensor"), "tensor_tensor")
    va, vb = partition_first(as_fp32(sim.read(a)), as_fp32(sim.read(b)))
    d = result_dtype(dtype, a, b)
    return sim.result(to_dtype(fn(va, vb), d), d, engine=engine_of(engine, Engine.VECTOR), reads=[a, b], window=win,
                      full_shape=broadcast_full_shape(a, b))


@instruction("tensor_scalar")
def tensor_scalar(data: Any, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, *, dtype: Any = None, mask: Any = None,
                  engine: Any = None, **_: Any) -> Any:
    """(data op0 operand0) op1 operand1; operands are scalars or one value per partition."""
    sim = active("tensor_scalar").begin("tensor_scalar")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    reads = [acc]
    x = as_fp32(sim.read(acc))
    x2 = x.reshape(x.shape[0], -1) if x.ndim != 2 else x
    n_ops = 0
    for op, operand, reverse in ((op0, operand0, reverse0), (op1, operand1, reverse1)):
        if op is None:
            continue
        n_ops += 1
        fn = alu.binary(alu.op_name(op, "tensor_scalar"), "tensor_scalar")
        o = sim.operand(operand, _part_window(win))
        if isinstance(o, Access):
            reads.append(o)
        v = _vector_or_scalar(o, "tensor_scalar", "operand")
        x2 = fn(v, x2) if reverse else fn(x2, v)
    d = result_dtype(dtype, acc)
    out = np.asarray(x2).reshape(x.shape)
    return sim.result(to_dtype(out, d), d, engine=engine_of(engine, Engine.VECTOR), reads=reads, window=win,
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
    f0 = alu.binary(alu.op_name(op0, "scalar_tensor_tensor"), "scalar_tensor_tensor")
    f1 = alu.binary(alu.op_name(op1, "scalar_tensor_tensor"), "scalar_tensor_tensor")
    x = as_fp32(sim.read(acc))
    v0 = _vector_or_scalar(o0, "scalar_tensor_tensor", "operand0")
    x2 = x.reshape(x.shape[0], -1)
    t = f0(v0, x2) if reverse0 else f0(x2, v0)
    v1 = as_fp32(sim.read(o1))
    v1 = np.asarray(v1).reshape(t.shape) if isinstance(v1, np.ndarray) else v1
    t = f1(v1, t) if reverse1 else f1(t, v1)
    d = result_dtype(dtype, acc)
    reads = [r for r in (acc, o0, o1) if isinstance(r, Access)]
    return sim.result(to_dtype(np.asarray(t).reshape(x.shape), d), d, engine=Engine.VECTOR, reads=reads, window=win,
                      full_shape=acc.full_shape, flops=2 * acc.size)


@instruction("tensor_reduce")
def tensor_reduce(op: Any, data: Any, axis: Any, *, dtype: Any = None, mask: Any = None, negate: bool = False,
                  keepdims: bool = False, **_: Any) -> Any:
    sim = active("tensor_reduce").begin("tensor_reduce")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    x = as_fp32(sim.read(acc))
    axes = free_axes(axis, x.ndim, "tensor_reduce")
    out = alu.reducer(alu.op_name(op, "tensor_reduce"), "tensor_reduce")(x, axis=axes, keepdims=keepdims)
    if negate:
        out = -out
    full = list(acc.full_shape)
    for ax in sorted(axes, reverse=True):
        if keepdims:
            full[ax] = 1
        else:
            del full[ax]
    d = result_dtype(dtype, acc)
    return sim.result(to_dtype(out, d), d, engine=Engine.VECTOR, reads=[acc], window=win, full_shape=tuple(full),
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
    x0 = np.asarray(sim.read(a), dtype=np.float64)
    x1 = np.asarray(sim.read(b), dtype=np.float64)
    shape = x0.shape
    x0 = x0.reshape(shape[0], -1)
    x1 = x1.reshape(shape[0], -1)
    init_acc = sim.operand(initial, _part_window(win))
    init = _vector_or_scalar(init_acc, "tensor_tensor_scan", "initial")
    init = np.asarray(init, dtype=np.float64)
    n0 = alu.op_name(op0, "tensor_tensor_scan")
    n1 = alu.op_name(op1, "tensor_tensor_scan")
    out = _scan(x0, x1, init, n0, n1, reverse0, reverse1)
    d = result_dtype(dtype, a, b)
    reads = [r for r in (a, b, init_acc) if isinstance(r, Access)]
    return sim.result(to_dtype(out.reshape(shape), d), d, engine=Engine.VECTOR, reads=reads, window=win,
                      full_shape=a.full_shape, flops=2 * a.size)


def _linear_scan(a: np.ndarray, b: np.ndarray, init: np.ndarray) -> np.ndarray:
    """r_i = a_i * r_{i-1} + b_i along axis 1, r_{-1} = init, in blocks of about sqrt(n) columns: each
    block's running map (r = A_j * r_in + B_j) is built column by column for all blocks at once, the
    blocks' carries are chained, then every column is resolved in one pass; the last n % size columns
    follow one by one. O(n) work in O(sqrt(n)) numpy steps; the doubling scan it replaced took log2(n)
    steps but did log2(n) times the work (mamba: 1.2 s -> 0.7-1.0 s)."""
    rows, n = a.shape
    size = max(1, math.isqrt(n))
    blocks = n // size
    full = blocks * size
    # Column j of every block as one contiguous (rows, blocks) slab: the loop below walks j.
    a3 = np.ascontiguousarray(a[:, :full].reshape(rows, blocks, size).transpose(2, 0, 1))
    b3 = np.ascontiguousarray(b[:, :full].reshape(rows, blocks, size).transpose(2, 0, 1))
    mul = np.empty_like(a3)  # A_j: product of a over the block up to column j
    add = np.empty_like(b3)  # B_j: the block's recurrence from r_in = 0
    mul[0] = a3[0]
    add[0] = b3[0]
    for j in range(1, size):
        np.multiply(a3[j], mul[j - 1], out=mul[j])
        np.multiply(a3[j], add[j - 1], out=add[j])
        add[j] += b3[j]
    carry = np.empty((rows, blocks))  # r entering each block
    carry[:, 0] = init
    for k in range(1, blocks):
        carry[:, k] = mul[-1, :, k - 1] * carry[:, k - 1] + add[-1, :, k - 1]
    mul *= carry
    mul += add
    out = np.empty_like(a)
    out[:, :full].reshape(rows, blocks, size)[...] = mul.transpose(1, 2, 0)
    prev = out[:, full - 1]
    for i in range(full, n):
        prev = out[:, i] = a[:, i] * prev + b[:, i]
    return out


def _scan(x0: np.ndarray, x1: np.ndarray, init: np.ndarray, n0: str, n1: str, rev0: bool,
          rev1: bool) -> np.ndarray:
    n = x0.shape[1]
    if n0 == "multiply" and n1 == "add" and n:
        return _linear_scan(x0, x1, np.broadcast_to(init, (x0.shape[0], 1))[:, 0])
    f0 = alu.binary(n0, "tensor_tensor_scan")
    f1 = alu.binary(n1, "tensor_tensor_scan")
    out = np.empty_like(x0)
    prev = np.broadcast_to(init, (x0.shape[0], 1))[:, 0]
    for i in range(n):
        t = f0(prev, x0[:, i]) if rev0 else f0(x0[:, i], prev)
        prev = f1(x1[:, i], t) if rev1 else f1(t, x1[:, i])
        out[:, i] = prev
    return out


@instruction("reciprocal")
def reciprocal(data: Any, *, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("reciprocal").begin("reciprocal")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    d = result_dtype(dtype, acc)
    values = 1.0 / as_fp32(sim.read(acc))
    return sim.result(to_dtype(values, d), d, engine=Engine.VECTOR, reads=[acc], window=win, full_shape=acc.full_shape)


@instruction("tensor_copy")
def tensor_copy(src: Any, *, mask: Any = None, dtype: Any = None, engine: Any = None, **_: Any) -> Any:
    sim = active("tensor_copy").begin("tensor_copy")
    win = mask_window(mask)
    acc = sim.operand(src, win)
    d = result_dtype(dtype, acc)
    return sim.result(to_dtype(sim.read(acc), d), d, engine=engine_of(engine, Engine.VECTOR), reads=[acc], window=win,
                      full_shape=acc.full_shape)


@instruction("memset")
def memset(shape: Any, value: Any, dtype: Any, *, mask: Any = None, engine: Any = None, **_: Any) -> Any:
    sim = active("memset").begin("memset")
    win = mask_window(mask)
    d = dt.as_dtype(dtype)
    shape = tuple(int(s) for s in shape)
    values = np.full(_windowed(shape, win), value, dtype=d.storage)
    return sim.result(values, d, engine=engine_of(engine, Engine.VECTOR), reads=[], window=win, full_shape=shape)


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
        values = values[tuple(index)]
        return sim.result(values, d, engine=Engine.GPSIMD, reads=[], window=win, full_shape=full)
    return sim.result(values, d, engine=Engine.GPSIMD, reads=[])


@instruction("dma_copy")
def dma_copy(*, dst: Any, src: Any, mask: Any = None, dst_rmw_op: Any = None, oob_mode: Any = None,
             dge_mode: Any = None, **_: Any) -> None:
    """A DMA between any two memories, written straight into dst."""
    sim = active("dma_copy").begin("dma_copy")
    win = mask_window(mask)
    s = sim.operand(src, win, on_chip=False)
    if isinstance(dst, View):
        out = dst.base.access(dst.items, win, "dma_copy")
    elif isinstance(dst, Tensor):
        out = dst.whole(win, "dma_copy")
    else:
        raise NKICompileError("dma_copy", "dst must be a tensor")
    values = sim.read(s)
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
