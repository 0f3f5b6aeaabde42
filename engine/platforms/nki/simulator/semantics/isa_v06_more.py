"""The last `nki.isa` names of the NKI 0.6 API reference (SDK 2.32) the simulator lacked (issue 34).

Semantics from the docstrings of nki/api/nki/isa/__init__.py in aws-neuron-sdk:

- `NkiInstruction`: what a destination-first call returns; `depends_on(*producers)` adds scheduling edges.
  The simulator executes instructions in program order, so every edge a kernel can add already holds.
- `dma_compute`: `dst = srcs[0] + srcs[1] + ...` computed in float32 by the DMA engines (add only, scales 1.0).
- `rand_set_state` / `rand_get_state` (NeuronCore-v3+): set and read the random number generator's state.
- `topk` (GpSimd): the K largest of a 16-partition snake, ascending, with their indices.
- `core_barrier` and `sendrecv` (NeuronCore-v3+): the two cores of an LNC=2 launch meet and exchange tiles
  (cores.py runs the programs as taking-turns threads).
- `quantize_mx` and `nc_matmul_mx` (NeuronCore-v4): MXFP8 quantization and the MX matmul, on the packed
  `float8_e5m2_x4`, `float8_e4m3fn_x4` and `float4_e2m1fn_x4` types (dtypes.py).

namespaces.py adds `DESTINATION_MORE` to top-level `nki.isa`; what each computes is a kind in semantics_v06.py.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError, NKIRuntimeError
from engine.platforms.nki.simulator.semantics import alu
from engine.platforms.nki.simulator.semantics.cores import Cores, NeedsCores, running
from engine.platforms.nki.simulator.semantics.indirect import has_tile_index, tile_indices
from engine.platforms.nki.simulator.semantics.isa_v06 import _destination, require_core
from engine.platforms.nki.simulator.semantics.mx import MX_FORMATS, mx_scale_rows
from engine.platforms.nki.simulator.semantics.runtime import active, instruction
from engine.platforms.nki.simulator.semantics.tensors import Access, Tensor, View
from engine.platforms.nki.simulator.trace import Engine


# -- NkiInstruction ---------------------------------------------------------------------------------------
class NkiInstruction:
    """The handle a destination-first `nki.isa` call returns: the instruction's position in the program."""

    __slots__ = ("handle",)

    def __init__(self, handle: int) -> None:
        self.handle = int(handle)

    def depends_on(self, *producers: NkiInstruction) -> NkiInstruction:
        """Run after every producer. Each producer was issued before this instruction (a Python call returns
        only after its instruction ran), and the simulator runs instructions in program order, so the edge
        holds as soon as it is named; what can be checked is that each producer is an instruction."""
        for p in producers:
            if not isinstance(p, NkiInstruction):
                raise NKICompileError("depends_on", f"a producer must be the NkiInstruction an nki.isa call "
                                                    f"returned, got {type(p).__name__}")
        return self

    def __repr__(self) -> str:
        return f"NkiInstruction({self.handle})"


