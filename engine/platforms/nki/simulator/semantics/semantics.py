"""The numeric core of every NKI instruction: what it computes from its operands' values, and how a value
lands in its destination.

One implementation, called by the live simulator (isa.py, language.py and runtime.py, through
`Simulator.compute` and `Simulator.write`) and by the replayer (replay.py), so the two cannot disagree.
Nothing here sees a tensor, an access or the simulator: a *kind* function takes its parameters (plain data:
operator names, dtype names, axes, shapes), the values its operands read (numpy views of storage, copies
for non-affine indices, or scalars and host constants as the kernel gave them) and which operands are tiles,
and returns its result (a tuple for the instructions with a second output). The *store* functions put a
value into a destination region the way the simulator always has (fit to the region's shape, accumulate,
round to the destination's dtype). Rules that depend only on operand shapes raise NKICompileError here, so
the replayer checks them too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError
from engine.platforms.nki.simulator.semantics import alu
from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.semantics.exact_matmul import matmul_tn

Kind = Callable[[tuple, list[Any], tuple[bool, ...]], Any]
_SCALARS = (int, float, bool, np.generic)


# -- how every engine treats its operands (operands.py re-exports these for nl and nisa) -------------------
def partition_first(*arrays: Any) -> list[Any]:
    """NKI broadcasting is partition-first: pad lower-rank tiles with trailing unit dimensions."""
    nd = max((np.ndim(a) for a in arrays if isinstance(a, np.ndarray)), default=0)
    out = []
    for a in arrays:
        if isinstance(a, np.ndarray) and 0 < a.ndim < nd:
            a = a.reshape(a.shape + (1,) * (nd - a.ndim))
        out.append(a)
    return out


def as_fp32(x: Any) -> Any:
    """Engines compute in fp32: promote narrow floats before the math."""
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.dtype.itemsize < 4:
        return x.astype(np.float32)
    return x


def float_to_int(values: Any, storage: np.dtype) -> Any:
    """A float -> integer conversion as the engines do it: round to nearest, ties to even, and saturate to the
    destination's range (NKI 0.6 release notes, "fp32-to-integer casts match hardware"); numpy would truncate
    and wrap. NaN becomes 0 (our choice: the notes do not say)."""
    info = np.iinfo(storage)
    arr = np.rint(np.asarray(values, dtype=np.float64))
    arr = np.nan_to_num(arr, nan=0.0, posinf=float(info.max), neginf=float(info.min))
    return np.clip(arr, info.min, info.max).astype(storage)


def _needs_int_cast(values: Any, storage: np.dtype) -> bool:
    if storage.kind not in "iu":
        return False
    if isinstance(values, np.ndarray):
        return values.dtype.kind == "f"
    return isinstance(values, (float, np.floating))


def to_dtype(values: Any, d: dt.DType) -> np.ndarray:
    """`values` in the storage of dtype `d`, rounded as the device rounds (bf16, tf32, fp8; float -> int
    rounds to nearest even and saturates)."""
    arr = np.asarray(values)
    if arr.dtype != d.storage:
        arr = float_to_int(arr, d.storage) if _needs_int_cast(arr, d.storage) else arr.astype(d.storage)
    if d.mantissa_bits:
        arr = d.round(arr)
    return arr


def fit_to(values: Any, shape: tuple[int, ...], op: str) -> Any:
    """Match a result to a destination shape: equal, same size (reshape), or NKI partition-first broadcast."""
    if isinstance(values, _SCALARS):
        return values
    values = np.asarray(values)
    if values.shape == shape:
        return values
    size = 1
    for s in shape:
        size *= s
    if values.size == size:
        return values.reshape(shape)
    if values.ndim <= len(shape):
        padded = values.reshape(values.shape + (1,) * (len(shape) - values.ndim))
        try:
            return np.broadcast_to(padded, shape)
        except ValueError:
            pass
    raise NKICompileError(op, f"result shape {values.shape} does not fit destination shape {shape}")



class LazyMatmul:
    """stationary.T @ moving, computed only when someone needs the values (accumulation.py queues them)."""

    __slots__ = ("stationary", "moving", "shape")

    def __init__(self, stationary: np.ndarray, moving: np.ndarray) -> None:
        self.stationary = stationary
        self.moving = moving
        self.shape = (stationary.shape[1], moving.shape[1])

    def compute(self) -> np.ndarray:
        return matmul_tn(self.stationary, self.moving)

    def into(self, out: np.ndarray) -> None:
        if out.dtype == np.float32 and not (
                np.may_share_memory(out, self.stationary) or np.may_share_memory(out, self.moving)):
            matmul_tn(self.stationary, self.moving, out=out)
        else:
            out[...] = self.compute()

    def fp32_operands(self) -> tuple[np.ndarray, np.ndarray]:
        """The operands as PSUM accumulation reads them (queued groups accumulate in float32)."""
        return np.asarray(self.stationary, dtype=np.float32), np.asarray(self.moving, dtype=np.float32)


def dtype(name: str) -> dt.DType:
    return dt.as_dtype(name)


def per_partition(values: Any, tile: bool, op: str, what: str) -> Any:
    """A per-partition operand: a scalar (or host constant) as given, or a tile with one element per partition
    as a (P, 1) column."""
    if not tile:
        return values
    values = as_fp32(values)
    if values.ndim >= 2 and int(np.prod(values.shape[1:])) != 1:
        raise NKICompileError(op, f"{what} must be a scalar or one element per partition, got shape {values.shape}")
    return values.reshape(values.shape[0], 1) if values.ndim else values


# -- kinds: (params, operand values, which operands are tiles) -> result ----------------------------------
def convert(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """load, copy, tensor_copy, loop_reduce: the operand in the result's dtype. params: (dtype,)."""
    return to_dtype(v[0], dtype(params[0]))


