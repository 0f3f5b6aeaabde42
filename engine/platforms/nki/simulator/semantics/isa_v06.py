"""Instructions of the NKI 0.6 API reference (SDK 2.32) the simulator did not have (issue 34).

Each exists twice, like the rest of the simulator: a functional form for `neuronxcc.nki.isa` / `nl` (returns
its result tile; `FUNCTIONAL`, `LANGUAGE`) and the destination-first form of top-level `nki.isa` (writes `dst`;
`DESTINATION`). namespaces.py adds them to the modules it builds. What each computes is in semantics_v06.py;
the engine of each is the one its API page names, and the performance model prices every row by engine
(engine/platforms/nki/perf/costs.py), so none is free.

Instructions that the API reference marks "Available only on NeuronCore-v4 and newer" are refused on trn1
and trn2 with a message that says so (`require_core`).

Long because it is the one list of what the 0.6 reference added, each name in both forms beside its
registration; split it by family (selection and reductions, random numbers, gathers and shuffles, runtime
loops and registers) when it grows again.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError, NKIRuntimeError
from engine.platforms.nki.simulator.semantics import (
    alu,
    isa_dst,
    semantics_v06,  # noqa: F401 - registers the 0.6 kinds
)
from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.semantics import isa as _f
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.semantics.indexing import _CMP, ArrayIndex, IndexExpr
from engine.platforms.nki.simulator.semantics.operands import free_axes, mask_window, result_dtype
from engine.platforms.nki.simulator.semantics.runtime import active, instruction
from engine.platforms.nki.simulator.semantics.tensors import Access, Tensor, View
from engine.platforms.nki.simulator.trace import Engine, MemorySpace

# NeuronCore generation of each platform (architecture guides: trn1 NeuronCore-v2, trn2 -v3, trn3 -v4).
NEURON_CORE = {"trn1": 2, "trn2": 3, "trn3": 4}


def require_core(sim: Any, op: str, version: int) -> None:
    """Refuse an instruction the platform's NeuronCore does not have."""
    have = NEURON_CORE.get(sim.platform.name, 2)
    if have < version:
        raise NKICompileError(op, f"{op} exists only on NeuronCore-v{version} and newer (trn{version - 1}); "
                                  f"{sim.platform.name} is NeuronCore-v{have}")


