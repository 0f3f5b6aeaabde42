"""The instruction trace: what the simulator executed, in a compact columnar form.

The simulator appends one row per executed instruction; the performance model replays the rows as a
schedule. Columns are `array.array`s while recording (a few bytes per instruction, so millions fit) and
become numpy arrays on `freeze()`. Memory accesses live in a second table, indexed by
`access_start`/`access_count`, so an instruction can read and write any number of tensor regions.

A region is a tensor id plus a partition range and a byte range within each partition (the bounding box
of the elements touched). Dependencies between instructions are overlaps of regions on the same tensor.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np


class Engine(IntEnum):
    TENSOR = 0  # PE array: matmul, transpose
    VECTOR = 1
    SCALAR = 2  # activation engine
    GPSIMD = 3
    DMA = 4


class MemorySpace(IntEnum):
    """Where on the device a tensor lives (the simulator's `nl.hbm`/`nl.sbuf`/`nl.psum` buffers)."""

    HBM = 0
    SBUF = 1
    PSUM = 2

    def __repr__(self) -> str:
        # The repr this enum had as `Memory`: trace digests hash `repr(trace.tensors)`, and a rename
        # must not change them (benchmark versions pin the digests).
        return f"<Memory.{self.name}: {self.value}>"


class LoopKind(IntEnum):
    AFFINE = 0  # iterations independent: the hardware may overlap them
    SEQUENTIAL = 1  # loop-carried dependence: no overlap across iterations
    STATIC = 2  # unrolled at trace time


# Instruction columns: name -> array typecode. 'q' = int64, 'i' = int32, 'd' = float64.
INSTRUCTION_COLUMNS: dict[str, str] = {
    "engine": "b",  # Engine
    "opcode": "i",  # index into Trace.op_names
    "dtype": "b",  # index into Trace.dtype_names: the dtype the instruction computes in
    "partitions": "i",  # partitions touched (<= 128)
    "free_elems": "q",  # elements per partition processed (the N of the ISA cost formulas)
    "flops": "q",  # arithmetic operations (matmul: 2*M*N*K; elementwise: elements)
    "is_transpose": "b",  # Tensor Engine transpose (counted as transpose_flops)
    "hbm_read": "q",  # bytes
    "hbm_write": "q",
    "sbuf_read": "q",
    "sbuf_write": "q",
    "psum_read": "q",
    "psum_write": "q",
    "loop_ctx": "i",  # index into Trace.loop_contexts
    "line": "i",  # kernel source line (0 when unknown)
    "access_start": "q",  # first row of this instruction in the access table
    "access_count": "i",
}

ACCESS_COLUMNS: dict[str, str] = {
    "tensor": "i",  # index into Trace.tensors
    "is_write": "b",
    "part_lo": "i",  # partition range [part_lo, part_hi)
    "part_hi": "i",
    "byte_lo": "q",  # byte range within a partition [byte_lo, byte_hi)
    "byte_hi": "q",
}


@dataclass(frozen=True, repr=False)
class TensorInfo:
    name: str
    space: MemorySpace
    shape: tuple[int, ...]
    dtype: str
    partition_axis: int  # -1 for HBM tensors
    bytes_per_partition: int  # on-chip footprint per partition (0 for HBM)
    total_bytes: int

    def __repr__(self) -> str:
        # The dataclass repr from when `space` was named `memory`, kept for the trace digests (see MemorySpace).
        return (f"TensorInfo(name={self.name!r}, memory={self.space!r}, shape={self.shape!r}, dtype={self.dtype!r}, "
                f"partition_axis={self.partition_axis!r}, bytes_per_partition={self.bytes_per_partition!r}, "
                f"total_bytes={self.total_bytes!r})")


@dataclass(frozen=True)
class LoopInfo:
    kind: LoopKind
    trip_count: int
    line: int


@dataclass
class Trace:
    """Columnar instruction trace. Record with `append`, then `freeze()` before replaying."""

    op_names: list[str] = field(default_factory=list)
    dtype_names: list[str] = field(default_factory=list)
    tensors: list[TensorInfo] = field(default_factory=list)
    loops: list[LoopInfo] = field(default_factory=list)
    # Each loop context is the enclosing loop nest, outermost first: ((loop_id, iteration), ...).
    loop_contexts: list[tuple[tuple[int, int], ...]] = field(default_factory=list)
    columns: dict[str, array | np.ndarray] = field(default_factory=dict)
    access: dict[str, array | np.ndarray] = field(default_factory=dict)
    frozen: bool = False

    def __post_init__(self) -> None:
        if not self.columns:
            self.columns = {name: array(code) for name, code in INSTRUCTION_COLUMNS.items()}
        if not self.access:
            self.access = {name: array(code) for name, code in ACCESS_COLUMNS.items()}
        self._op_index = {name: i for i, name in enumerate(self.op_names)}
        self._dtype_index = {name: i for i, name in enumerate(self.dtype_names)}
        self._ctx_index = {ctx: i for i, ctx in enumerate(self.loop_contexts)}
        self._appenders: tuple[Any, ...] | None = None

    def __len__(self) -> int:
        return len(self.columns["engine"])

    # -- recording -------------------------------------------------------------------------------

    def add_tensor(self, info: TensorInfo) -> int:
        self.tensors.append(info)
        return len(self.tensors) - 1

    def add_loop(self, info: LoopInfo) -> int:
        self.loops.append(info)
        return len(self.loops) - 1

    def context_id(self, nest: tuple[tuple[int, int], ...]) -> int:
        cid = self._ctx_index.get(nest)
        if cid is None:
            cid = len(self.loop_contexts)
            self.loop_contexts.append(nest)
            self._ctx_index[nest] = cid
        return cid

    def _intern(self, names: list[str], index: dict[str, int], name: str) -> int:
        i = index.get(name)
        if i is None:
            i = len(names)
            names.append(name)
            index[name] = i
        return i

    def append(
        self,
        *,
        engine: Engine,
        op: str,
        dtype: str,
        partitions: int,
        free_elems: int,
        flops: int = 0,
        is_transpose: bool = False,
        hbm_read: int = 0,
        hbm_write: int = 0,
        sbuf_read: int = 0,
        sbuf_write: int = 0,
        psum_read: int = 0,
        psum_write: int = 0,
        loop_ctx: int = 0,
        line: int = 0,
        accesses: tuple[tuple[int, bool, int, int, int, int], ...] = (),
    ) -> None:
        """Record one instruction; `accesses` rows are (tensor, is_write, part_lo, part_hi, byte_lo, byte_hi)."""
        self.record(engine, op, dtype, partitions, free_elems, flops, is_transpose,
                    (hbm_read, hbm_write, sbuf_read, sbuf_write, psum_read, psum_write), loop_ctx, line, accesses)

    def record(self, engine: Engine, op: str, dtype: str, partitions: int, free_elems: int, flops: int,
               is_transpose: bool, moved: Any, loop_ctx: int, line: int, accesses: Any) -> None:
        """`append` without keywords (the simulator's per-instruction path): `moved` is the bytes read and
        written in HBM, SBUF and PSUM, in that order."""
        if self.frozen:
            raise RuntimeError("trace is frozen")
        appenders = self._appenders
        if appenders is None:  # the columns' bound `append`s, in INSTRUCTION_COLUMNS then ACCESS_COLUMNS order
            appenders = self._appenders = (*(self.columns[n].append for n in INSTRUCTION_COLUMNS),
                                           *(self.access[n].append for n in ACCESS_COLUMNS))
        (a_engine, a_opcode, a_dtype, a_parts, a_free, a_flops, a_transpose, a_hbm_r, a_hbm_w, a_sbuf_r, a_sbuf_w,
         a_psum_r, a_psum_w, a_ctx, a_line, a_start, a_count, t_tensor, t_write, t_plo, t_phi, t_blo, t_bhi) = appenders
        opcode = self._op_index.get(op)
        if opcode is None:
            opcode = self._intern(self.op_names, self._op_index, op)
        dtype_code = self._dtype_index.get(dtype)
        if dtype_code is None:
            dtype_code = self._intern(self.dtype_names, self._dtype_index, dtype)
        a_engine(engine)
        a_opcode(opcode)
        a_dtype(dtype_code)
        a_parts(partitions)
        a_free(free_elems)
        a_flops(flops)
        a_transpose(1 if is_transpose else 0)
        hbm_r, hbm_w, sbuf_r, sbuf_w, psum_r, psum_w = moved
        a_hbm_r(hbm_r)
        a_hbm_w(hbm_w)
        a_sbuf_r(sbuf_r)
        a_sbuf_w(sbuf_w)
        a_psum_r(psum_r)
        a_psum_w(psum_w)
        a_ctx(loop_ctx)
        a_line(line)
        a_start(len(self.access["tensor"]))
        a_count(len(accesses))
        for tensor, is_write, part_lo, part_hi, byte_lo, byte_hi in accesses:
            t_tensor(tensor)
            t_write(1 if is_write else 0)
            t_plo(part_lo)
            t_phi(part_hi)
            t_blo(byte_lo)
            t_bhi(byte_hi)

    def merge(self, part: dict[str, Any], *, contexts: list[int], first_context: int, first_tensor: int,
              tensor_id: Any) -> None:
        """Append the rows another process recorded after a copy of this trace had `first_*` contexts and
        tensors (`parallel.LoopSplitter._merge`, which merges its loops and contexts first): `contexts` are the
        ids here of its new contexts (`merge_contexts`); its new tensors get ids from
        `tensor_id(serial, info)`, called in the order that process gave them out."""
        if self.frozen:
            raise RuntimeError("trace is frozen")
        ops = np.array([self._intern(self.op_names, self._op_index, n) for n in part["op_names"]], dtype=np.int64)
        dtypes = np.array([self._intern(self.dtype_names, self._dtype_index, n) for n in part["dtype_names"]],
                          dtype=np.int64)
        contexts = [*range(first_context), *contexts]
        serials = part["tid_serial"]
        tensors = list(range(first_tensor))
        for k, info in enumerate(part["tensors"]):
            tensors.append(tensor_id(serials[first_tensor + k], info))
        cols = {k: np.frombuffer(v, dtype=INSTRUCTION_COLUMNS[k]) for k, v in part["columns"].items()}
        cols["opcode"] = ops[cols["opcode"]] if len(ops) else cols["opcode"]
        cols["dtype"] = dtypes[cols["dtype"]] if len(dtypes) else cols["dtype"]
        cols["loop_ctx"] = np.asarray(contexts, dtype=np.int64)[cols["loop_ctx"]]
        cols["access_start"] = cols["access_start"] - part["first_access"] + len(self.access["tensor"])
        acc = {k: np.frombuffer(v, dtype=ACCESS_COLUMNS[k]) for k, v in part["access"].items()}
        acc["tensor"] = np.asarray(tensors, dtype=np.int64)[acc["tensor"]]
        for k, v in cols.items():
            self.columns[k].frombytes(np.ascontiguousarray(v, dtype=INSTRUCTION_COLUMNS[k]).tobytes())
        for k, v in acc.items():
            self.access[k].frombytes(np.ascontiguousarray(v, dtype=ACCESS_COLUMNS[k]).tobytes())

    def merge_contexts(self, nests: list[tuple[tuple[int, int], ...]], *, first_loop: int,
                       loop_shift: int) -> list[int]:
        """Another process's loop contexts, its loops from `first_loop` on renumbered `loop_shift` higher:
        their ids here."""
        return [self.context_id(tuple((loop + loop_shift if loop >= first_loop else loop, it) for loop, it in nest))
                for nest in nests]

    def freeze(self) -> Trace:
        """Turn the columns into numpy arrays (zero-copy views of the recorded buffers)."""
        if not self.frozen:
            self.columns = {k: np.frombuffer(v, dtype=v.typecode) if len(v) else np.zeros(0, v.typecode)
                            for k, v in self.columns.items()}
            self.access = {k: np.frombuffer(v, dtype=v.typecode) if len(v) else np.zeros(0, v.typecode)
                           for k, v in self.access.items()}
            self.frozen = True
        return self

    def nbytes(self) -> int:
        """Memory held by the columns, for the benchmarks' accounting."""
        return sum(v.itemsize * len(v) for v in (*self.columns.values(), *self.access.values()))
