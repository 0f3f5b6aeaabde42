"""What the instructions added for NKI 0.6 compute (issue 34): one *kind* function each, like semantics.py.

Importing this module registers them into `semantics.KINDS` (isa_v06.py and replay.py import it), so the live
simulator and the replayer share them. Semantics come from the SDK 2.32 `nki.isa` / `nki.language` API reference (the docstrings
of nki/api/nki/isa/__init__.py in aws-neuron-sdk) and the NKI 0.6 release notes (release-notes/components/
nki.rst: nc_find_index8's all-ones unmatched slots and successive duplicates, nc_match_replace8's reverse order).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError
from engine.platforms.nki.simulator.semantics import alu, mx, semantics
from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.trace import Engine


def _sem() -> Any:
    return semantics


def _rows(x: np.ndarray) -> np.ndarray:
    """A tile as (partitions, elements per partition), computed in float32 like the engines."""
    x = np.asarray(_sem().as_fp32(x))
    return x.reshape(x.shape[0], -1) if x.ndim else x.reshape(1, 1)


_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def scalar_reduce(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """tensor_scalar_reduce: result = data op0 operand0 (operand0 a scalar or one value per partition) and the
    free-axis reduction of the float32 result, seeded with the accumulator (reset, or reduce_init).
    Operands: data, operand0, reduce_init (None unless load_reduce). params: (op0, reverse0, reduce_op,
    negate, dtype)."""
    op0, reverse0, reduce_op, negate, d = params
    s = _sem()
    x = np.asarray(s.as_fp32(v[0]))
    x2 = _rows(x)
    o = s.per_partition(v[1], tiles[1], "tensor_scalar_reduce", "operand0")
    fn = alu.binary(op0, "tensor_scalar_reduce")
    out = np.asarray(fn(o, x2) if reverse0 else fn(x2, o), dtype=np.float32)
    red = alu.reducer(reduce_op, "tensor_scalar_reduce")(out, axis=1, keepdims=True)
    if v[2] is not None:
        init = s.per_partition(v[2], tiles[2], "tensor_scalar_reduce", "reduce_init")
        red = alu.binary(reduce_op, "tensor_scalar_reduce")(np.broadcast_to(init, red.shape), red)
    if negate:
        red = -red
    return s.to_dtype(out.reshape(x.shape), dt.as_dtype(d)), red


def max8(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """The 8 largest values of each partition, in descending order. params: (dtype,)."""
    x = _rows(v[0])
    if not 8 <= x.shape[1] <= 16384:
        raise NKICompileError("max8", f"max8 reads 8 to 16384 elements per partition, got {x.shape[1]}")
    top = -np.sort(-x, axis=1, kind="stable")[:, :8]
    return _sem().to_dtype(top, dt.as_dtype(params[0]))


def find_index8(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """For each of the 8 values of a partition, the index of its first occurrence in the data; a value
    repeated in `vals` takes the next occurrence each time; a value not found gives all ones.
    params: (index dtype,)."""
    data = _rows(v[0])
    vals = _rows(v[1])
    if vals.shape[1] != 8:
        raise NKICompileError("nc_find_index8", f"vals must have 8 elements per partition, got {vals.shape[1]}")
    d = dt.as_dtype(params[0])
    out = np.full((data.shape[0], 8), np.iinfo(d.storage).max, dtype=d.storage)
    for p in range(data.shape[0]):
        used: dict[float, int] = {}
        for k in range(8):
            hits = np.flatnonzero(data[p] == vals[p, k])
            n = used.get(float(vals[p, k]), 0)
            if n < len(hits):
                out[p, k] = hits[n]
            used[float(vals[p, k])] = n + 1
    return out


def match_replace8(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """Replace the first occurrence of each of the 8 values with `imm`, the values taken in reverse order
    (vals[7] first), so duplicates pair with successive occurrences from the highest slot down; returns the
    replaced data and the matched indices (all ones where nothing matched). params: (imm, dtype, index
    dtype)."""
    imm, d, idx_d = params
    x = np.asarray(_sem().as_fp32(v[0]))
    data = _rows(x).copy()
    vals = _rows(v[1])
    if vals.shape[1] != 8:
        raise NKICompileError("nc_match_replace8", f"vals must have 8 elements per partition, got {vals.shape[1]}")
    index_dtype = dt.as_dtype(idx_d).storage
    idx = np.full((data.shape[0], 8), np.iinfo(index_dtype).max, dtype=index_dtype)
    for p in range(data.shape[0]):
        taken = np.zeros(data.shape[1], dtype=bool)
        for k in range(7, -1, -1):
            hits = np.flatnonzero((data[p] == vals[p, k]) & ~taken)
            if len(hits):
                taken[hits[0]] = True
                idx[p, k] = hits[0]
        data[p, taken] = imm
    return _sem().to_dtype(data.reshape(x.shape), dt.as_dtype(d)), idx


def keep_where(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """dropout: data where the random draw (a constant fixed when the kernel ran) is at or above the drop
    probability, else 0. Operands: data, prob (scalar or per partition), draws. params: (dtype,)."""
    s = _sem()
    x = np.asarray(s.as_fp32(v[0]))
    x2 = _rows(x)
    prob = s.per_partition(v[1], tiles[1], "dropout", "prob")
    draws = np.asarray(v[2]).reshape(x2.shape)
    return s.to_dtype(np.where(draws >= prob, x2, 0).reshape(x.shape), dt.as_dtype(params[0]))


def partition_reduce(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """tensor_partition_reduce: reduce across partitions (axis 0), keeping a partition axis of 1.
    params: (operator, dtype); "average" is the mean."""
    op, d = params
    x = np.asarray(_sem().as_fp32(v[0]))
    if op == "average":
        out = x.mean(axis=0, keepdims=True)
    else:
        out = alu.reducer(op, "tensor_partition_reduce")(x, axis=0, keepdims=True)
    return _sem().to_dtype(out, dt.as_dtype(d))


def bn_stats(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """Per partition: (count, mean, variance * count) of the even elements, then of the odd ones.
    params: (dtype,)."""
    x = _rows(v[0]).astype(np.float64)
    out = np.zeros((x.shape[0], 6))
    for k, part in enumerate((x[:, 0::2], x[:, 1::2])):
        n = part.shape[1]
        mean = part.mean(axis=1) if n else 0.0
        out[:, 3 * k] = n
        out[:, 3 * k + 1] = mean
        out[:, 3 * k + 2] = ((part - np.reshape(mean, (-1, 1))) ** 2).sum(axis=1) if n else 0.0
    return _sem().to_dtype(out.astype(np.float32), dt.as_dtype(params[0]))


def bn_aggr(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """Combine (count, mean, variance * count) triples into each partition's mean and variance.
    params: (dtype,)."""
    x = _rows(v[0]).astype(np.float64)
    if x.shape[1] % 3:
        raise NKICompileError("bn_aggr", f"bn_aggr reads (count, mean, variance*count) triples; {x.shape[1]} "
                                         "elements per partition is not a multiple of 3")
    t = x.reshape(x.shape[0], -1, 3)
    count = t[:, :, 0].sum(axis=1)
    safe = np.where(count > 0, count, 1)
    mean = (t[:, :, 0] * t[:, :, 1]).sum(axis=1) / safe
    m2 = (t[:, :, 2] + t[:, :, 0] * (t[:, :, 1] - mean[:, None]) ** 2).sum(axis=1)
    out = np.stack([mean, m2 / safe], axis=1).astype(np.float32)
    return _sem().to_dtype(out, dt.as_dtype(params[0]))


def predicated(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """tensor_copy_predicated: src where the predicate is non-zero (inverted with reverse_pred), else what
    dst holds. Operands: dst's current values, src (tile or scalar), predicate. params: (reverse,)."""
    cur = np.asarray(v[0])
    pred = np.asarray(v[2]).reshape(cur.shape) != 0
    if params[0]:
        pred = ~pred
    src = np.asarray(v[1]).reshape(cur.shape) if tiles[1] else v[1]
    return np.where(pred, src, cur)