def move(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """store, dma_copy, assignments: the operand's value as read (the write fits and rounds it)."""
    return v[0]


def scalar(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """`tile[...] = 0.0`: the scalar itself. params: (value,)."""
    return params[0]


def constant(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """iota: values fixed when the kernel was traced (a host constant operand)."""
    return v[0]


def binary(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """nl.add & co., nisa.tensor_tensor: elementwise, partition-first broadcast. params: (operator, dtype)."""
    op, d = params
    va, vb = partition_first(as_fp32(v[0]), as_fp32(v[1]))
    return to_dtype(alu.binary(op, op)(va, vb), dtype(d))


def unary(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """nl.exp & co.: one function per element in fp32. params: (function, dtype)."""
    fn, d = params
    return to_dtype(alu.unary(fn, fn)(as_fp32(v[0])), dtype(d))


def reduce(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """nl.sum/max/mean/..., nisa.tensor_reduce along free axes. params: (operator, axes, keepdims, count for a
    mean or 0, negate, dtype)."""
    op, axes, keepdims, count, negate, d = params
    out = alu.reducer(op, op)(as_fp32(v[0]), axis=tuple(axes), keepdims=keepdims)
    if count:
        out = out / count
    if negate:
        out = -out
    return to_dtype(out, dtype(d))


def activation(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """op(data * scale + bias) on the Scalar Engine, and the free-axis reduction of the fp32 result when asked
    for (reduce_res). Operands: data, scale, bias (None when absent). params: (function, reduce operator or
    None, dtype, instruction name)."""
    fn, reduce_op, d, name = params
    x = as_fp32(v[0])
    scale_v = per_partition(v[1], tiles[1], name, "scale")
    x2 = x.reshape(x.shape[0], -1) if x.ndim > 2 else x
    if x2.ndim == 1:
        x2 = x2.reshape(-1, 1)
    pre = x2 * scale_v if not (isinstance(scale_v, (int, float)) and scale_v == 1.0) else x2
    if v[2] is not None:
        pre = pre + per_partition(v[2], tiles[2], name, "bias")
    out = alu.unary(fn, name)(pre.astype(np.float32, copy=False)).reshape(x.shape)
    result = to_dtype(out, dtype(d))
    if reduce_op is None:
        return result, None
    return result, alu.reducer(reduce_op, name)(out.reshape(out.shape[0], -1), axis=1, keepdims=True)


def tensor_scalar(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """(data op0 operand0) op1 operand1, operands scalars or one value per partition. Operands: data,
    operand0, operand1 (None without op1). params: ((op0, reverse0), (op1, reverse1) or None, dtype)."""
    first, second, d = params
    x = as_fp32(v[0])
    x2 = x.reshape(x.shape[0], -1) if x.ndim != 2 else x
    for k, spec in ((1, first), (2, second)):
        if spec is None:
            continue
        op, reverse = spec
        fn = alu.binary(op, "tensor_scalar")
        o = per_partition(v[k], tiles[k], "tensor_scalar", "operand")
        x2 = fn(o, x2) if reverse else fn(x2, o)
    return to_dtype(np.asarray(x2).reshape(x.shape), dtype(d))


def scalar_tensor_tensor(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """(data op0 operand0) op1 operand1 with operand0 per partition and operand1 a tile. params: (op0, op1,
    reverse0, reverse1, dtype)."""
    op0, op1, reverse0, reverse1, d = params
    f0 = alu.binary(op0, "scalar_tensor_tensor")
    f1 = alu.binary(op1, "scalar_tensor_tensor")
    x = as_fp32(v[0])
    v0 = per_partition(v[1], tiles[1], "scalar_tensor_tensor", "operand0")
    x2 = x.reshape(x.shape[0], -1)
    t = f0(v0, x2) if reverse0 else f0(x2, v0)
    v1 = as_fp32(v[2])
    v1 = np.asarray(v1).reshape(t.shape) if isinstance(v1, np.ndarray) else v1
    t = f1(v1, t) if reverse1 else f1(t, v1)
    return to_dtype(np.asarray(t).reshape(x.shape), dtype(d))


def scan(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """result[:, i] = op1(op0(data0[:, i], result[:, i-1]), data1[:, i]) along the free axis. Operands: data0,
    data1, initial. params: (op0, op1, reverse0, reverse1, dtype)."""
    op0, op1, reverse0, reverse1, d = params
    x0 = np.asarray(v[0], dtype=np.float64)
    x1 = np.asarray(v[1], dtype=np.float64)
    shape = x0.shape
    x0 = x0.reshape(shape[0], -1)
    x1 = x1.reshape(shape[0], -1)
    init = np.asarray(per_partition(v[2], tiles[2], "tensor_tensor_scan", "initial"), dtype=np.float64)
    out = _scan(x0, x1, init, op0, op1, reverse0, reverse1)
    return to_dtype(out.reshape(shape), dtype(d))


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


def reciprocal(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    return to_dtype(1.0 / as_fp32(v[0]), dtype(params[0]))


def transpose(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """Partition <-> free transpose (Tensor or Vector Engine). params: (partitions, free, dtype)."""
    partitions, free, d = params
    values = v[0]
    if values.ndim != 2:
        values = values.reshape(partitions, free)
    return to_dtype(values.T, dtype(d))


def memset(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """params: (shape after the mask window, value, dtype)."""
    shape, value, d = params
    return np.full(tuple(shape), value, dtype=dtype(d).storage)


def where(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    vc, va, vb = partition_first(v[0], v[1], v[2])
    return to_dtype(np.where(vc, va, vb), dtype(params[0]))


def keep_written(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """The 2.30 nc_matmul into a partly written PSUM tile: elements never written start at zero. Operands: the
    destination, the mask of its written elements (a constant: which elements were written depends on the
    program, not on values)."""
    current, written = v
    return np.where(written, current, 0).astype(current.dtype)


_IDENTITY_CACHE: dict[tuple, bool] = {}


def is_identity(values: np.ndarray, key: tuple | None = None) -> bool:
    """Whether a moving operand is the identity matrix (a transpose through the PE array), cached by `key` (which
    must change whenever the values can)."""
    n, m = values.shape[0], (values.shape[1] if values.ndim > 1 else 1)
    if values.ndim != 2 or n != m:
        return False
    hit = _IDENTITY_CACHE.get(key) if key is not None else None
    if hit is None:
        hit = bool(np.array_equal(values, np.eye(n, dtype=values.dtype)))
        if key is not None:
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


def matmul(params: tuple, v: list[Any], tiles: tuple[bool, ...], identity_key: tuple | None = None) -> Any:
    """stationary.T @ moving, deferred (a LazyMatmul), or the stationary's transpose when the moving operand is
    the identity and is_transpose is set. params: (K, M, N, is_transpose)."""
    k, m, n, is_transpose = params
    a = _blasable(as_fp32(v[0]), k, m)
    b = _blasable(as_fp32(v[1]), k, n)
    if is_transpose and is_identity(b, identity_key):
        return a.T  # a view: written straight into the destination, or copied into a tile of its own
    return LazyMatmul(a, b)


def derive(values: np.ndarray, kind: str, shape: tuple[int, ...], window: dict | None,
           op: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """A view of an operand's values made without an instruction (broadcast_to, reshape, .T), narrowed by a
    mask window: the view and its shape before the window."""
    if kind == "broadcast":
        if values.ndim < len(shape) and values.shape and values.shape[0] == shape[0]:
            values = values.reshape(values.shape + (1,) * (len(shape) - values.ndim))
        array = np.broadcast_to(values, shape)
    elif kind == "reshape":
        array = values.reshape(shape)
    elif kind == "transpose":
        array = values.T
    else:  # pragma: no cover - kinds are fixed by language.py
        raise NKICompileError(op, f"unknown view {kind}")
    full = tuple(array.shape)
    if window:
        index = [slice(None)] * array.ndim
        for pos, (lo, hi, size) in window.items():
            if -pos <= array.ndim and array.shape[pos] == size:
                index[pos] = slice(lo, hi)
        array = array[tuple(index)]
    return array, full


# Kinds whose result partition p depends only on partition p of each operand (or on a one-partition operand
# broadcast to all): elementwise ALU and activation functions, and reductions along the free axes. What they
# compute from never-written elements stays in those partitions (runtime.Simulator._read_partitions).
PARTITION_LOCAL = frozenset({"binary", "unary", "reduce", "activation", "tensor_scalar", "scalar_tensor_tensor",
                             "reciprocal"})

KINDS: dict[str, Kind] = {
    "convert": convert, "move": move, "scalar": scalar, "constant": constant, "binary": binary, "unary": unary,
    "reduce": reduce, "activation": activation, "tensor_scalar": tensor_scalar,
    "scalar_tensor_tensor": scalar_tensor_tensor, "scan": scan, "reciprocal": reciprocal, "transpose": transpose,
    "memset": memset, "where": where, "keep_written": keep_written, "matmul": matmul,
}


# -- stores: a value into its destination ------------------------------------------------------------------
def write(dst: np.ndarray, values: Any, accumulate: str | None, d: dt.DType, op: str) -> None:
    """Simulator.write into a view of storage: overwrite (a matmul straight into it), or accumulate with an
    operator; then round to the destination's dtype."""
    if dst.size == 0:
        return
    if type(values) is LazyMatmul:
        if accumulate or values.shape != dst.shape:
            values = values.compute()
        else:  # a matmul overwriting its destination: computed straight into it
            values.into(dst)
            if d.mantissa_bits:
                dst[...] = d.round(dst)
            return
    if _needs_int_cast(values, dst.dtype):
        values = float_to_int(values, dst.dtype)
    if accumulate:
        vals = fit_to(values, dst.shape, op)
        if accumulate == "add":
            np.add(dst, vals, out=dst, casting="unsafe")
        else:
            dst[...] = alu.binary(accumulate, op)(dst, vals)
    else:
        dst[...] = fit_to(values, dst.shape, op)
    if d.mantissa_bits:
        dst[...] = d.round(dst)


def write_fancy(base: np.ndarray, index: tuple, shape: tuple[int, ...], values: Any, accumulate: str | None,
                d: dt.DType, op: str) -> None:
    """Simulator.write through explicit index arrays (non-affine indices): reads copy, writes scatter."""
    if type(values) is LazyMatmul:
        values = values.compute()
    vals = fit_to(values, shape, op)
    if accumulate:
        vals = alu.binary(accumulate, op)(base[index], vals)
    if _needs_int_cast(vals, base.dtype):
        vals = float_to_int(vals, base.dtype)
    base[index] = d.round(np.asarray(vals, dtype=d.storage)) if d.mantissa_bits else vals


def add_product(dst: np.ndarray, stationary: np.ndarray, moving: np.ndarray) -> None:
    """One queued PSUM accumulation: dst += stationary.T @ moving (fp32 operands, `LazyMatmul.fp32_operands`);
    the product's bits do not depend on the CPU (exact_matmul.py)."""
    dst += matmul_tn(stationary, moving)


def fill_tile(dst: np.ndarray, values: Any, windowed: bool, d: dt.DType, op: str) -> None:
    """A result nobody claimed, into a fresh tile of its own (Simulator.flush): a masked or reshaped result
    fitted into its window, else the whole tile rounded to its dtype."""
    if type(values) is LazyMatmul:
        values = values.compute()
    if windowed:
        if dst.size:
            dst[...] = fit_to(values, dst.shape, op)
        return
    dst[...] = d.round(np.asarray(values, dtype=d.storage)) if d.mantissa_bits else values
