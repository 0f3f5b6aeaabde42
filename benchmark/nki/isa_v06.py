"""Instructions of the NKI 0.6 API reference (SDK 2.32) the simulator did not have (issue 34).

Each exists twice, like the rest of the simulator: a functional form for `neuronxcc.nki.isa` / `nl` (returns
its result tile; `FUNCTIONAL`, `LANGUAGE`) and the destination-first form of top-level `nki.isa` (writes `dst`;
`DESTINATION`). namespaces.py adds them to the modules it builds. What each computes is in semantics_v06.py;
the engine of each is the one its API page names, and the performance model prices every row by engine
(benchmark/perf/costs.py), so none is free.

Instructions that the API reference marks "Available only on NeuronCore-v4 and newer" are refused on trn1
and trn2 with a message that says so (`require_core`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmark.nki import alu
from benchmark.nki import dtypes as dt
from benchmark.nki import isa as _f
from benchmark.nki.errors import NKICompileError
from benchmark.nki.operands import mask_window, result_dtype
from benchmark.nki.runtime import active, instruction
from benchmark.nki.tensors import Access, Tensor, View
from benchmark.nki.trace import Engine, MemorySpace

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
                      free=acc.free, flops=2 * acc.size)
    if reduce_res is not None:
        _f._side_write(sim, reduce_res, red, "tensor_scalar_reduce")
    return tile


@instruction("max8")
def max8(*, src: Any, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("max8").begin("max8")
    acc = sim.operand(src, mask_window(mask))
    d = result_dtype(dtype, acc)
    values = sim.compute("max8", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc], free=acc.free, flops=acc.size)


@instruction("nc_find_index8")
def nc_find_index8(*, data: Any, vals: Any, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("nc_find_index8").begin("nc_find_index8")
    acc = sim.operand(data, mask_window(mask))
    v = sim.operand(vals)
    d = dt.as_dtype(dtype) if dtype is not None else dt.uint32
    if d.name not in ("uint16", "uint32"):
        raise NKICompileError("nc_find_index8", f"the index output is uint16 or uint32, not {d.name}")
    values = sim.compute("find_index8", (d.name,), [acc, v])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc, v], free=acc.free, flops=acc.size)


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
                      free=acc.free, flops=acc.size)
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
                      window=win, full_shape=acc.full_shape)


@instruction("bn_stats")
def bn_stats(data: Any, *, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("bn_stats").begin("bn_stats")
    acc = sim.operand(data, mask_window(mask))
    if acc.free > 512:
        raise NKICompileError("bn_stats", f"bn_stats reads at most 512 elements per partition "
                                          f"(nl.tile_size.bn_stats_fmax), got {acc.free}")
    d = result_dtype(dtype, acc)
    values = sim.compute("bn_stats", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc], free=acc.free, flops=acc.size)


@instruction("bn_aggr")
def bn_aggr(data: Any, *, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
    sim = active("bn_aggr").begin("bn_aggr")
    acc = sim.operand(data, mask_window(mask))
    d = result_dtype(dtype, acc)
    values = sim.compute("bn_aggr", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc], free=acc.free, flops=acc.size)


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
    """nl.rand: uniform [0, 1) values in a new SBUF tile (the engines' random number generator)."""
    sim = active("rand").begin("rand")
    shape = tuple(int(s) for s in shape)
    d = dt.as_dtype(dtype) if dtype is not None else dt.float32
    values = sim.compute("constant", (d.name,), [_draws(sim, shape).astype(d.storage)])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[])


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
                      free=acc.free, flops=2 * acc.size)
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
    from benchmark.nki import isa_dst

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