def returning_instruction(fn: Any) -> Any:
    """`fn` (a destination-first instruction) returning its NkiInstruction where it returned nothing."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        if out is not None:
            return out
        sim = active(getattr(fn, "nki_name", fn.__name__))
        return NkiInstruction(sim.instructions - 1)

    return call


# -- dma_compute ---------------------------------------------------------------------------------------------
_MAX_SOURCES = 16


def _access(sim: Any, x: Any, op: str) -> Access:
    if isinstance(x, View):
        items = tile_indices(sim, x.items, op) if has_tile_index(x.items) else x.items
        return x.base.access(items, None, op)
    if isinstance(x, Tensor):
        return x.whole(None, op)
    raise NKICompileError(op, f"expected a tensor, got {type(x).__name__}")


@instruction("dma_compute")
def dma_compute(dst: Any, srcs: Any, reduce_op: Any, scales: Any = None, unique_indices: bool = True,
                oob_mode: Any = None, name: Any = None, **_: Any) -> None:
    """dst = reduce_op(srcs[0] * scales[0], srcs[1] * scales[1], ...), in float32 inside the DMA engines. The API
    supports only add and scales of 1.0, and non-unique scatter indices not at all; each is refused here."""
    op = "dma_compute"
    sim = active(op).begin(op)
    srcs = list(srcs) if isinstance(srcs, (list, tuple)) else [srcs]
    if not 1 <= len(srcs) <= _MAX_SOURCES:
        raise NKICompileError(op, f"srcs holds 1 to {_MAX_SOURCES} tensors, got {len(srcs)}")
    if alu.op_name(reduce_op, op) != "add":
        raise NKICompileError(op, f"reduce_op must be nl.add (the only one the DMA engines support), got "
                                  f"{alu.op_name(reduce_op, op)}")
    if scales is not None:
        scales = list(scales)
        if len(scales) != len(srcs) or any(float(s) != 1.0 for s in scales):
            raise NKICompileError(op, f"scales must be one 1.0 per source (the only scale supported), got {scales}")
    if not unique_indices:
        raise NKICompileError(op, "unique_indices=False (non-unique scatter indices) is not supported by NKI")
    if oob_mode is not None and int(oob_mode) == 1:
        raise NKICompileError(op, "oob_mode.skip is not simulated for dma_compute; use dma_copy(oob_mode=skip)")
    reads = [_access(sim, s, op) for s in srcs]
    out = _access(sim, dst, op)
    for k, r in enumerate(reads):
        if r.size != out.size:
            raise NKICompileError(op, f"srcs[{k}] has {r.size} elements, dst {out.size}: the counts must match")
    values = sim.compute("dma_sum", (tuple(out.shape), out.tensor.dtype.name), reads)
    sim.write(out, values, op)
    parts = out.shape[0] if len(out.shape) else 1
    sim.emit(op, Engine.DMA, out.tensor.dtype.name, parts, out.size // parts, out.size * max(1, len(reads) - 1),
             reads, [out], sim.line_no, sim.ctx)


# -- random number generator state ------------------------------------------------------------------------
_STATE_WORDS = {"gpsimd": 6, "vector": 24}  # XORWOW state words per partition, by engine (the API pages)


def _state_engine(sim: Any, engine: Any, op: str) -> str:
    which = "gpsimd" if engine is None else str(getattr(engine, "name", engine)).split(".")[-1]
    which = which.replace("_engine", "")
    if which not in _STATE_WORDS:
        raise NKICompileError(op, f"engine must be nki.isa.engine.gpsimd or nki.isa.engine.vector, not {which}")
    require_core(sim, op, 4 if which == "vector" else 3)
    return which


def _state_tile(sim: Any, x: Any, which: str, op: str) -> Access:
    acc = _destination(x, None, op) if isinstance(x, (Tensor, View)) else None
    if acc is None or len(acc.shape) != 2:
        raise NKICompileError(op, "the state must be a 2-D uint32 tile (partitions x state words)")
    if acc.tensor.dtype.name != "uint32":
        raise NKICompileError(op, f"the state tile must be uint32, not {acc.tensor.dtype.name}")
    if acc.shape[1] != _STATE_WORDS[which]:
        raise NKICompileError(op, f"the {which} engine's state is {_STATE_WORDS[which]} uint32 words per partition, "
                                  f"the tile has {acc.shape[1]}")
    return acc


@instruction("rand_set_state")
def rand_set_state(src_seeds: Any, engine: Any = None, name: Any = None, **_: Any) -> None:
    """Later draws (rng, rand, rand2, dropout) follow from the state words in the tile, as from a seed. The
    simulator's generator is numpy's, seeded with the words: rand_get_state's tile given back here repeats the
    draws that followed it. The words are device values, so the program is marked data-dependent."""
    op = "rand_set_state"
    sim = active(op).begin(op)
    which = _state_engine(sim, engine, op)
    acc = _state_tile(sim, src_seeds, which, op)
    words = sim.compute("rng_state", (), [acc])
    sim.nki_rng = np.random.default_rng([int(w) for w in words])
    if sim.recorder is not None:
        sim.recorder.program.indirect.append(sim.line_no)
    sim.emit(op, Engine.GPSIMD if which == "gpsimd" else Engine.VECTOR, "uint32", acc.partitions, acc.free,
             acc.size, [acc], [], sim.line_no, sim.ctx)


@instruction("rand_get_state")
def rand_get_state(dst: Any, engine: Any = None, name: Any = None, **_: Any) -> None:
    """Write the generator's state into dst: words drawn from it, which then seed it, so that the draws after
    this instruction are the ones rand_set_state(dst) brings back."""
    op = "rand_get_state"
    sim = active(op).begin(op)
    which = _state_engine(sim, engine, op)
    out = _state_tile(sim, dst, which, op)
    if which == "gpsimd" and out.space.name == "PSUM":
        raise NKICompileError(op, "the GpSimd Engine cannot write PSUM: dst must be in SBUF")
    rng = getattr(sim, "nki_rng", None)
    if rng is None:
        rng = sim.nki_rng = np.random.default_rng(0)
    words = rng.integers(0, 2**32, size=tuple(out.shape), dtype=np.uint32)
    sim.nki_rng = np.random.default_rng([int(w) for w in words.reshape(-1)])
    values = sim.compute("rng_words", (), [words])
    sim.write(out, values, op)
    sim.emit(op, Engine.GPSIMD if which == "gpsimd" else Engine.VECTOR, "uint32", out.partitions, out.free,
             out.size, [], [out], sim.line_no, sim.ctx)


# -- topk ----------------------------------------------------------------------------------------------------
_SNAKE = 16  # partitions of one snake


@instruction("topk")
def topk(val_dst: Any, idx_dst: Any, src: Any, n: Any, name: Any = None, **_: Any) -> None:
    """The K largest of each 16-partition snake (element j of a snake at partition j % 16, column j // 16; K is
    val_dst's free size): values ascending into val_dst, their snake indices into idx_dst (GpSimd Engine)."""
    op = "topk"
    sim = active(op).begin(op)
    s = sim.operand(src)
    vals = _destination(val_dst, None, op)
    idx = _destination(idx_dst, None, op)
    if not isinstance(s, Access) or len(s.shape) != 2:
        raise NKICompileError(op, "src must be a 2-D SBUF tile")
    n, k = int(n), int(vals.shape[-1]) if vals.shape else 0
    checks = [
        (s.space.name == vals.space.name == idx.space.name == "SBUF", "src, val_dst and idx_dst must be in SBUF"),
        (s.tensor.dtype.name == "bfloat16", f"src must be bfloat16, not {s.tensor.dtype.name}"),
        (vals.tensor.dtype.name == "bfloat16", f"val_dst must be bfloat16, not {vals.tensor.dtype.name}"),
        (idx.tensor.dtype.name == "uint32", f"idx_dst must be uint32, not {idx.tensor.dtype.name}"),
        (8 <= n < 65536, f"n must be at least 8 and below 65536, got {n}"),
        (1 <= k < 32768 and k <= n, f"K (val_dst's free size, {k}) must be 1 to 32767 and at most n ({n})"),
        (s.shape[1] * _SNAKE >= n, f"src has {s.shape[1]} columns, fewer than n / 16 = {-(-n // _SNAKE)}"),
        (s.shape[0] % _SNAKE == 0, f"the partition count ({s.shape[0]}) must be a multiple of 16"),
        (tuple(vals.shape) == tuple(idx.shape) == (s.shape[0], k),
         f"val_dst and idx_dst must both be [{s.shape[0]}, K], got {list(vals.shape)} and {list(idx.shape)}"),
    ]
    for ok, why in checks:
        if not ok:
            raise NKICompileError(op, why)
    top, where = sim.compute("topk", (n, k), [s])
    sim.write(vals, top, op)
    sim.write(idx, where, op)
    sim.emit(op, Engine.GPSIMD, "bfloat16", s.partitions, 4 * n + k, s.size, [s], [vals, idx], sim.line_no,
             sim.ctx)


# -- MX quantization and matmul (NeuronCore-v4) ------------------------------------------------------------
def _mx_check(ok: bool, op: str, why: str) -> None:
    if not ok:
        raise NKICompileError(op, why)


def _write_scales(sim: Any, dst_scale: Any, scales: list[np.ndarray], partitions: int, op: str) -> list[Access]:
    """Each quadrant's block of scale rows into the scale tile's partitions for it (semantics_v06.mx_scale_rows)."""
    writes = []
    rows = mx_scale_rows(partitions)
    for block, start in zip(scales, range(0, len(rows), 4), strict=True):
        row = int(rows[start])
        acc = _destination(View(dst_scale, (slice(row, row + len(block)), slice(None))), None, op)
        sim.write(acc, block, op)
        writes.append(acc)
    return writes


@instruction("quantize_mx")
def quantize_mx(dst: Any, src: Any, dst_scale: Any, name: Any = None, **_: Any) -> None:
    """FP16/BF16 src [P, F] to MXFP8: dst [P, F/4] packed float8 and one scale per 8 partitions x 4 elements
    (Vector Engine, NeuronCore-v4)."""
    op = "quantize_mx"
    sim = active(op).begin(op)
    require_core(sim, op, 4)
    s = sim.operand(src)
    out = _destination(dst, None, op)
    _mx_check(isinstance(s, Access) and len(s.shape) == 2, op, "src must be a 2-D SBUF tile")
    p, f = s.shape
    fmt, scale_dtype = out.tensor.dtype.name, dt_name(dst_scale)
    _mx_check(s.tensor.dtype.name in ("float16", "bfloat16"), op, f"src must be float16 or bfloat16, not "
                                                                 f"{s.tensor.dtype.name}")
    _mx_check(fmt in ("float8_e5m2_x4", "float8_e4m3fn_x4"), op, f"dst must be float8_e5m2_x4 or float8_e4m3fn_x4, "
                                                                f"not {fmt}")
    _mx_check(scale_dtype in ("uint8", "float8_e8m0fnu"), op, f"dst_scale must be float8_e8m0fnu or uint8, not "
                                                             f"{scale_dtype}")
    _mx_check(p % 32 == 0 and p <= 128, op, f"src's partitions ({p}) must be a multiple of 32, at most 128")
    _mx_check(f % 4 == 0, op, f"src's free size ({f}) must be a multiple of 4")
    _mx_check(tuple(out.shape) == (p, f // 4), op, f"dst must be [{p}, {f // 4}] (four values per element), got "
                                                   f"{list(out.shape)}")
    need = (p // 8 if p <= 32 else p, f // 4)
    _mx_check(tuple(dst_scale.shape[:1]) >= need[:1] and tuple(dst_scale.shape[1:]) == need[1:], op,
              f"dst_scale must be at least [{need[0]}, {need[1]}] (a scale per 8 partitions x 4 elements, in the "
              f"first 4 partitions of each 32-partition quadrant), got {list(dst_scale.shape)}")
    for t, what in ((s, "src"), (out, "dst")):
        _mx_check(t.space.name == "SBUF", op, f"{what} must be in SBUF")
    packed, *scales = sim.compute("mx_quantize", (fmt, scale_dtype, s.tensor.dtype.name), [s])
    sim.write(out, packed, op)
    writes = _write_scales(sim, dst_scale, scales, p, op)
    sim.emit(op, Engine.VECTOR, s.tensor.dtype.name, p, f, s.size, [s], [out, *writes], sim.line_no, sim.ctx)


def dt_name(x: Any) -> str:
    base = x.base if isinstance(x, View) else x
    if not isinstance(base, Tensor):
        raise NKICompileError("mx", f"expected a tile, got {type(x).__name__}")
    return base.dtype.name


@instruction("nc_matmul_mx")
def nc_matmul_mx(dst: Any, stationary: Any, moving: Any, stationary_scale: Any, moving_scale: Any,
                 tile_position: Any = None, tile_size: Any = None, accumulate: Any = None, name: Any = None,
                 **_: Any) -> None:
    """dst[M, N] (PSUM) = the MX-dequantized stationary [K, M] and moving [K, N], contracted over the K partitions
    and the four values of each packed element (Tensor Engine, NeuronCore-v4). accumulate=None adds to dst
    when it was written before."""
    op = "nc_matmul_mx"
    sim = active(op).begin(op)
    require_core(sim, op, 4)
    st, mv = sim.operand(stationary), sim.operand(moving)
    ss, ms = sim.operand(stationary_scale), sim.operand(moving_scale)
    out = _destination(dst, None, op)
    for t, what in ((st, "stationary"), (mv, "moving"), (ss, "stationary_scale"), (ms, "moving_scale")):
        _mx_check(isinstance(t, Access) and len(t.shape) == 2 and t.space.name == "SBUF", op,
                  f"{what} must be a 2-D SBUF tile")
    _mx_check(out.space.name == "PSUM", op, "dst must be in PSUM")
    for t, what in ((st, "stationary"), (mv, "moving")):
        _mx_check(t.tensor.dtype.name in MX_FORMATS, op, f"{what} must be float8_e5m2_x4, float8_e4m3fn_x4 or "
                                                         f"float4_e2m1fn_x4, not {t.tensor.dtype.name}")
    for t, what in ((ss, "stationary_scale"), (ms, "moving_scale")):
        _mx_check(t.tensor.dtype.name in ("uint8", "float8_e8m0fnu"), op, f"{what} must be float8_e8m0fnu or "
                                                                          f"uint8, not {t.tensor.dtype.name}")
    k, m = st.shape
    n = mv.shape[1]
    d = out.tensor.dtype.name
    _mx_check(d in ("float32", "bfloat16"), op, f"dst must be float32 or bfloat16, not {d}")
    _mx_check(mv.shape[0] == k and k % 32 == 0 and k <= 128, op, f"stationary and moving need the same partition "
                                                                 f"count, a multiple of 32 up to 128 (got {k} and "
                                                                 f"{mv.shape[0]})")
    _mx_check(m % 2 == 0 and m <= 128, op, f"stationary's free size ({m}) must be even and at most 128")
    limit = 4096 if d == "float32" else 8192
    _mx_check(n <= limit, op, f"moving's free size ({n}) exceeds {limit} for a {d} dst")
    _mx_check(tuple(out.shape) == (m, n), op, f"dst must be [{m}, {n}], got {list(out.shape)}")
    need = k // 8 if k <= 32 else k
    for t, what, cols in ((ss, "stationary_scale", m), (ms, "moving_scale", n)):
        _mx_check(t.shape[0] >= need and t.shape[1] == cols, op, f"{what} must be at least [{need}, {cols}], got "
                                                                 f"{list(t.shape)}")
    if accumulate is None:
        accumulate = out.init is None or bool(np.any(out.init))
    values = sim.compute("mx_matmul", (st.tensor.dtype.name, mv.tensor.dtype.name, ss.tensor.dtype.name == "uint8",
                                       ms.tensor.dtype.name == "uint8", d), [st, mv, ss, ms])
    sim.write(out, values, op, accumulate="add" if accumulate else None)
    sim.emit(op, Engine.TENSOR, st.tensor.dtype.name, k, n, 2 * m * n * k * 4, [st, mv, ss, ms], [out],
             sim.line_no, sim.ctx)


# -- two cores: core_barrier and sendrecv (cores.py runs the programs) ------------------------------------------
def _cores(sim: Any, op: str) -> Cores:
    """The running Cores; in a sequential run, ask simulate() for them (or refuse a one-program launch)."""
    require_core(sim, op, 3)
    cores = running(sim)
    if cores is not None:
        return cores
    if len(sim.grid) and int(np.prod(sim.grid)) > 1:
        raise NeedsCores
    raise NKICompileError(op, f"{op} works between the two NeuronCores of an LNC=2 launch (kernel[nl.nc(2)](...)); "
                              "this launch runs one program")


@instruction("core_barrier")
def core_barrier(data: Any, cores: Any, engine: Any = None, name: Any = None, **_: Any) -> None:
    """Wait until every core in `cores` (only (0, 1)) reaches this barrier: what each wrote to `data` (shared
    HBM) before it is there for all after it."""
    op = "core_barrier"
    sim = active(op).begin(op)
    ranks = tuple(int(c) for c in cores)
    if ranks != (0, 1):
        raise NKICompileError(op, f"cores must be (0, 1), the only barrier NKI supports (LNC=2), got {ranks}")
    base = data.base if isinstance(data, View) else data
    if not isinstance(base, Tensor) or base.space.name != "HBM":
        raise NKICompileError(op, "data must be the shared HBM tensor the cores synchronize on")
    group = _cores(sim, op)
    sim.compute("barrier", (base.dtype.name,), [])
    sim.emit(op, Engine.GPSIMD, base.dtype.name, 1, 1, 1, [], [], sim.line_no, sim.ctx)
    group.meet((op,), frozenset(ranks))


@instruction("sendrecv")
def sendrecv(src: Any, dst: Any, send_to_rank: Any, recv_from_rank: Any, pipe_id: Any, dma_engine: Any = None,
             name: Any = None, **_: Any) -> None:
    """Send `src` to core `send_to_rank`'s `dst` and receive core `recv_from_rank`'s `src` into this `dst`
    (SBUF tiles of one dtype and shape); the cores meet per `pipe_id`."""
    op = "sendrecv"
    sim = active(op).begin(op)
    to, frm = int(send_to_rank), int(recv_from_rank)
    if not {to, frm} <= {0, 1}:
        raise NKICompileError(op, f"send_to_rank and recv_from_rank must be 0 or 1 (LNC=2), got {to} and {frm}")
    s = sim.operand(src)
    out = _destination(dst, None, op)
    if not isinstance(s, Access) or s.space.name != "SBUF" or out.space.name != "SBUF":
        raise NKICompileError(op, "src and dst must both be SBUF tiles")
    if s.tensor.dtype != out.tensor.dtype or tuple(s.shape) != tuple(out.shape):
        raise NKICompileError(op, f"src ({s.tensor.dtype} {list(s.shape)}) and dst ({out.tensor.dtype} "
                                  f"{list(out.shape)}) must have the same dtype and shape")
    group = _cores(sim, op)
    me = group.core_of(group.local.index)
    line, ctx, nest = sim.line_no, sim.ctx, sim.nest
    posted = group.posted.setdefault((group.local.index - me, int(pipe_id)), {})
    posted[me] = (s, to, line, ctx, nest)
    receivers = group.receivers.setdefault((group.local.index - me, int(pipe_id)), {})
    receivers[me] = (out, frm)

    def transfer() -> None:
        # the last core to arrive moves every posted src into the dst of the core it was sent to
        key = (group.local.index - group.core_of(group.local.index), int(pipe_id))
        sent, wanted = group.posted.pop(key, {}), group.receivers.pop(key, {})
        for sender, (acc, target, at_line, at_ctx, at_nest) in sorted(sent.items()):
            into, expect = wanted.get(target, (None, None))
            if into is None or expect != sender:
                raise NKIRuntimeError(op, f"core {sender} sends to core {target}, which receives from core "
                                          f"{expect if into is not None else 'nobody'}")
            values = sim.compute("exchange", (), [acc])
            sim.write(into, values, op, nest=at_nest)
            parts = into.shape[0] if len(into.shape) else 1
            sim.emit(op, Engine.DMA, into.tensor.dtype.name, parts, into.size // parts, 0, [acc], [into], at_line,
                     at_ctx)

    group.meet((op, int(pipe_id)), frozenset({0, 1}), transfer)


DESTINATION_MORE: dict[str, Any] = {
    "NkiInstruction": NkiInstruction, "dma_compute": dma_compute, "rand_set_state": rand_set_state,
    "rand_get_state": rand_get_state, "topk": topk, "quantize_mx": quantize_mx, "nc_matmul_mx": nc_matmul_mx,
    "core_barrier": core_barrier, "sendrecv": sendrecv,
}