def _draws(sim: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform [0, 1) draws for rand/dropout, fixed when the kernel runs: a per-simulation generator seeded
    with 0, so a kernel gives the same values on every run (the recorded program keeps them as constants)."""
    rng = getattr(sim, "nki_rng", None)
    if rng is None:
        rng = sim.nki_rng = np.random.default_rng(0)
    return rng.random(shape, dtype=np.float32)


def _reduce_name(op: Any, where: str) -> str:
    name = alu.op_name(op, where)
    alu.reducer(name, where)
    return name


# -- Vector Engine ------------------------------------------------------------------------------------------
@instruction("tensor_scalar_reduce")
def tensor_scalar_reduce(*, data: Any, op0: Any, operand0: Any, reduce_op: Any, reduce_res: Any = None,
                         reverse0: bool = False, dtype: Any = None, mask: Any = None, reduce_cmd: Any = None,
                         reduce_init: Any = None, reduce_res_negate: bool = False, **_: Any) -> Any:
    """data op0 operand0, and its free-axis reduction into reduce_res (one value per partition)."""
    sim = active("tensor_scalar_reduce").begin("tensor_scalar_reduce")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    o0 = sim.operand(operand0, _f._part_window(win))
    init = sim.operand(reduce_init, _f._part_window(win)) if reduce_init is not None else None
    fn = alu.op_name(op0, "tensor_scalar_reduce")
    alu.binary(fn, "tensor_scalar_reduce")
    rname = _reduce_name(reduce_op, "tensor_scalar_reduce")
    d = result_dtype(dtype, acc)
    values, red = sim.compute("scalar_reduce", (fn, bool(reverse0), rname, bool(reduce_res_negate), d.name),
                              [acc, o0, init])
    reads = [r for r in (acc, o0, init) if isinstance(r, Access)]
    tile = sim.result(values, d, engine=Engine.VECTOR, reads=reads, window=win, full_shape=acc.full_shape,
                      partitions=acc.partitions, free=acc.free, flops=2 * acc.size)
    if reduce_res is not None:
        _f._side_write(sim, reduce_res, red, "tensor_scalar_reduce")
    return tile


@instruction("max8")
def max8(*, src: Any, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("max8").begin("max8")
    acc = sim.operand(src, mask_window(mask))
    d = result_dtype(dtype, acc)
    values = sim.compute("max8", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc], partitions=acc.partitions, free=acc.free,
                      flops=acc.size)


@instruction("nc_find_index8")
def nc_find_index8(*, data: Any, vals: Any, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("nc_find_index8").begin("nc_find_index8")
    acc = sim.operand(data, mask_window(mask))
    v = sim.operand(vals)
    d = dt.as_dtype(dtype) if dtype is not None else dt.uint32
    if d.name not in ("uint16", "uint32"):
        raise NKICompileError("nc_find_index8", f"the index output is uint16 or uint32, not {d.name}")
    values = sim.compute("find_index8", (d.name,), [acc, v])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc, v], partitions=acc.partitions, free=acc.free,
                      flops=acc.size)


@instruction("nc_match_replace8")
def nc_match_replace8(*, data: Any, vals: Any, imm: Any, dst_idx: Any = None, dtype: Any = None,
                      mask: Any = None, **_: Any) -> Any:
    sim = active("nc_match_replace8").begin("nc_match_replace8")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    v = sim.operand(vals)
    d = result_dtype(dtype, acc)
    idx_dtype = dst_idx.dtype.name if isinstance(dst_idx, (Tensor, View)) else "uint32"
    values, idx = sim.compute("match_replace8", (float(imm), d.name, idx_dtype), [acc, v])
    tile = sim.result(values, d, engine=Engine.VECTOR, reads=[acc, v], window=win, full_shape=acc.full_shape,
                      partitions=acc.partitions, free=acc.free, flops=acc.size)
    if dst_idx is not None:
        _f._side_write(sim, dst_idx, idx, "nc_match_replace8")
    return tile


@instruction("dropout")
def dropout(data: Any, prob: Any, *, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    """Zero each element with probability `prob` (a scalar or one value per partition)."""
    sim = active("dropout").begin("dropout")
    win = mask_window(mask)
    acc = sim.operand(data, win)
    p = sim.operand(prob, _f._part_window(win))
    d = result_dtype(dtype, acc)
    draws = _draws(sim, (acc.partitions, max(1, acc.free)))
    values = sim.compute("keep_where", (d.name,), [acc, p, draws])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[r for r in (acc, p) if isinstance(r, Access)],
                      window=win, full_shape=acc.full_shape, partitions=acc.partitions, free=acc.free,
                      flops=acc.size)


@instruction("bn_stats")
def bn_stats(data: Any, *, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("bn_stats").begin("bn_stats")
    acc = sim.operand(data, mask_window(mask))
    if acc.free > 512:
        raise NKICompileError("bn_stats", f"bn_stats reads at most 512 elements per partition "
                                          f"(nl.tile_size.bn_stats_fmax), got {acc.free}")
    d = result_dtype(dtype, acc)
    values = sim.compute("bn_stats", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc], partitions=acc.partitions, free=acc.free,
                      flops=acc.size)


@instruction("bn_aggr")
def bn_aggr(data: Any, *, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("bn_aggr").begin("bn_aggr")
    acc = sim.operand(data, mask_window(mask))
    d = result_dtype(dtype, acc)
    values = sim.compute("bn_aggr", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc], partitions=acc.partitions, free=acc.free,
                      flops=acc.size)


@instruction("tensor_copy_predicated")
def tensor_copy_predicated(*, src: Any, dst: Any, predicate: Any, reverse_pred: bool = False, mask: Any = None,
                           **_: Any) -> None:
    """dst = src where predicate, in place (dst keeps its values elsewhere)."""
    sim = active("tensor_copy_predicated").begin("tensor_copy_predicated")
    win = mask_window(mask)
    out = _destination(dst, win, "tensor_copy_predicated")
    s = sim.operand(src, win)
    pred = sim.operand(predicate, win)
    if isinstance(s, Access) and isinstance(pred, Access) and MemorySpace.PSUM == s.space == pred.space:
        raise NKICompileError("tensor_copy_predicated", "src and predicate cannot both be in PSUM")
    values = sim.compute("predicated", (bool(reverse_pred),), [out, s, pred])
    sim.write(out, values, "tensor_copy_predicated")
    reads = [r for r in (out, s, pred) if isinstance(r, Access)]
    sim.emit("tensor_copy_predicated", Engine.VECTOR, out.tensor.dtype.name, out.partitions, out.free, out.size,
             reads, [out], sim.line_no, sim.ctx)


def _destination(dst: Any, win: Any, op: str) -> Access:
    if isinstance(dst, View):
        return dst.base.access(dst.items, win, op)
    if isinstance(dst, Tensor):
        return dst.whole(win, op)
    raise NKICompileError(op, f"dst must be a tile, got {type(dst).__name__}")


# -- GpSimd Engine ------------------------------------------------------------------------------------------
_PARTITION_OPS = {"add", "maximum", "minimum", "bitwise_or", "bitwise_and", "average"}


@instruction("tensor_partition_reduce")
def tensor_partition_reduce(op: Any, data: Any, *, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    """Reduce across partitions: the result has one partition (GpSimd Engine)."""
    sim = active("tensor_partition_reduce").begin("tensor_partition_reduce")
    acc = sim.operand(data, mask_window(mask))
    name = op if isinstance(op, str) else alu.op_name(op, "tensor_partition_reduce")
    if name not in _PARTITION_OPS:
        raise NKICompileError("tensor_partition_reduce", f"operator {name} is not one of add, average, max, min, "
                                                         "bitwise_or, bitwise_and")
    d = result_dtype(dtype, acc)
    values = sim.compute("partition_reduce", (name, d.name), [acc])
    return sim.result(values, d, engine=Engine.GPSIMD, reads=[acc], partitions=acc.partitions, free=acc.free,
                      flops=acc.size)


# -- DMA ----------------------------------------------------------------------------------------------------
@instruction("dma_transpose")
def dma_transpose(src: Any, *, axes: Any = None, dtype: Any = None, dge_mode: Any = None, mask: Any = None,
                  _op: str = "dma_transpose", **_: Any) -> Any:
    """A transposing DMA (HBM or SBUF source) into a fresh SBUF tile: 2-D swaps the axes, 3-D/4-D permute
    them by `axes`."""
    sim = active(_op).begin(_op)
    acc = sim.operand(src, mask_window(mask), on_chip=False)
    shape = tuple(acc.shape)
    if axes is not None:
        axes = tuple(int(a) for a in axes)
        if sorted(axes) != list(range(len(shape))):
            raise NKICompileError(_op, f"axes {axes} are not a permutation of the {len(shape)} source axes")
        full = tuple(shape[a] for a in axes)
    elif len(shape) == 2:
        full = (shape[1], shape[0])
    else:
        raise NKICompileError(_op, f"a {len(shape)}-D source needs axes=")
    d = dt.as_dtype(dtype) if dtype is not None else acc.tensor.dtype
    values = sim.compute("transpose_axes", (axes, d.name), [acc])
    return sim.result(values, d, engine=Engine.DMA, reads=[acc], full_shape=full,
                      allowed=frozenset((MemorySpace.SBUF,)), flops=0)


@instruction("load_transpose2d")
def load_transpose2d(src: Any, mask: Any = None, dtype: Any = None, **_: Any) -> Any:
    """nl.load_transpose2d: a 2-D HBM tensor loaded into SBUF transposed (a transposing DMA)."""
    return dma_transpose(src, dtype=dtype, mask=mask, _op="load_transpose2d")


# -- nl.rand -------------------------------------------------------------------------------------------------
@instruction("rand")
def rand(shape: Any, dtype: Any = None, **_: Any) -> Any:
    """nl.rand: uniform [0, 1) values in a new SBUF tile (the GpSimd Engine's random number generator, which
    nisa.rng names beside the Vector Engine's)."""
    sim = active("rand").begin("rand")
    shape = tuple(int(s) for s in shape)
    d = dt.as_dtype(dtype) if dtype is not None else dt.float32
    values = sim.compute("constant", (d.name,), [_draws(sim, shape).astype(d.storage)])
    return sim.result(values, d, engine=Engine.GPSIMD, reads=[])


# -- NeuronCore-v4 only -------------------------------------------------------------------------------------
@instruction("exponential")
def exponential(src: Any, *, max_value: Any = 0.0, reduce_res: Any = None, reduce_init: Any = 0.0,
                dtype: Any = None, **_: Any) -> Any:
    """exp(src - max_value) on the Vector Engine, with the running sum into reduce_res (NeuronCore-v4)."""
    sim = active("exponential").begin("exponential")
    require_core(sim, "exponential", 4)
    acc = sim.operand(src)
    m = sim.operand(max_value)
    init = sim.operand(reduce_init)
    d = result_dtype(dtype, acc)
    values, red = sim.compute("exponential", (d.name,), [acc, m, init])
    tile = sim.result(values, d, engine=Engine.VECTOR, reads=[r for r in (acc, m, init) if isinstance(r, Access)],
                      partitions=acc.partitions, free=acc.free, flops=2 * acc.size)
    if reduce_res is not None:
        _f._side_write(sim, reduce_res, red, "exponential")
    return tile


FUNCTIONAL = {
    "tensor_scalar_reduce": tensor_scalar_reduce, "max8": max8, "nc_find_index8": nc_find_index8,
    "nc_match_replace8": nc_match_replace8, "dropout": dropout, "bn_stats": bn_stats, "bn_aggr": bn_aggr,
    "tensor_copy_predicated": tensor_copy_predicated, "tensor_partition_reduce": tensor_partition_reduce,
    "dma_transpose": dma_transpose,
}
LANGUAGE = {"rand": rand, "load_transpose2d": load_transpose2d}


# -- top-level nki.isa: destination first -------------------------------------------------------------------
def _into(dst: Any, tile: Any, op: str) -> None:

    isa_dst._into(dst, tile, op)


def _tensor_scalar_reduce(dst: Any, data: Any, op0: Any, operand0: Any, reduce_op: Any, reduce_res: Any = None,
                          reverse0: bool = False, reduce_cmd: Any = None, reduce_init: Any = None,
                          reduce_res_negate: bool = False, name: Any = None, **_: Any) -> None:
    _into(dst, tensor_scalar_reduce(data=data, op0=op0, operand0=operand0, reduce_op=reduce_op,
                                    reduce_res=reduce_res, reverse0=reverse0, dtype=dst.dtype,
                                    reduce_init=reduce_init, reduce_res_negate=reduce_res_negate),
          "tensor_scalar_reduce")


def _max8(dst: Any, src: Any, name: Any = None, **_: Any) -> None:
    _into(dst, max8(src=src, dtype=dst.dtype), "max8")


def _nc_find_index8(dst: Any, data: Any, vals: Any, name: Any = None, **_: Any) -> None:
    _into(dst, nc_find_index8(data=data, vals=vals, dtype=dst.dtype), "nc_find_index8")


def _nc_match_replace8(dst: Any, data: Any, vals: Any, imm: Any, dst_idx: Any = None, name: Any = None,
                       **_: Any) -> None:
    _into(dst, nc_match_replace8(data=data, vals=vals, imm=imm, dst_idx=dst_idx, dtype=dst.dtype),
          "nc_match_replace8")


def _dropout(dst: Any, data: Any, prob: Any, name: Any = None, **_: Any) -> None:
    _into(dst, dropout(data, prob, dtype=dst.dtype), "dropout")


def _bn_stats(dst: Any, data: Any, name: Any = None, **_: Any) -> None:
    _into(dst, bn_stats(data, dtype=dst.dtype), "bn_stats")


def _bn_aggr(dst: Any, data: Any, name: Any = None, **_: Any) -> None:
    _into(dst, bn_aggr(data, dtype=dst.dtype), "bn_aggr")


def _tensor_copy_predicated(dst: Any, src: Any, predicate: Any, reverse_pred: bool = False, name: Any = None,
                            **_: Any) -> None:
    tensor_copy_predicated(src=src, dst=dst, predicate=predicate, reverse_pred=reverse_pred)


def _tensor_partition_reduce(dst: Any, op: Any, data: Any, name: Any = None, **_: Any) -> None:
    _into(dst, tensor_partition_reduce(op, data, dtype=dst.dtype), "tensor_partition_reduce")


def _dma_transpose(dst: Any, src: Any, axes: Any = None, dge_mode: Any = None, name: Any = None, **_: Any) -> None:
    _into(dst, dma_transpose(src, axes=axes, dtype=dst.dtype), "dma_transpose")


def _exponential(dst: Any, src: Any, max_value: Any = 0.0, reduce_res: Any = None, reduce_cmd: Any = None,
                 reduce_init: Any = 0.0, name: Any = None, **_: Any) -> None:
    _into(dst, exponential(src, max_value=max_value, reduce_res=reduce_res, reduce_init=reduce_init,
                           dtype=dst.dtype), "exponential")


DESTINATION = {
    "tensor_scalar_reduce": _tensor_scalar_reduce, "max8": _max8, "nc_find_index8": _nc_find_index8,
    "nc_match_replace8": _nc_match_replace8, "dropout": _dropout, "bn_stats": _bn_stats, "bn_aggr": _bn_aggr,
    "tensor_copy_predicated": _tensor_copy_predicated, "tensor_partition_reduce": _tensor_partition_reduce,
    "dma_transpose": _dma_transpose, "exponential": _exponential,
}


# -- accumulating and selecting instructions (NKI 0.6) --------------------------------------------------------
class _Fp32(dt.DType):
    """nl.fp32: float32, with the limits kernels pass as fill values (`nl.fp32.min`, the FP32_MIN that
    range_select and affine_select require)."""

    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


fp32 = _Fp32("float32", np.dtype(np.float32), 4)
_LOAD_REDUCE, _REDUCE = 4, 2  # isa.reduce_cmd values


def _write_or_return(sim: Any, dst: Any, tile: Any, op: str) -> Any:
    if dst is None:
        return tile
    _into(dst, tile, op)
    return None


@instruction("tensor_scalar_cumulative")
def tensor_scalar_cumulative(dst: Any = None, src: Any = None, op0: Any = None, op1: Any = None, imm0: Any = 0.0,
                             imm1: Any = None, reduce_cmd: Any = 3, reverse0: bool = False, dtype: Any = None,
                             name: Any = None, **_: Any) -> Any:
    """A running op1-reduction of (src op0 imm0) along the free axis, into dst (both generations write dst).
    `reduce_cmd.reduce` continues from the register the previous cumulative instruction left: the last
    column it wrote (a 2-D destination)."""
    sim = active("tensor_scalar_cumulative").begin("tensor_scalar_cumulative")
    acc = sim.operand(src)
    i0 = sim.operand(imm0)
    f0 = alu.op_name(op0, "tensor_scalar_cumulative")
    f1 = alu.op_name(op1, "tensor_scalar_cumulative")
    if f1 not in ("add", "subtract", "multiply", "maximum", "minimum"):
        raise NKICompileError("tensor_scalar_cumulative", f"op1 must be add, subtract, multiply, max or min, not {f1}")
    cmd = int(reduce_cmd) if reduce_cmd is not None else 3
    start = None
    if cmd == _LOAD_REDUCE:
        if imm1 is None:
            raise NKICompileError("tensor_scalar_cumulative", "reduce_cmd.load_reduce loads imm1, which is None")
        start = sim.operand(imm1)
    elif cmd == _REDUCE:
        register = getattr(sim, "nki_vector_register", None)
        if register is None:
            raise NKICompileError("tensor_scalar_cumulative", "reduce_cmd.reduce continues the accumulator, but no "
                                                              "earlier cumulative instruction left one")
        start = sim.operand(register)
    d = dt.as_dtype(dst.dtype) if dst is not None else result_dtype(dtype, acc)
    values = sim.compute("cumulative", (f0, bool(reverse0), f1, d.name), [acc, i0, start])
    reads = [r for r in (acc, i0, start) if isinstance(r, Access)]
    tile = sim.result(values, d, engine=Engine.VECTOR, reads=reads, full_shape=acc.full_shape,
                      partitions=acc.partitions, free=acc.free, flops=2 * acc.size)
    out = _write_or_return(sim, dst, tile, "tensor_scalar_cumulative")
    target = dst if dst is not None else tile
    if isinstance(target, Tensor) and len(target.shape) == 2:
        width = target.shape[1]
        sim.nki_vector_register = View(target, (slice(None), slice(width - 1, width)))
    return out


def _mask_values(mask: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A predicate over tile positions (`iy < ix`) as a boolean array of the tile's shape."""

    if mask.kind == "leaf":
        e = mask.expr
        left = e.materialize() if isinstance(e, (IndexExpr, ArrayIndex)) else np.asarray(e)
        return np.broadcast_to(_CMP[mask.cmp](left, mask.value), shape)
    parts = [_mask_values(m, shape) for m in mask.parts]
    if mask.kind == "and":
        return parts[0] & parts[1]
    if mask.kind == "or":
        return parts[0] | parts[1]
    return ~parts[0]


@instruction("affine_select")
def affine_select(pred: Any, on_true_tile: Any, on_false_value: Any, *, dtype: Any = None, mask: Any = None,
                  **_: Any) -> Any:
    """neuronxcc form: on_true_tile where the index predicate holds, else on_false_value (GpSimd Engine)."""
    sim = active("affine_select").begin("affine_select")
    acc = sim.operand(on_true_tile)
    predicate = _mask_values(pred, tuple(acc.shape)).astype(np.uint8)
    return _affine(sim, acc, predicate, on_false_value, dtype)


def _affine(sim: Any, acc: Access, predicate: np.ndarray, on_false: Any, dtype: Any) -> Any:
    d = result_dtype(dtype, acc)
    values, _max = sim.compute("affine_select", (False, d.name), [acc, predicate, float(on_false)])
    return sim.result(values, d, engine=Engine.GPSIMD, reads=[acc], full_shape=acc.full_shape,
                      partitions=acc.partitions, free=acc.free, flops=acc.size)


def _affine_select(dst: Any, pattern: Any, channel_multiplier: Any, on_true_tile: Any, on_false_value: Any,
                   cmp_op: Any = None, offset: Any = 0, name: Any = None, **_: Any) -> None:
    """nki.isa form: the predicate is cmp_op(offset + partition * channel_multiplier + sum(step * index), 0)
    over the 4-D pattern [[step_w, num_w], ..., [step_x, num_x]] (padded with size-1 dimensions)."""
    sim = active("affine_select").begin("affine_select")
    acc = sim.operand(on_true_tile)
    dims = [[0, 1]] * (4 - len(pattern)) + [list(p) for p in pattern]
    value = np.full((acc.partitions, 1, 1, 1, 1), float(offset)) + \
        np.arange(acc.partitions).reshape(-1, 1, 1, 1, 1) * float(channel_multiplier)
    for axis, (step, num) in enumerate(dims):
        shape = [1, 1, 1, 1, 1]
        shape[axis + 1] = int(num)
        value = value + np.arange(int(num)).reshape(shape) * float(step)
    cmp = alu.op_name(cmp_op, "affine_select") if cmp_op is not None else "equal"
    flat = value.reshape(acc.partitions, -1)
    if flat.shape[1] != acc.free:
        raise NKICompileError("affine_select", f"the pattern covers {flat.shape[1]} elements per partition, the tile "
                                               f"has {acc.free}")
    predicate = alu.binary(cmp, "affine_select")(flat, 0).astype(np.uint8).reshape(acc.shape)
    _into(dst, _affine(sim, acc, predicate, on_false_value, dst.dtype), "affine_select")


@instruction("select_reduce")
def select_reduce(dst: Any = None, predicate: Any = None, on_true: Any = None, on_false: Any = 0.0,
                  reduce_res: Any = None, reduce_cmd: Any = 0, reduce_op: Any = None, reverse_pred: bool = False,
                  dtype: Any = None, name: Any = None, **_: Any) -> Any:
    """dst = on_true where predicate (inverted by reverse_pred), else on_false; reduce_res gets each partition's
    max (Vector Engine)."""
    sim = active("select_reduce").begin("select_reduce")
    acc = sim.operand(on_true)
    pred = sim.operand(predicate)
    other = sim.operand(on_false)
    if isinstance(pred, Access) and pred.space == acc.space == MemorySpace.PSUM:
        raise NKICompileError("select_reduce", "on_true and predicate cannot both be in PSUM")
    d = dt.as_dtype(dst.dtype) if dst is not None else result_dtype(dtype, acc)
    values, red = sim.compute("select", (bool(reverse_pred), d.name), [acc, pred, other])
    reads = [r for r in (acc, pred, other) if isinstance(r, Access)]
    tile = sim.result(values, d, engine=Engine.VECTOR, reads=reads, full_shape=acc.full_shape,
                      partitions=acc.partitions, free=acc.free, flops=acc.size)
    if reduce_res is not None:
        _f._side_write(sim, reduce_res, red, "select_reduce")
    return _write_or_return(sim, dst, tile, "select_reduce")


@instruction("range_select")
def range_select(dst: Any = None, on_true_tile: Any = None, comp_op0: Any = None, comp_op1: Any = None,
                 bound0: Any = None, bound1: Any = None, reduce_cmd: Any = 3, reduce_res: Any = None,
                 reduce_op: Any = None, range_start: Any = 0, on_false_value: Any = fp32.min, dtype: Any = None,
                 name: Any = None, **_: Any) -> Any:
    """on_true_tile where cmp0(range_start + column, bound0) and cmp1(range_start + column, bound1), else
    on_false_value; reduce_res gets each partition's max (Vector Engine, NeuronCore-v3 and newer)."""
    sim = active("range_select").begin("range_select")
    require_core(sim, "range_select", 3)
    acc = sim.operand(on_true_tile)
    b0 = sim.operand(bound0)
    b1 = sim.operand(bound1)
    c0 = alu.op_name(comp_op0, "range_select")
    c1 = alu.op_name(comp_op1, "range_select")
    d = dt.as_dtype(dst.dtype) if dst is not None else result_dtype(dtype, acc)
    values, red = sim.compute("range_select", (c0, c1, float(range_start), d.name),
                              [acc, b0, b1, float(on_false_value)])
    reads = [r for r in (acc, b0, b1) if isinstance(r, Access)]
    tile = sim.result(values, d, engine=Engine.VECTOR, reads=reads, full_shape=acc.full_shape,
                      partitions=acc.partitions, free=acc.free, flops=acc.size)
    if reduce_res is not None:
        _f._side_write(sim, reduce_res, red, "range_select")
    return _write_or_return(sim, dst, tile, "range_select")


FUNCTIONAL.update({"tensor_scalar_cumulative": tensor_scalar_cumulative, "affine_select": affine_select,
                   "select_reduce": select_reduce, "range_select": range_select})
DESTINATION.update({"tensor_scalar_cumulative": tensor_scalar_cumulative, "affine_select": _affine_select,
                    "select_reduce": select_reduce, "range_select": range_select})
LANGUAGE["fp32"] = fp32


# -- nki.language names of the 0.6 reference ----------------------------------------------------------------
_LANGUAGE_OPS: dict[str, Any] = {}


def language_ops() -> dict[str, Any]:
    """Elementwise operators and activation functions the 0.6 reference adds, made the way language.py makes
    its own (so `op=nl.abs_min` works as an operator too)."""

    if _LANGUAGE_OPS:
        return _LANGUAGE_OPS
    ops: dict[str, Any] = _LANGUAGE_OPS
    ops.update({"abs_min": nl._binary_op("abs_min"), "mod": nl._binary_op("mod"),
                           "bypass": nl._unary_op("bypass")})
    for name in ("gelu_dx", "gelu_apprx_sigmoid_dx", "silu_dx", "erf_dx"):
        ops[name] = nl._unary_op(name)

    def average(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **kw: Any) -> Any:
        return nl.mean(x, axis, dtype=dtype, keepdims=keepdims, **kw)

    alu.register(average, "average")  # tensor_partition_reduce(op=nl.average)
    ops["average"] = average

    def prelu(*_: Any, **__: Any) -> Any:
        raise NKICompileError("prelu", "nl.prelu is an activation function to pass as op= (activate2 with "
                                       "relu_param), not a function to call")

    alu.register(prelu, "prelu")
    ops["prelu"] = prelu
    ops["MemoryRegion"] = MemoryRegion
    return ops


class MemoryRegion(__import__("enum").Enum):
    """nl.MemoryRegion: the names of the memories (the simulator's buffers are nl.sbuf, nl.psum, nl.hbm ...)."""

    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"
    hbm = "hbm"


def _composite(what: str, x: Any, axis: Any, dtype: Any, keepdims: bool, epsilon: float = 0.0,
               w: Any = None) -> Any:

    sim = active(what).begin(what)
    acc = sim.operand(x)
    axes = free_axes(axis, len(acc.shape), what)
    wacc = sim.operand(w) if w is not None else None
    d = result_dtype(dtype, acc)
    values = sim.compute("composite", (what, axes, bool(keepdims), float(epsilon), d.name), [acc, wacc])
    reads = [r for r in (acc, wacc) if isinstance(r, Access)]
    return sim.result(values, d, engine=Engine.VECTOR, reads=reads, partitions=acc.partitions, free=acc.free,
                      flops=4 * acc.size)


@instruction("var")
def var(x: Any, axis: Any, dtype: Any = None, keepdims: bool = False, **_: Any) -> Any:
    return _composite("var", x, axis, dtype, keepdims)


@instruction("softmax")
def softmax(x: Any, axis: Any = -1, dtype: Any = None, **_: Any) -> Any:
    return _composite("softmax", x, axis, dtype, True)


@instruction("rms_norm")
def rms_norm(x: Any, w: Any, axis: Any, n: Any = None, epsilon: float = 1e-6, dtype: Any = None,
             compute_dtype: Any = None, **_: Any) -> Any:
    return _composite("rms_norm", x, axis, dtype, True, epsilon, w)


def nl_dropout(x: Any, rate: Any, dtype: Any = None, **_: Any) -> Any:
    """nl.dropout(x, rate): nisa.dropout with the rate as the drop probability."""
    return dropout(x, rate, dtype=dtype)


def random_seed(seed: Any) -> None:
    """nl.random_seed: later rand/dropout/rng draws come from a generator seeded with `seed` (an int)."""
    sim = active("random_seed")
    sim.nki_rng = np.random.default_rng(int(seed))


def expand_dims(x: Any, axis: int) -> Any:
    """A size-1 axis inserted (a view, no instruction)."""
    shape = list(x.shape)
    shape.insert(axis if axis >= 0 else len(shape) + 1 + axis, 1)
    return x.reshape(tuple(shape))


def _space_is(*spaces: MemorySpace) -> Any:
    def check(buffer: Any) -> bool:
        space = getattr(buffer, "space", None)
        return space in spaces

    return check


def dynamic_range(start: int, stop: int | None = None, step: int = 1) -> Any:
    """A loop that runs on the device (its bounds could be registers): simulated as a sequential loop over
    integer bounds; register bounds are refused."""

    bounds = (start,) if stop is None else (start, stop, step)
    if isinstance(step, VirtualRegister):
        raise NKICompileError("dynamic_range", "the step must be a compile-time integer, not a register")
    # A register bound is the value it holds when the loop starts (register_load marks such kernels).
    return nl.sequential_range(*(int(b) for b in bounds))


def fori_loop(lower: Any, upper: Any, body_fun: Any, step: int = 1) -> None:
    """for i in range(lower, upper, step): body_fun(i), as a device loop; `i` is a register holding the
    iteration value (bounds may be registers: see dynamic_range)."""
    for i in dynamic_range(lower, upper, step):
        body_fun(VirtualRegister(i))


WHILE_LOOP_LIMIT = 1_000_000  # iterations before a while_loop is taken for a loop that never ends


def while_loop(init: Any, body_fun: Any) -> None:
    """r = init; while r != 0: r = body_fun(r). Each iteration runs as it executes (the trace shows every one);
    a condition loaded from a tile (register_load) makes the kernel data-dependent (see register_load)."""
    reg = init
    for _ in range(WHILE_LOOP_LIMIT):
        if int(reg) == 0:
            return
        reg = body_fun(reg)
        if not isinstance(reg, (VirtualRegister, int, np.integer)):
            raise NKICompileError("while_loop", "the body must return the next condition register")

    raise NKIRuntimeError("while_loop", f"the condition was still nonzero after {WHILE_LOOP_LIMIT} iterations")


class VirtualRegister:
    """nisa.register_alloc(): an engine register holding an integer. Usable wherever NKI takes one (loop
    bounds, fori_loop's induction value) and wherever Python takes an int (`range`, slices)."""

    __slots__ = ("value",)

    def __init__(self, value: int = 0) -> None:
        self.value = int(value)

    def __index__(self) -> int:
        return self.value

    __int__ = __index__

    def __repr__(self) -> str:
        return f"VirtualRegister({self.value})"


def register_alloc(x: Any = None) -> VirtualRegister:
    return VirtualRegister(int(x) if x is not None else 0)


def register_move(dst: VirtualRegister, src: Any) -> None:
    dst.value = int(src)


@instruction("register_load")
def register_load(dst: VirtualRegister, src: Any) -> None:
    """A register takes the first element of an on-chip tile. What the kernel does next then depends on a value
    computed at run time, so its recorded program is marked data-dependent (Program.indirect) and the replayer
    refuses it, as for indirect DMA."""
    sim = active("register_load").begin("register_load")
    acc = sim.operand(src)
    if not isinstance(acc, Access) or not acc.size:
        raise NKICompileError("register_load", "src must be a tile with at least one element")
    dst.value = int(sim.compute("register", (acc.tensor.dtype.name,), [acc]))
    if sim.recorder is not None:
        sim.recorder.program.indirect.append(sim.line_no)
    sim.emit("register_load", Engine.VECTOR, acc.tensor.dtype.name, acc.partitions, acc.free, acc.size, [acc], [],
             sim.line_no, sim.ctx)


def register_store(dst: Any, src: Any) -> None:
    """A tile filled with a register's value (a memset of the value it holds when the kernel runs)."""

    isa_dst.memset(dst, int(src))


LANGUAGE.update({
    "var": var, "softmax": softmax, "rms_norm": rms_norm, "dropout": nl_dropout, "random_seed": random_seed,
    "expand_dims": expand_dims, "dynamic_range": dynamic_range, "fori_loop": fori_loop, "while_loop": while_loop,
    "is_hbm": _space_is(MemorySpace.HBM), "is_sbuf": _space_is(MemorySpace.SBUF),
    "is_psum": _space_is(MemorySpace.PSUM), "is_on_chip": _space_is(MemorySpace.SBUF, MemorySpace.PSUM),
    "DType": dt.DType, "NkiTensor": Tensor, "NKIObject": object,
})


def no_reorder() -> Any:
    """`with nl.no_reorder():` keeps program order, which the simulator always does."""

    return contextlib.nullcontext()


LANGUAGE["no_reorder"] = no_reorder


# -- nki.isa names of the 0.6 reference -----------------------------------------------------------------------
class matmul_perf_mode(str, __import__("enum").Enum):  # noqa: N801 - the NKI name
    none = "none"
    double_row = "double_row"


class dma_engine(__import__("enum").IntEnum):  # noqa: N801 - the NKI name
    dma = 1
    gpsimd_dma = 2


class NkiValidationError(NKICompileError):
    """What the 0.6 API raises for a rule a call breaks (ours: NKICompileError)."""


def get_nc_sub_version() -> int:
    """The NeuronCore's minor revision: 0 on every platform we simulate (the API reference gives no values)."""
    return 0


@instruction("rand2")
def _rand2(dst: Any, min: Any, max: Any, name: Any = None, **_: Any) -> None:  # noqa: A002 - the NKI names
    """Uniform draws in [min, max) into dst (Vector Engine, NeuronCore-v4); scalar bounds."""
    sim = active("rand2").begin("rand2")
    require_core(sim, "rand2", 4)
    shape = tuple(int(s) for s in dst.shape)
    d = dt.as_dtype(dst.dtype)
    values = sim.compute("uniform", (float(min), float(max), d.name), [_draws(sim, shape)])
    _into(dst, sim.result(values, d, engine=Engine.VECTOR, reads=[]), "rand2")


@instruction("rng")
def _rng(dst: Any, engine: Any = None, name: Any = None, **_: Any) -> None:
    """32 random bits per element, truncated to dst's dtype (Vector Engine)."""
    sim = active("rng").begin("rng")
    shape = tuple(int(s) for s in dst.shape)
    rng = getattr(sim, "nki_rng", None)
    if rng is None:
        rng = sim.nki_rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, size=shape, dtype=np.uint32)
    d = dt.as_dtype(dst.dtype)
    values = sim.compute("uniform", (0.0, None, d.name), [bits])
    _into(dst, sim.result(values, d, engine=Engine.VECTOR, reads=[]), "rng")


DESTINATION.update({"register_alloc": register_alloc, "register_move": register_move,
                    "register_load": register_load, "register_store": register_store,
                    "VirtualRegister": VirtualRegister})
DESTINATION.update({"rand2": _rand2, "rng": _rng, "matmul_perf_mode": matmul_perf_mode, "dma_engine": dma_engine,
                    "NkiValidationError": NkiValidationError, "get_nc_sub_version": get_nc_sub_version})
FUNCTIONAL.update({"matmul_perf_mode": matmul_perf_mode, "dma_engine": dma_engine})


# -- access patterns ------------------------------------------------------------------------------------------
def tensor_ap(self: Tensor, pattern: Any, offset: int = 0, dtype: Any = None, **extra: Any) -> View:
    """`tensor.ap([[step, num], ...], offset=0)`: the view whose element (k0, k1, ...) is the tensor's element
    at flat (row-major) index offset + sum(step_i * k_i) (NKI access patterns, nki/deep-dives/nki-aps.rst: the
    first pair steps across partitions). Built as explicit indices, so any pattern inside the tensor works; a
    reinterpreting `dtype=` and dynamic offsets (`scalar_offset`, `vector_offset`) are refused."""
    if dtype is not None and dt.as_dtype(dtype) != self.dtype:
        raise NKICompileError("ap", "reinterpreting a tensor's bytes as another dtype (.ap(dtype=...)) is not "
                                    "simulated")
    if any(extra.get(k) is not None for k in ("scalar_offset", "vector_offset", "indirect_dim")):
        raise NKICompileError("ap", "dynamic offsets in an access pattern (registers, index tiles) are not "
                                    "simulated yet")
    pairs = [(int(step), int(num)) for step, num in pattern]
    flat = np.full([num for _, num in pairs], int(offset), dtype=np.int64)
    for axis, (step, num) in enumerate(pairs):
        shape = [1] * len(pairs)
        shape[axis] = num
        flat = flat + step * np.arange(num, dtype=np.int64).reshape(shape)
    size = int(np.prod(self.shape))
    if flat.size and (flat.min() < 0 or flat.max() >= size):
        bad = int(flat.min()) if flat.min() < 0 else int(flat.max())
        raise NKICompileError("ap", f"the access pattern reaches element {bad} of tensor {self.name!r} "
                                    f"{self.shape} ({size} elements)")

    coords = np.unravel_index(flat, self.shape)
    return View(self, tuple(ArrayIndex(c) for c in coords))


Tensor.ap = tensor_ap  # type: ignore[attr-defined]


@instruction("nc_stream_shuffle")
def nc_stream_shuffle(src: Any = None, dst: Any = None, shuffle_mask: Any = None, *, mask: Any = None,
                      name: Any = None, **_: Any) -> None:
    """Cross-partition moves within quadrants of 32 partitions (Vector Engine), written into dst in place:
    dst partition i of each quadrant takes src partition shuffle_mask[i] of that quadrant; 255 keeps dst's."""
    sim = active("nc_stream_shuffle").begin("nc_stream_shuffle")
    masks = tuple(int(m) for m in shuffle_mask)
    if len(masks) != 32 or any(not (0 <= m < 32 or m == 255) for m in masks):
        raise NKICompileError("nc_stream_shuffle", "shuffle_mask must be 32 partition numbers (0-31, or 255 to keep "
                                                   "the destination's)")
    out = _destination(dst, mask_window(mask), "nc_stream_shuffle")
    s = sim.operand(src)
    if not isinstance(s, Access):
        raise NKICompileError("nc_stream_shuffle", "src must be a tile")
    if s.tensor.dtype != out.tensor.dtype:
        raise NKICompileError("nc_stream_shuffle", f"dst ({out.tensor.dtype}) must have src's dtype ({s.tensor.dtype})")
    keeps = 255 in masks
    values = sim.compute("shuffle", (masks, tuple(out.shape)), [s, out] if keeps else [s])
    sim.write(out, values, "nc_stream_shuffle")
    sim.emit("nc_stream_shuffle", Engine.VECTOR, out.tensor.dtype.name, out.partitions, out.free, out.size,
             [s, out] if keeps else [s], [out], sim.line_no, sim.ctx)


def _nc_stream_shuffle(dst: Any, src: Any, shuffle_mask: Any, name: Any = None, **_: Any) -> None:
    nc_stream_shuffle(src=src, dst=dst, shuffle_mask=shuffle_mask)


FUNCTIONAL["nc_stream_shuffle"] = nc_stream_shuffle
DESTINATION["nc_stream_shuffle"] = _nc_stream_shuffle


@instruction("gather_flattened")
def gather_flattened(data: Any, indices: Any, axis: int = 0, dtype: Any = None, **_: Any) -> Any:
    """nl.gather_flattened: each partition picks its own elements by index (GpSimd Engine)."""
    sim = active("gather_flattened").begin("gather_flattened")
    acc = sim.operand(data)
    idx = sim.operand(indices)
    d = result_dtype(dtype, acc)
    values = sim.compute("gather_free", (d.name,), [acc, idx])
    return sim.result(values, d, engine=Engine.GPSIMD, reads=[acc, idx])


@instruction("sequence_bounds")
def sequence_bounds(segment_ids: Any = None, *, dtype: Any = None, **_: Any) -> Any:
    """[start, end) of the segment of each element of a one-partition tile of segment ids (GpSimd Engine)."""
    sim = active("sequence_bounds").begin("sequence_bounds")
    acc = sim.operand(segment_ids)
    if acc.partitions != 1:
        raise NKICompileError("sequence_bounds", f"segment_ids must have one partition, not {acc.partitions}")
    d = result_dtype(dtype, acc)
    values = sim.compute("sequence_bounds", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.GPSIMD, reads=[acc])


def _sequence_bounds(dst: Any, segment_ids: Any, name: Any = None, **_: Any) -> None:
    _into(dst, sequence_bounds(segment_ids, dtype=dst.dtype), "sequence_bounds")


LANGUAGE["gather_flattened"] = gather_flattened
FUNCTIONAL["sequence_bounds"] = sequence_bounds
DESTINATION["sequence_bounds"] = _sequence_bounds


@instruction("local_gather")
def local_gather(src_buffer: Any, index: Any, num_elem_per_idx: int = 1, num_valid_indices: Any = None, *,
                 dtype: Any = None, **_: Any) -> Any:
    """Per GpSimd core (16 partitions), a gather from its own partitions by element offsets (GpSimd Engine)."""
    sim = active("local_gather").begin("local_gather")
    if int(num_elem_per_idx) not in (1, 2, 4, 8, 16, 32):
        raise NKICompileError("local_gather", f"num_elem_per_idx must be 1, 2, 4, 8, 16 or 32, not {num_elem_per_idx}")
    acc = sim.operand(src_buffer)
    idx = sim.operand(index)
    d = acc.tensor.dtype  # the API casts nothing
    values = sim.compute("local_gather", (int(num_elem_per_idx), int(num_valid_indices or 0), d.name), [acc, idx])
    return sim.result(values, d, engine=Engine.GPSIMD, reads=[acc, idx])


def _local_gather(dst: Any, src_buffer: Any, index: Any, num_elem_per_idx: int = 1, num_valid_indices: Any = None,
                  name: Any = None, **_: Any) -> None:
    _into(dst, local_gather(src_buffer, index, num_elem_per_idx, num_valid_indices), "local_gather")


FUNCTIONAL["local_gather"] = local_gather
DESTINATION["local_gather"] = _local_gather


@instruction("activate2")
def activate2(dst: Any, op: Any, data: Any, imm0: Any, imm1: Any, op0: Any, op1: Any, relu_param: Any = 0.0,
              reverse0: bool = False, reverse1: bool = False, reduce_op: Any = None, reduce_res: Any = None,
              reduce_cmd: Any = None, name: Any = None, **_: Any) -> None:
    """op((data op0 imm0) op1 imm1) into dst, reducing into reduce_res (Scalar Engine, NeuronCore-v4)."""
    sim = active("activate2").begin("activate2")
    require_core(sim, "activate2", 4)
    acc = sim.operand(data)
    i0 = sim.operand(imm0)
    i1 = sim.operand(imm1)
    names = [alu.op_name(o, "activate2") if o is not None else "bypass" for o in (op0, op1)]
    fn = alu.op_name(op, "activate2")
    rname = _reduce_name(reduce_op, "activate2") if reduce_res is not None and reduce_op is not None else None
    d = dt.as_dtype(dst.dtype)
    if not isinstance(relu_param, (int, float, np.number)):
        raise NKICompileError("activate2", "a per-partition relu_param is not simulated; give a number")
    values, red = sim.compute("activate2", ((names[0], bool(reverse0)), (names[1], bool(reverse1)), fn, rname,
                                            float(relu_param), d.name), [acc, i0, i1])
    reads = [r for r in (acc, i0, i1) if isinstance(r, Access)]
    tile = sim.result(values, d, engine=Engine.SCALAR, reads=reads, full_shape=acc.full_shape,
                      partitions=acc.partitions, free=acc.free, flops=acc.size)
    if rname is not None:
        _f._side_write(sim, reduce_res, red, "activate2")
    _into(dst, tile, "activate2")


DESTINATION["activate2"] = activate2


@instruction("nc_n_gather")
def _nc_n_gather(dst: Any, data: Any, indices: Any, name: Any = None, **_: Any) -> None:
    """Each partition gathers from its own flattened free elements by uint32 indices (GpSimd Engine)."""
    sim = active("nc_n_gather").begin("nc_n_gather")
    acc = sim.operand(data)
    idx = sim.operand(indices)
    d = dt.as_dtype(dst.dtype)
    values = sim.compute("gather_free", (d.name,), [acc, idx])
    _into(dst, sim.result(values, d, engine=Engine.GPSIMD, reads=[acc, idx]), "nc_n_gather")


@instruction("nonzero_with_count")
def _nonzero_with_count(dst: Any, src: Any, index_offset: int = 0, padding_val: Any = -1, name: Any = None,
                        **_: Any) -> None:
    """Positions of the nonzero elements, padding and their count, on partitions 0, 16, ..., 112 only (each
    GpSimd core's first partition); dst's other partitions are left as they are (GpSimd Engine, NeuronCore-v3+)."""
    sim = active("nonzero_with_count").begin("nonzero_with_count")
    require_core(sim, "nonzero_with_count", 3)
    for t, what in ((src, "src"), (dst, "dst")):
        if not isinstance(t, Tensor) or len(t.shape) != 2:
            raise NKICompileError("nonzero_with_count", f"{what} must be a 2-D tile")
    if dst.shape[1] != src.shape[1] + 1:
        raise NKICompileError("nonzero_with_count", f"dst needs one more element per partition than src "
                                                    f"({src.shape[1] + 1}), has {dst.shape[1]}")
    rows = slice(0, src.shape[0], 16)
    acc = sim.operand(View(src, (rows, slice(None))))
    d = dt.as_dtype(dst.dtype)
    values = sim.compute("nonzero", (int(index_offset), float(padding_val), d.name), [acc])
    _into(View(dst, (rows, slice(None))), sim.result(values, d, engine=Engine.GPSIMD, reads=[acc]),
          "nonzero_with_count")


DESTINATION["nc_n_gather"] = _nc_n_gather
DESTINATION["nonzero_with_count"] = _nonzero_with_count


@instruction("set_rng_seed")
def _set_rng_seed(src_seeds: Any, name: Any = None, **_: Any) -> None:
    """Later random draws (rand, dropout, rng, rand2) come from a generator seeded with the tile's values. Our
    generator is numpy's, not the engines' XORWOW: the draws are uniform and repeatable, not the device's bits.
    The seeds are device values, so the program is marked data-dependent (as register_load)."""
    sim = active("set_rng_seed").begin("set_rng_seed")
    acc = sim.operand(src_seeds)
    if not isinstance(acc, Access) or not acc.size:
        raise NKICompileError("set_rng_seed", "src_seeds must be a tile with at least one element")
    sim.compute("register", (acc.tensor.dtype.name,), [acc])
    seeds = np.asarray(sim.read(acc, "set_rng_seed")).astype(np.int64).reshape(-1) & 0xFFFFFFFF
    sim.nki_rng = np.random.default_rng([int(v) for v in seeds])
    if sim.recorder is not None:
        sim.recorder.program.indirect.append(sim.line_no)
    sim.emit("set_rng_seed", Engine.VECTOR, acc.tensor.dtype.name, acc.partitions, acc.free, acc.size, [acc], [],
             sim.line_no, sim.ctx)


DESTINATION["set_rng_seed"] = _set_rng_seed