def transpose_axes(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """dma_transpose / load_transpose2d: the operand with its axes permuted (2-D: swapped).
    params: (axes or None, dtype)."""
    axes, d = params
    x = np.asarray(v[0])
    out = x.T if axes is None else np.transpose(x, axes)
    return _sem().to_dtype(out, dt.as_dtype(d))


def exponential(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """exp(src - max_value) and its free-axis sum seeded with reduce_init. Operands: src, max_value,
    reduce_init. params: (dtype,)."""
    s = _sem()
    x = np.asarray(s.as_fp32(v[0]))
    m = s.per_partition(v[1], tiles[1], "exponential", "max_value")
    out = np.exp(_rows(x) - m).astype(np.float32)
    init = s.per_partition(v[2], tiles[2], "exponential", "reduce_init")
    red = out.sum(axis=1, keepdims=True) + init
    return s.to_dtype(out.reshape(x.shape), dt.as_dtype(params[0])), np.asarray(red, dtype=np.float32)


def cumulative(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """tensor_scalar_cumulative: reg = op1(data[:, i] op0 imm0, reg), out[:, i] = reg, along the free axis; reg
    starts at op1's identity, at imm1 (load_reduce) or at the register an earlier instruction left (an operand:
    the last column it wrote). Operands: src, imm0, start (None: identity). params: (op0, reverse0, op1,
    dtype)."""
    op0, reverse0, op1, d = params
    s = _sem()
    x = np.asarray(s.as_fp32(v[0]))
    x2 = _rows(x)
    imm0 = s.per_partition(v[1], tiles[1], "tensor_scalar_cumulative", "imm0")
    f0 = alu.binary(op0, "tensor_scalar_cumulative")
    f1 = alu.binary(op1, "tensor_scalar_cumulative")
    pre = np.asarray(f0(imm0, x2) if reverse0 else f0(x2, imm0), dtype=np.float32)
    start = _IDENTITY.get(op1, 0.0) if v[2] is None else s.per_partition(v[2], tiles[2], "tensor_scalar_cumulative",
                                                                          "imm1")
    reg = np.broadcast_to(np.asarray(start, dtype=np.float32).reshape(-1, 1) if np.ndim(start) else start,
                          (x2.shape[0], 1))[:, 0].astype(np.float32)
    out = np.empty_like(pre)
    for i in range(pre.shape[1]):
        reg = np.asarray(f1(pre[:, i], reg), dtype=np.float32)
        out[:, i] = reg
    return s.to_dtype(out.reshape(x.shape), dt.as_dtype(d))


def select(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """select_reduce / range_select / affine_select: on_true where the predicate holds, else on_false (a scalar
    or one value per partition), and the max of each partition's result. Operands: on_true, predicate (a tile
    or a constant mask), on_false. params: (reverse, dtype)."""
    reverse, d = params
    s = _sem()
    x = np.asarray(s.as_fp32(v[0]))
    x2 = _rows(x)
    pred = np.asarray(v[1]).reshape(x2.shape) != 0
    if reverse:
        pred = ~pred
    other = s.per_partition(v[2], tiles[2], "select", "on_false")
    out = np.where(pred, x2, np.asarray(other, dtype=np.float32)).astype(np.float32)
    return s.to_dtype(out.reshape(x.shape), dt.as_dtype(d)), out.max(axis=1, keepdims=True)


def range_select(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """on_true where cmp0(range_start + column, bound0) and cmp1(range_start + column, bound1), else on_false;
    and the max of each partition's result. Operands: on_true, bound0, bound1 (one value per partition),
    on_false. params: (cmp0, cmp1, range_start, dtype)."""
    cmp0, cmp1, start, d = params
    s = _sem()
    x2 = _rows(v[0])
    b0 = s.per_partition(v[1], tiles[1], "range_select", "bound0")
    b1 = s.per_partition(v[2], tiles[2], "range_select", "bound1")
    cols = (start + np.arange(x2.shape[1], dtype=np.float32))[None, :]
    pred = alu.binary(cmp0, "range_select")(cols, b0) & alu.binary(cmp1, "range_select")(cols, b1)
    return select((False, d), [v[0], pred, v[3]], (True, False, tiles[3]))


def composite(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """nl.var / nl.softmax / nl.rms_norm, computed in float32 along free axes. Operands: x, and w for rms_norm.
    params: (what, axes, keepdims, epsilon, dtype)."""
    what, axes, keepdims, eps, d = params
    s = _sem()
    x = np.asarray(s.as_fp32(v[0]), dtype=np.float32)
    axes = tuple(axes)
    if what == "var":
        out = x.var(axis=axes, keepdims=keepdims)
    elif what == "softmax":
        e = np.exp(x - x.max(axis=axes, keepdims=True))
        out = e / e.sum(axis=axes, keepdims=True)
    else:  # rms_norm: x / sqrt(mean(x^2) + eps) * w
        w = np.asarray(s.as_fp32(v[1]), dtype=np.float32) if tiles[1] else v[1]
        rms = np.sqrt((x * x).mean(axis=axes, keepdims=True) + np.float32(eps))
        out = x / rms * (np.reshape(w, (1,) * (x.ndim - np.ndim(w)) + np.shape(w)) if tiles[1] else w)
    return s.to_dtype(np.asarray(out, dtype=np.float32), dt.as_dtype(d))


def uniform(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """rand2 / rng: draws fixed when the kernel ran, scaled to [lo, hi) (rand2) or kept as 32 random bits
    truncated to the destination's width (rng). Operands: draws. params: (lo, hi or None for bits, dtype)."""
    lo, hi, d = params
    target = dt.as_dtype(d)
    if hi is None:
        bits = np.asarray(v[0], dtype=np.uint32)
        if target.storage.kind in "iu":
            return bits.astype(target.storage)  # numpy keeps the low bits
        return _sem().to_dtype(bits.astype(np.float32), target)
    return _sem().to_dtype(np.float32(lo) + (np.float32(hi) - np.float32(lo)) * np.asarray(v[0], np.float32), target)


def shuffle(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """nc_stream_shuffle: in each quadrant of 32 destination partitions, partition i takes source partition
    mask[i] of the same quadrant (255: keeps what it holds). Operands: src, and dst's current values when the
    mask keeps any. params: (mask, dst shape)."""
    mask, shape = params
    src = np.asarray(v[0])
    s2 = src.reshape(src.shape[0], -1)
    cur = np.asarray(v[1]) if len(v) > 1 else np.zeros(tuple(shape), dtype=src.dtype)
    out = cur.reshape(cur.shape[0], -1).copy()
    if s2.shape[1] != out.shape[1]:
        raise NKICompileError("nc_stream_shuffle", f"src has {s2.shape[1]} elements per partition, dst "
                                                   f"{out.shape[1]}: they must match")
    for p in range(out.shape[0]):
        m = int(mask[p % 32])
        if m == 255:
            continue
        source = (p // 32) * 32 + m
        if source >= s2.shape[0]:
            raise NKICompileError("nc_stream_shuffle", f"destination partition {p} reads source partition {source}, "
                                                       f"but src has {s2.shape[0]}")
        out[p] = s2[source]
    return out.reshape(cur.shape)


def gather_free(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """nl.gather_flattened: result[p, j] = data[p, indices[p, j]] over each partition's flattened free
    elements. Operands: data, indices. params: (dtype,)."""
    data = np.asarray(v[0])
    flat = data.reshape(data.shape[0], -1)
    idx = np.asarray(v[1]).astype(np.int64)
    idx2 = idx.reshape(idx.shape[0], -1)
    if idx2.shape[0] != flat.shape[0]:
        raise NKICompileError("gather_flattened", f"indices have {idx2.shape[0]} partitions, data {flat.shape[0]}")
    if idx2.size and (idx2.min() < 0 or idx2.max() >= flat.shape[1]):
        raise NKICompileError("gather_flattened", f"an index is outside the {flat.shape[1]} elements per partition")
    return _sem().to_dtype(np.take_along_axis(flat, idx2, axis=1).reshape(idx.shape), dt.as_dtype(params[0]))


def sequence_bounds(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """For each element of a (1, n) tile of segment ids: [start, end) of its segment (first index, last index
    + 1); id 0 is padding and gets (n, -1). Result (1, 2, n). params: (dtype,)."""
    ids = np.asarray(v[0]).reshape(-1)
    n = ids.size
    start = np.full(n, n, dtype=np.float64)
    end = np.full(n, -1, dtype=np.float64)
    for seg in np.unique(ids):
        if seg == 0:
            continue
        where = np.flatnonzero(ids == seg)
        start[where] = where[0]
        end[where] = where[-1] + 1
    return _sem().to_dtype(np.stack([start, end])[None, :, :], dt.as_dtype(params[0]))


def local_gather(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """local_gather: each group of 16 partitions (one GpSimd core) flattens its index slice partition-first,
    keeps the first `num_valid`, and gathers `num_elem` contiguous elements at each index (an element offset
    into each partition's flattened free elements) from its own 16 partitions. Result (P, num_valid * num_elem).
    Operands: src, index. params: (num_elem, num_valid or 0 for all, dtype)."""
    num_elem, num_valid, d = params
    src = np.asarray(v[0])
    flat = src.reshape(src.shape[0], -1)
    index = np.asarray(v[1]).astype(np.int64)
    index = index.reshape(index.shape[0], -1)
    parts = flat.shape[0]
    if parts % 16 or index.shape[0] != parts:
        raise NKICompileError("local_gather", f"src_buffer and index need the same partitions, a multiple of 16; got "
                                              f"{parts} and {index.shape[0]}")
    count = num_valid or index[:16].size
    out = np.empty((parts, count * num_elem), dtype=flat.dtype)
    offsets = np.arange(num_elem)
    for core in range(parts // 16):
        rows = slice(16 * core, 16 * (core + 1))
        starts = index[rows].flatten(order="F")[:count]
        cols = (starts[:, None] + offsets[None, :]).reshape(-1)
        if cols.size and (cols.min() < 0 or cols.max() >= flat.shape[1]):
            raise NKICompileError("local_gather", f"an index reaches past the {flat.shape[1]} elements per partition")
        out[rows] = flat[rows][:, cols]
    return _sem().to_dtype(out, dt.as_dtype(d))


def activate2(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """activate2: op((data op0 imm0) op1 imm1) in float32 (bypass skips a stage), and the free-axis reduction
    of the result. Operands: data, imm0, imm1. params: ((op0, reverse0), (op1, reverse1), function, reduce
    operator or None, relu_param, dtype); the function `prelu` is x where x > 0, else relu_param * x."""
    first, second, fn, reduce_op, relu_param, d = params
    s = _sem()
    pre = np.asarray(s.tensor_scalar((first, second, "float32"), v, tiles), dtype=np.float32)
    if fn == "prelu":
        out = np.where(pre > 0, pre, np.float32(relu_param) * pre).astype(np.float32)
    else:
        out = np.asarray(alu.unary(fn, "activate2")(pre), dtype=np.float32)
    red = None
    if reduce_op is not None:
        red = alu.reducer(reduce_op, "activate2")(_rows(out), axis=1, keepdims=True)
    return s.to_dtype(out, dt.as_dtype(d)), red


def nonzero(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """nonzero_with_count on the partitions it reads: the positions of the nonzero elements plus index_offset,
    then padding, then their count (one more element than the input). params: (index_offset, padding, dtype)."""
    offset, padding, d = params
    x = np.asarray(v[0]).reshape(np.shape(v[0])[0], -1)
    out = np.full((x.shape[0], x.shape[1] + 1), padding, dtype=np.int64)
    for p in range(x.shape[0]):
        hits = np.flatnonzero(x[p] != 0)
        out[p, :len(hits)] = hits + offset
        out[p, -1] = len(hits)
    return _sem().to_dtype(out, dt.as_dtype(d))


def register(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """register_load: the first element of a tile, as the integer a register holds. params: (dtype,)."""
    values = np.asarray(v[0]).reshape(-1)
    return np.int64(values[0]) if values.size else np.int64(0)


def dma_sum(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """dma_compute: the sources added elementwise in float32 (each read in its own layout, laid out as dst),
    cast to dst's dtype. params: (dst shape, dst dtype)."""
    shape, d = params
    s = _sem()
    total = np.zeros(shape, dtype=np.float32)
    for x in v:
        total += np.asarray(s.as_fp32(x), dtype=np.float32).reshape(shape)
    return s.to_dtype(total, dt.as_dtype(d))


def topk(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """topk: per group of 16 partitions, the first n elements of its snake (element j at partition j % 16,
    column j // 16), their K largest in ascending order and the snake index of each; every partition of the
    group gets the group's result. Among equal values the lower index is taken first. params: (n, K)."""
    n, k = params
    x = np.asarray(_sem().as_fp32(v[0]), dtype=np.float32)
    groups = x.shape[0] // 16
    snakes = x.reshape(groups, 16, x.shape[1]).transpose(0, 2, 1).reshape(groups, -1)[:, :n]
    order = np.argsort(-snakes, axis=1, kind="stable")[:, :k][:, ::-1]
    values = np.take_along_axis(snakes, order, axis=1)
    top = np.repeat(values, 16, axis=0)
    where = np.repeat(order.astype(np.uint32), 16, axis=0)
    return _sem().to_dtype(top, dt.bfloat16), where


def rng_state(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """rand_set_state: the state words of a uint32 tile, which seed the generator. params: ()."""
    return np.asarray(v[0]).astype(np.uint64).reshape(-1) & np.uint64(0xFFFFFFFF)


def rng_words(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """rand_get_state: the state words drawn when the kernel ran (a constant the program carries). params: ()."""
    return np.asarray(v[0], dtype=np.uint32).copy()


def barrier(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """core_barrier: computes nothing (the cores' meeting is cores.py's). params: (the data tensor's dtype,)."""
    return np.zeros(0, dtype=np.float32)


def exchange(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """sendrecv: the sender's src tile, as it is when both cores have met. params: ()."""
    return np.array(v[0], copy=True)


KINDS_V06 = {
    "scalar_reduce": scalar_reduce, "max8": max8, "find_index8": find_index8, "match_replace8": match_replace8,
    "keep_where": keep_where, "partition_reduce": partition_reduce, "bn_stats": bn_stats, "bn_aggr": bn_aggr,
    "predicated": predicated, "transpose_axes": transpose_axes, "exponential": exponential,
    "cumulative": cumulative, "select": select, "range_select": range_select, "affine_select": select,
    "composite": composite, "uniform": uniform, "shuffle": shuffle,
    "gather_free": gather_free, "sequence_bounds": sequence_bounds, "local_gather": local_gather,
    "activate2": activate2, "nonzero": nonzero, "register": register, "dma_sum": dma_sum, "topk": topk,
    "mx_quantize": mx.mx_quantize, "mx_matmul": mx.mx_matmul, "rng_state": rng_state,
    "rng_words": rng_words, "barrier": barrier, "exchange": exchange,
}
semantics.KINDS.update(KINDS_V06)

# The cost-trace row each kind's instruction records (isa_v06.py), for the replayer's row check
# (trace_check.py): (engine, where its dtype is in params, FLOPs per input element); partitions and free size
# are the first operand's (the data the engine streams), except where noted.
_ROWS: dict[str, tuple[Engine, int, int]] = {
    "scalar_reduce": (Engine.VECTOR, -1, 2), "max8": (Engine.VECTOR, 0, 1), "find_index8": (Engine.VECTOR, 0, 1),
    "match_replace8": (Engine.VECTOR, 1, 1), "keep_where": (Engine.VECTOR, 0, 1),
    "partition_reduce": (Engine.GPSIMD, 1, 1), "bn_stats": (Engine.VECTOR, 0, 1), "bn_aggr": (Engine.VECTOR, 0, 1),
    "exponential": (Engine.VECTOR, 0, 2),
    "transpose_axes": (Engine.DMA, 1, 0),  # partitions and free of the result (the SBUF tile written)
    "predicated": (Engine.VECTOR, -1, 1),  # dtype: the destination's (given by the caller)
    "cumulative": (Engine.VECTOR, -1, 2), "select": (Engine.VECTOR, -1, 1), "range_select": (Engine.VECTOR, -1, 1),
    "affine_select": (Engine.GPSIMD, -1, 1),
    "composite": (Engine.VECTOR, -1, 4),  # var, softmax, rms_norm: a few passes over the data
    "uniform": (Engine.VECTOR, -1, 1),
    "shuffle": (Engine.VECTOR, -2, 1),  # partitions and free of the destination (the result); its dtype
    "gather_free": (Engine.GPSIMD, 0, 1), "sequence_bounds": (Engine.GPSIMD, 0, 1),  # shaped like the result
    "local_gather": (Engine.GPSIMD, -1, 1),  # shaped like the result
    "activate2": (Engine.SCALAR, -1, 1),
    "nonzero": (Engine.GPSIMD, -1, 1),  # shaped like the result
    "register": (Engine.VECTOR, 0, 1),
}


def _shape(x: Any) -> tuple[int, int, int]:
    """(partitions, free elements per partition, elements) of an array."""
    shape = np.shape(x)
    size = int(np.prod(shape)) if shape else 1
    parts = shape[0] if shape else 1
    return parts, size // parts if parts else 0, size


def _engines(*engines: Engine) -> frozenset[int]:
    return frozenset(int(e) for e in engines)


# The rows of the last names (isa_v06_more.py): (params, values, outputs, dst dtype) -> the row's fields.
_LATE_ROWS: dict[str, Any] = {
    "dma_sum": lambda p, v, o, d: (_engines(Engine.DMA), p[1], *_shape(o[0])[:2], _shape(o[0])[2] * max(1, len(v) - 1),
                                   0),
    "topk": lambda p, v, o, d: (_engines(Engine.GPSIMD), "bfloat16", _shape(v[0])[0], 4 * p[0] + p[1],
                                _shape(v[0])[2], 0),
    "mx_quantize": lambda p, v, o, d: (_engines(Engine.VECTOR), p[2], *_shape(v[0]), 0),
    "mx_matmul": lambda p, v, o, d: (_engines(Engine.TENSOR), p[0], np.shape(v[0])[0], np.shape(v[1])[1],
                                     8 * np.shape(v[0])[1] * np.shape(v[1])[1] * np.shape(v[0])[0], 0),
    "barrier": lambda p, v, o, d: (_engines(Engine.GPSIMD), p[0], 1, 1, 1, 0),
    "rng_state": lambda p, v, o, d: (_engines(Engine.GPSIMD, Engine.VECTOR), "uint32", *_shape(v[0]), 0),
    "rng_words": lambda p, v, o, d: (_engines(Engine.GPSIMD, Engine.VECTOR), "uint32", *_shape(o[0]), 0),
    "exchange": lambda p, v, o, d: (_engines(Engine.DMA), d, *_shape(o[0])[:2], 0, 0),
}


def expected_row(kind: str, params: tuple, values: list[Any], outputs: tuple,
                 dst_dtype: str | None) -> tuple | None:
    """(engines, dtype, partitions, free, flops, is_transpose) of the row a kind above records; None for other
    kinds."""
    if kind in _LATE_ROWS:
        return _LATE_ROWS[kind](params, values, outputs, dst_dtype)
    row = _ROWS.get(kind)
    if row is None:
        return None
    engine, where, per_element = row
    result_shaped = kind in ("transpose_axes", "shuffle", "gather_free", "sequence_bounds", "local_gather",
                                   "nonzero")
    shape = np.shape(outputs[0]) if result_shaped else np.shape(values[0])
    size = int(np.prod(shape)) if shape else 1
    parts = shape[0] if shape else 1
    d = dst_dtype if kind in ("predicated", "shuffle") else params[where]
    return frozenset((int(engine),)), d, parts, size // parts if parts else 0, per_element * size, 0
