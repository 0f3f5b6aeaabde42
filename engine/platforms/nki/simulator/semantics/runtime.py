"""The simulator state: loops, the instruction being issued, the hardware rules, and the trace.

Every NKI operation goes through the active `Simulator`: `begin` (flush the previous instruction, find
the kernel line), `operand` (resolve an input tile, check scope/partitions), `result` (a new tile for a
functional ISA call, held *pending* until we know where it goes) and `commit` (write the destination,
check buffer rules, initialisation and races, append the trace row).

A pending result exists because `dst[idx] = nisa.op(...)` is one instruction on the device writing
straight into `dst`, while `t = nisa.op(...)` writes a fresh tile: the destination is only known once
Python calls `__setitem__` (or when the next operation starts and nothing claimed the result).

Two optional helpers see the run through small interfaces and are not needed to read it: a block
recycler (`recycler`, recycling.py: storage of blocked on-chip tensors), and a loop splitter
(`splitter`, `Splitter` below; parallel.py: the halves of a top-level affine loop in two processes).
Queued PSUM accumulation is accumulation.py's, the affine race rule races.py's.

Long because what is left, some 650 lines (over the ~600 the other modules keep to), is one state machine around the
pending result (issue, resolve operands, hold the result, commit it, write, assign), whose steps read
and change each other's state; split further, each part would need the others to be read.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError, NKIError, NKIRuntimeError
from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.semantics import semantics
from engine.platforms.nki.simulator.semantics.accumulation import LazyMatmul, MatmulQueue
from engine.platforms.nki.simulator.semantics.indirect import has_tile_index, tile_indices
from engine.platforms.nki.simulator.semantics.races import RaceCheck
from engine.platforms.nki.simulator.semantics.tensors import (
    ON_CHIP,
    SBUF,
    Access,
    Accumulate,
    Buffer,
    Derived,
    FancyAccess,
    Tensor,
    View,
    Window,
    trace_rows,
)
from engine.platforms.nki.simulator.speed.liveness import Liveness
from engine.platforms.nki.simulator.speed.recycling import BlockRecycler
from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, MemorySpace, TensorInfo, Trace
from engine.platforms.nki.simulator.verification.program import ProgramRecorder

_ACTIVE: Simulator | None = None
_SCALARS = (int, float, bool, np.generic)


def active(op: str) -> Simulator:
    if _ACTIVE is None:
        raise NKICompileError(op, "NKI operations run only inside a simulated kernel "
                                  "(call engine.platforms.nki.simulator.simulate or a @nki.jit kernel with numpy arrays)")
    return _ACTIVE


def instruction(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate an NKI operation: numpy/shape errors inside it become NKICompileErrors naming it."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except NKIError:
                raise
            except (ValueError, TypeError, IndexError) as exc:
                raise NKICompileError(name, str(exc)) from exc

        run.nki_name = name  # type: ignore[attr-defined]
        return run

    return wrap


_CURRENT = object()  # Simulator.write's default: the current instruction's garbage partitions


@dataclass(slots=True, eq=False)
class Garbage:
    """Which partitions of an instruction's result were computed from never-written elements (`rows`, or all of
    them when a one-partition operand is broadcast), and the first such read (reported if it cannot stay)."""

    rows: np.ndarray
    source: Access
    op: str

    def rows_for(self, partitions: int) -> np.ndarray | None:
        if len(self.rows) == partitions:
            return self.rows
        if len(self.rows) == 1:
            return np.full(partitions, bool(self.rows[0]))
        return None

    def union(self, other: Garbage) -> Garbage:
        n = max(len(self.rows), len(other.rows))
        mine, theirs = self.rows_for(n), other.rows_for(n)
        if mine is None or theirs is None:  # operands of different partition counts: keep the first
            return self
        return Garbage(mine | theirs, self.source, self.op)


@dataclass(slots=True, eq=False)
class Pending:
    """A functional instruction whose destination is not known yet."""

    op: str
    engine: Engine
    dtype: str  # the dtype it computes in
    data: Any  # the values (a LazyMatmul until someone needs them)
    full_shape: tuple[int, ...]
    window: Window | None
    reads: list[Any]
    line: int
    ctx: int
    nest: tuple
    partitions: int
    scope: tuple
    free: int
    flops: int
    is_transpose: bool
    tile: Tensor  # the result tile the kernel holds
    allowed: frozenset  # the memory spaces it may write
    native_acc: bool  # accumulates in place into PSUM (the Tensor Engine)
    compute: str | None
    reduce: str | None = None  # loop_reduce: the combining operator
    garbage: Garbage | None = None  # result partitions computed from never-written ones (Simulator.compute)


class SplitHalf(Protocol):
    """One process's half of a split loop (parallel.Split): it files what the half does to tensors made
    before the split, for the merge to check and carry over."""

    bounds: range  # the iterations this process runs
    child: bool  # the second half, run by the forked process

    def read(self, acc: Access) -> None: ...
    def wrote(self, acc: Access) -> None: ...
    def named(self, name: str) -> None: ...  # a tile name from the counter (the merge renumbers the child's)
    def traced(self, tid: int, t: Tensor) -> None: ...  # `t` got trace id `tid`
    def reduces_across(self, line: int, op: str, dst: Access) -> bool: ...  # a max/min the halves combine
    def reduce(self, sim: Simulator, p: Pending, dst: Access, initialised: bool) -> None: ...  # commit one


class Splitter(Protocol):
    """What the runtime asks of the loop splitter (parallel.LoopSplitter)."""

    def remember(self, t: Tensor) -> None: ...  # made outside every loop: the halves name it by serial
    def trace_id(self, t: Tensor) -> int | None: ...  # the id a merged half gave `t`, if any
    def start(self, sim: Simulator, line: int, bounds: range) -> SplitHalf | None: ...  # fork, if it may
    def join(self, sim: Simulator, half: SplitHalf) -> None: ...  # child: hand over and exit; parent: merge
    def abandon(self, half: SplitHalf) -> None: ...  # the parent's half failed: kill the child


class Simulator:
    def __init__(self, platform: Any, *, record_trace: bool, kernel_file: str, recycler: BlockRecycler | None = None,
                 liveness: Liveness | None = None, splitter: Splitter | None = None,
                 recorder: ProgramRecorder | None = None) -> None:
        self.platform = platform
        self.recorder = recorder  # builds the executable record (program.py), when asked for
        self.recycler = recycler
        self.liveness = liveness or Liveness()
        self.splitter = splitter
        self.split: SplitHalf | None = None  # the half of a split loop this process is running
        self.trace = Trace()
        self.record_trace = record_trace
        self.kernel_file = kernel_file
        self.stack: list[tuple[int, int]] = []
        self.nest: tuple[tuple[int, int], ...] = ()
        # The nest without unrolled (static) loops: a tile lives in the iteration of the loops that are
        # real loops on the device, so only those scope it.
        self.scope: tuple[tuple[int, int], ...] = ()
        self.ctx = self.trace.context_id(())
        # Per loop execution, by id: its kind, its line, whether it is still running.
        self.loop_kind: list[LoopKind] = []
        self.loop_line: list[int] = []
        self.loop_open: list[bool] = []
        self.races = RaceCheck(self.loop_kind, self.loop_open, self.loop_line)
        self.matmuls = MatmulQueue()
        self.pending: Pending | None = None
        self.op = ""
        self.garbage: Garbage | None = None  # the current instruction's garbage partitions, if any
        self.line_no = 0
        self.lines: dict[tuple[Any, int], int] = {}  # (code, bytecode offset) -> kernel line
        self.instructions = 0
        self.counter = 0
        self.program: tuple[int, ...] = ()
        self.grid: tuple[int, ...] = ()
        self.shared: list[Tensor] = []  # HBM tensors declared by SPMD program 0, reused by the others
        self.shared_next = 0

    def remember(self, t: Tensor) -> Tensor:
        """A tensor is made: one made outside every loop is the splitter's to know."""
        if not self.stack and self.splitter is not None:
            self.splitter.remember(t)
        return t

    def start_program(self, program: tuple[int, ...], grid: tuple[int, ...]) -> None:
        if self.pending is not None:
            self.flush()
        self.program = program
        self.grid = grid
        self.shared_next = 0

    # -- lifecycle ----------------------------------------------------------------------------------
    def __enter__(self) -> Simulator:
        global _ACTIVE
        if _ACTIVE is not None:
            raise RuntimeError("a simulation is already running in this process")
        _ACTIVE = self
        return self

    def __exit__(self, *exc: Any) -> None:
        global _ACTIVE
        _ACTIVE = None

    def line(self) -> int:
        f = sys._getframe(2)
        target = self.kernel_file
        while f is not None:
            code = f.f_code
            if code.co_filename == target:
                # f_lineno scans the code's line table from its start: cached per bytecode offset.
                key = (code, f.f_lasti)
                line = self.lines.get(key)
                if line is None:
                    line = self.lines[key] = f.f_lineno
                return line
            f = f.f_back
        return 0

    def begin(self, op: str) -> Simulator:
        if self.pending is not None:
            self.flush()
        self.op = op
        self.line_no = self.line()
        self.garbage = None
        return self

    def fresh_name(self, prefix: str) -> str:
        self.counter += 1
        name = f"{prefix}_{self.counter}"
        if self.split is not None:
            self.split.named(name)
        return name

    # -- loops -------------------------------------------------------------------------------------
    def loop(self, kind: LoopKind, bounds: range) -> Iterator[int]:
        line = self.line()
        loop_id = len(self.loop_kind)
        self.loop_kind.append(kind)
        self.loop_line.append(line)
        self.loop_open.append(True)
        self.trace.add_loop(LoopInfo(kind=kind, trip_count=len(bounds), line=line))
        depth = len(self.stack)
        split = None
        if depth == 0 and kind == LoopKind.AFFINE and self.splitter is not None and len(bounds) >= 2 \
                and not self.grid:
            split = self.splitter.start(self, line, bounds)
            if split is not None:
                bounds = split.bounds
                self.split = split
        self.stack.append((loop_id, 0))
        recycler = self.recycler
        home_loops = self.liveness.home_loops
        outer_nest, outer_scope = self.nest, self.scope  # inner loops restore both when they end
        scoped = kind != LoopKind.STATIC  # an unrolled loop does not scope the tiles made in it
        try:
            for i in bounds:
                here = (loop_id, i)
                self.stack[depth] = here
                self.nest = (*outer_nest, here)
                self.scope = (*outer_scope, here) if scoped else outer_scope
                self.ctx = self.trace.context_id(self.nest)
                yield i
                if recycler is not None and (depth == 0 or line in home_loops):
                    # Blocks whose home is this loop die with the iteration: settle what may touch them.
                    if self.pending is not None:
                        self.flush()
                    if depth == 0:
                        self.matmuls.run_all()  # queued groups hold views of blocks about to be recycled
                    recycler.end_iteration(None if depth == 0 else line)
            if split is not None:
                if self.pending is not None:
                    self.flush()  # while the split is on: the tile it makes is the child's to report
                self.split = None
                self.splitter.join(self, split)  # type: ignore[union-attr]  # the child's half ends here
        finally:
            if split is not None and self.split is split and not split.child:
                self.split = None
                self.splitter.abandon(split)  # type: ignore[union-attr]  # the parent's half failed
            if self.pending is not None:
                self.flush()
            del self.stack[depth:]
            self.nest = tuple(self.stack)
            self.scope = tuple(e for e in self.nest if self.loop_kind[e[0]] != LoopKind.STATIC)
            self.ctx = self.trace.context_id(self.nest)
            self.loop_open[loop_id] = False

    # -- tensors ------------------------------------------------------------------------------------
    def declare(self, op: str, shape: Any, dtype: Any, buffer: Buffer, *, name: str = "", fill: Any = None,
                poison: bool = False) -> Tensor:
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        shape = tuple(shape)
        dtype = dt.as_dtype(dtype)
        if not isinstance(buffer, Buffer):
            raise NKICompileError(op, f"buffer must be nl.sbuf, nl.psum or an HBM buffer, got {buffer!r}")
        name = name or self.fresh_name("t")
        initialised = fill is not None
        if buffer.space == MemorySpace.HBM and self.grid:
            if any(self.program):
                t = self.shared[self.shared_next]
                self.shared_next += 1
                return t
        blocked = self.recycler is not None and self.recycler.stores_by_block(shape, buffer, fill)
        data = None
        if fill is not None and not blocked:
            dims = tuple(int(s) for s in shape)
            # calloc'd zeros stay lazy (pages appear when touched), like an untouched declaration.
            data = np.zeros(dims, dtype=dtype.storage) if fill == 0 else np.full(dims, fill, dtype=dtype.storage)
        t = Tensor(name, shape, dtype, buffer, data=data, initialised=initialised, poison=poison and not initialised,
                   scope=self.scope, lazy=blocked)
        t.home = self.liveness.home.get(self.line())
        if blocked:
            t.fill = fill
            self.recycler.adopt(t, t.home)  # type: ignore[union-attr]
        self.check_declared(op, t)
        if self.recorder is not None and not blocked and (fill is not None or t.poisoned):
            self.recorder.declared(t, ("fill", fill) if fill is not None else ("nan",))
        if buffer.space == MemorySpace.HBM and self.grid:
            self.shared.append(t)
        return self.remember(t)

    def check_declared(self, op: str, t: Tensor) -> None:
        if t.space == MemorySpace.HBM:
            return
        parts = t.shape[t.partition_axis] if t.shape else 1
        limit = self.platform.partitions
        if parts > limit:
            raise NKICompileError(op, f"partition dimension {parts} of tensor {t.name!r} {t.shape} exceeds "
                                      f"{limit}")
        per_part = t.bytes_per_partition
        if t.space == MemorySpace.PSUM:
            bank = self.platform.psum_bank_bytes_per_partition
            if per_part > bank:
                raise NKICompileError(op, f"PSUM tile {t.name!r} {t.shape} needs {per_part} bytes per partition, "
                                          f"over the {bank}-byte PSUM tile limit ({bank // 4} fp32)")
        elif per_part > self.platform.sbuf_bytes_per_partition:
            raise NKICompileError(op, f"SBUF tile {t.name!r} {t.shape} needs {per_part} bytes per partition, over "
                                      f"the {self.platform.sbuf_bytes_per_partition}-byte SBUF partition of "
                                      f"{self.platform.name}")

    def tensor_id(self, t: Tensor) -> int:
        if t.trace_id < 0:
            tid = self.splitter.trace_id(t) if self.splitter is not None else None
            if tid is None:
                tid = self.trace.add_tensor(TensorInfo(
                    name=t.name, space=t.space, shape=t.shape, dtype=t.dtype.name, partition_axis=t.partition_axis,
                    bytes_per_partition=t.bytes_per_partition, total_bytes=int(np.prod(t.shape)) * t.dtype.itemsize))
                if self.split is not None:
                    self.split.traced(tid, t)
            if self.recorder is not None:
                self.recorder.traced(tid, t)
            t.trace_id = tid
        return t.trace_id

    # -- operands -----------------------------------------------------------------------------------
    def operand(self, x: Any, window: Window | None = None, op: str | None = None,
                on_chip: bool = True) -> Any:
        """Resolve an input: an Access for tensors/views, the value itself for scalars."""
        op = op or self.op
        if isinstance(x, View):
            items = tile_indices(self, x.items, op) if has_tile_index(x.items) else x.items
            acc = x.base.access(items, window, op)
        elif isinstance(x, Tensor):
            acc = x.whole(window, op)
        elif isinstance(x, Derived):
            acc = self.derived(x, window, op)
        elif isinstance(x, _SCALARS):
            return x
        elif isinstance(x, np.ndarray):
            return x
        else:
            raise NKICompileError(op, f"expected a tile or a scalar, got {type(x).__name__}")
        t = acc.tensor
        if t.scope and self.scope[:len(t.scope)] != t.scope:
            raise NKICompileError(op, f"tensor {t.name!r} is used outside the loop iteration that defined it "
                                      f"(defined inside the loop at line {self.loop_line[t.scope[-1][0]]})")
        if on_chip:
            if t.space not in ON_CHIP:
                raise NKICompileError(op, f"operand {t.name!r} is in HBM; {op} reads SBUF or PSUM tiles "
                                          "(load it with nl.load first)")
            if acc.partitions > self.platform.partitions:
                raise NKICompileError(op, f"partition dimension {acc.partitions} of operand {t.name!r} "
                                          f"exceeds {self.platform.partitions}")
        return acc

    def via_sbuf(self, acc: Access, op: str) -> Access:
        """An implicit PSUM -> SBUF copy the compiler inserts (e.g. nl.store of a matmul result)."""
        values = self.compute("move", (), [acc], op)
        tile = Tensor(self.fresh_name("psum_to_sbuf"), tuple(values.shape), acc.tensor.dtype, SBUF,
                      data=np.array(values, dtype=acc.tensor.dtype.storage), initialised=True, scope=self.scope,
                      is_tile=True)
        copy = tile.whole(None, op)
        if self.recorder is not None:
            self.recorder.store("assign", values, copy)
        self.emit("tensor_copy", Engine.VECTOR, acc.tensor.dtype.name, copy.partitions, copy.free, copy.size, [acc],
                  [copy], self.line_no, self.ctx)
        return copy

    def derived(self, d: Derived, window: Window | None, op: str) -> Access:
        src = self.operand(d.source, None, op)
        if not isinstance(src, Access):
            raise NKICompileError(op, f"{d.kind} needs a tile")
        return d.view(src, self.read(src, op), window, op)

    def read(self, acc: Any, op: str | None = None, partition_local: bool = False) -> Any:
        if not isinstance(acc, Access):
            return acc
        if self.split is not None:
            self.split.read(acc)
        if acc.tensor.deferred:
            self.matmuls.run(acc.tensor)
        if isinstance(acc, FancyAccess):
            if acc.base_init is not None and not acc.base_init[acc.index].all():
                self._uninitialised(acc, op)
            return acc.base[acc.index]
        if acc.init is not None and not acc.init.all():
            if not (partition_local and self._read_partitions(acc, op)):
                self._uninitialised(acc, op)
        return acc.array

    def compute(self, kind: str, params: tuple, operands: list[Any], op: str | None = None, *, raw: bool = False,
                **extra: Any) -> Any:
        """Read the operands (Accesses; scalars and host arrays pass as they are) and compute `kind` of
        semantics.py on their values: the one implementation of what an instruction computes, which the
        program records for the replayer. `raw` reads storage without the initialisation check."""
        local = kind in semantics.PARTITION_LOCAL
        values = [(o.array if raw else self.read(o, op, local)) if isinstance(o, Access) else o for o in operands]
        out = semantics.KINDS[kind](params, values, tuple(isinstance(o, Access) for o in operands), **extra)
        if self.recorder is not None:
            self.recorder.compute(kind, params, operands, out, self.line_no)
        return out

    def _read_partitions(self, acc: Access, op: str | None) -> bool:
        """An operand of an instruction that computes partition by partition (semantics.PARTITION_LOCAL) holds
        never-written elements: what the device computes from them is garbage in the same result partitions,
        which is harmless unless something reads it. Note those partitions (True); the result leaves them
        unwritten (`write`, `flush`), so a later read of them is the error. AWS's simulator runs such kernels
        (nki/guides/nki_simulator.rst: never-written memory holds NaN sentinels, which reach the outputs only if
        the kernel uses them); the correct ones run here too. False where the rule does not apply."""
        if type(acc) is not Access or acc.tensor.blocks is not None or acc.space == MemorySpace.HBM \
                or acc.tensor.partition_axis != 0 or not acc.init.ndim:
            return False
        rows = ~acc.init.reshape(acc.init.shape[0], -1).all(axis=1)
        found = Garbage(rows, acc, op or self.op)
        self.garbage = found if self.garbage is None else self.garbage.union(found)
        return True

    def _garbage_lands(self, garbage: Garbage, dst: Access, accumulate: Any) -> np.ndarray:
        """The destination partitions the garbage goes to: they must be a plain region nothing has written
        (its written elements only ever grow, here and in the verifier's replay); else the read that made the
        garbage is the error."""
        if accumulate or type(dst) is not Access or dst.init is None or dst.tensor.blocks is not None \
                or not dst.array.ndim:
            self._uninitialised(garbage.source, garbage.op)
        rows = garbage.rows_for(dst.array.shape[0])
        if rows is None or dst.init[rows].any():
            self._uninitialised(garbage.source, garbage.op)
        return rows

    def _uninitialised(self, acc: Access, op: str | None) -> None:
        t = acc.tensor
        region = ", ".join(f"{lo}:{hi}" for lo, hi in acc.box)
        raise NKIRuntimeError(op or self.op, f"reads uninitialised memory of tensor {t.name!r} {t.shape} "
                                             f"(region [{region}] was never written)")

    # -- results ------------------------------------------------------------------------------------
    def result(self, data: np.ndarray, dtype: dt.DType, *, engine: Engine, reads: list[Any],
               window: Window | None = None, full_shape: tuple[int, ...] | None = None,
               allowed: frozenset = ON_CHIP, default: Buffer = SBUF, flops: int | None = None,
               partitions: int | None = None, free: int | None = None, is_transpose: bool = False,
               native_acc: bool = False, compute: str | None = None, lazy: Any = None) -> Tensor:
        """Hold `data` as the pending result of the current instruction and return its tile.

        `lazy` = (stationary, moving) defers a matmul: accumulating matmuls into one PSUM tile are
        queued, and run when the tile is next used (accumulation.py)."""
        if lazy is not None:
            data = LazyMatmul(*lazy)
        full = tuple(full_shape) if full_shape is not None else tuple(data.shape)
        if full and full[0] > self.platform.partitions:
            raise NKICompileError(self.op, f"result partition dimension {full[0]} exceeds "
                                           f"{self.platform.partitions} (shape {full})")
        whole = full == tuple(data.shape) and not window
        # The tile keeps `data` only if it owns it: an op may return a view of its operand (a copy, a
        # transpose), and a tile nobody claims gets its own copy in `flush`.
        owns = whole and lazy is None and isinstance(data, np.ndarray) and data.flags.owndata and self.garbage is None
        tile = self.remember(Tensor.tile(self.fresh_name(self.op), full, dtype, default, data if owns else None,
                                         whole, self.scope))
        if default.space == MemorySpace.SBUF and tile.bytes_per_partition > self.platform.sbuf_bytes_per_partition:
            raise NKICompileError(self.op, f"result tile {full} needs {tile.bytes_per_partition} bytes per "
                                           f"partition, over the {self.platform.sbuf_bytes_per_partition}-byte "
                                           f"SBUF partition of {self.platform.name}")
        size = math.prod(data.shape)
        parts = partitions if partitions is not None else (data.shape[0] if len(data.shape) else 1)
        self.pending = Pending(
            garbage=self.garbage,
            op=self.op, engine=engine, dtype=compute or dtype.name, data=data, full_shape=full, window=window,
            reads=reads, line=self.line_no, ctx=self.ctx, nest=self.nest, partitions=parts, scope=self.scope,
            free=free if free is not None else (size // parts if parts else 0),
            flops=flops if flops is not None else size, is_transpose=is_transpose, tile=tile, allowed=allowed,
            native_acc=native_acc, compute=compute)
        return tile

    def flush(self) -> None:
        """Commit the pending result into its own fresh tile (nothing claimed it)."""
        p = self.pending
        self.pending = None
        if p is None:
            return
        tile = p.tile
        value = p.data  # what the instruction computed (the record names it)
        if isinstance(p.data, LazyMatmul):
            p.data = p.data.compute()
        if tile.data is None:  # a tile is stored only if nothing claimed it
            if not p.window and tile.shape == np.shape(p.data) and p.garbage is None:
                tile.data, tile.init = np.array(p.data, dtype=tile.dtype.storage), None
            else:
                tile.allocate()
        windowed = bool(tile.data.shape != p.data.shape or p.window)
        if windowed or tile.init is not None:
            acc = tile.access((Ellipsis,), p.window, p.op)
            if isinstance(acc, Access) and acc.array.size:
                rows = self._garbage_lands(p.garbage, acc, None) if p.garbage is not None else None
                semantics.fill_tile(acc.array, p.data, windowed, tile.dtype, p.op)
                if acc.init is not None:
                    acc.init[...] = True
                    if rows is not None:
                        acc.init[rows] = False
        else:
            acc = tile.whole(None, p.op)
            if tile.dtype.mantissa_bits:
                tile.data = tile.dtype.round(tile.data)
                acc = tile.whole(None, p.op)
        if self.recorder is not None:
            self.recorder.store("flush", value, acc, windowed)
        if p.reduce is not None:  # a loop_reduce into a fresh tile of its own accumulates nothing: it is a copy
            p.op = "copy"
        self.emit_pending(p, acc, accumulate=False)

    def commit(self, p: Pending, dst: Access, accumulate: str | None, race_accumulate: bool = False,
               traced_as_combine: bool = False) -> None:
        t = dst.tensor
        if t.space not in p.allowed:
            where = " or ".join(sorted(m.name for m in p.allowed))
            raise NKICompileError(p.op, f"{p.op} writes its result to {where}, but the destination {t.name!r} is "
                                        f"in {t.space.name}")
        if t.scope and p.scope[:len(t.scope)] != t.scope:
            raise NKICompileError(p.op, f"tensor {t.name!r} is used outside the loop iteration that defined it "
                                        f"(defined inside the loop at line {self.loop_line[t.scope[-1][0]]})")
        if t.space == MemorySpace.PSUM:
            per_part = dst.free * 4
            bank = self.platform.psum_bank_bytes_per_partition
            if per_part > bank:
                raise NKICompileError(p.op, f"PSUM tile of {dst.free} elements per partition ({per_part} bytes) "
                                            f"exceeds the {bank}-byte PSUM tile")
        reads = p.reads
        if accumulate or traced_as_combine:
            reads = [*reads, dst]
        if isinstance(p.data, LazyMatmul) and accumulate == "add" and not isinstance(dst, FancyAccess) \
                and dst.array.shape == p.data.shape:
            self.defer(dst, p.data, p.op, p.nest, [r.tensor for r in p.reads if isinstance(r, Access)])
            if self.recorder is not None:
                self.recorder.store("defer", p.data, dst)
            self.emit_pending(p, dst, accumulate=True, reads=reads)
            return
        # Any other matmul is computed by the write (semantics.write): accumulated, reshaped or scattered.
        self.write(dst, p.data, p.op, accumulate=accumulate, nest=p.nest, race_accumulate=race_accumulate,
                   garbage=p.garbage)
        self.emit_pending(p, dst, accumulate=bool(accumulate), reads=reads)

    def emit_pending(self, p: Pending, dst: Access, *, accumulate: bool, reads: list[Any] | None = None) -> None:
        self.emit(p.op, p.engine, p.dtype, p.partitions, p.free, p.flops, reads if reads is not None else p.reads,
                  [dst], p.line, p.ctx, p.is_transpose)

    # -- writes -------------------------------------------------------------------------------------
    def write(self, dst: Access, values: Any, op: str, *, accumulate: str | None = None,
              nest: tuple | None = None, race_accumulate: bool = False, garbage: Any = _CURRENT) -> None:
        """`garbage`: the partitions of `values` computed from never-written ones (a pending result's own;
        by default the current instruction's)."""
        t = dst.tensor
        if garbage is _CURRENT:
            garbage = self.garbage
        rows = self._garbage_lands(garbage, dst, accumulate) if garbage is not None else None
        if self.split is not None:
            self.split.wrote(dst)
        if t.deferred:
            self.matmuls.run(t)
        if t.readers:
            self.matmuls.run_readers(t)
        if accumulate:
            self.read(dst, op)  # accumulating reads the destination: it must be initialised
        if self.recorder is not None:
            self.recorder.store("write", values, dst, accumulate, bool(race_accumulate))
        if isinstance(dst, FancyAccess):
            semantics.write_fancy(dst.base, dst.index, dst.shape, values, accumulate, t.dtype, op)
            if dst.base_init is not None:
                dst.base_init[dst.index] = True
            t.version += 1
            return
        if dst.array.size == 0:
            return
        semantics.write(dst.array, values, accumulate, t.dtype, op)
        if dst.init is not None:
            if t.blocks is None:
                dst.init[...] = True
                if rows is not None:
                    dst.init[rows] = False
            else:
                t.recycler.mark_written(t, dst)  # type: ignore[union-attr]
        t.version += 1
        self.races.write(dst, bool(accumulate) or race_accumulate, op, self.nest if nest is None else nest)

    def defer(self, dst: Access, mm: LazyMatmul, op: str, nest: tuple, sources: list[Tensor]) -> None:
        """Queue `dst += stationary.T @ moving` (accumulation.py); it runs when dst is next used."""
        if self.split is not None:
            self.split.wrote(dst)
        if dst.init is not None and not dst.init.all():
            if dst.space != MemorySpace.PSUM or isinstance(dst, FancyAccess):
                self._uninitialised(dst, op)
            self._zero_unwritten_psum(dst, op)
        self.races.write(dst, True, op, nest)
        self.matmuls.add(dst, mm, sources)

    def _zero_unwritten_psum(self, dst: Access, op: str) -> None:
        """`psum[...] += nc_matmul(...)` into a PSUM tile never written: the elements not written yet start at
        zero, as NKI 0.6's simulator treats it (release notes: it warns, the hardware's behaviour being
        undefined; the attention tutorials v8-v11 rely on it). Recorded before the open matmul as the same
        keep_written step the 2.30 nc_matmul takes (replay_checks.py requires a matmul to follow it)."""
        written = np.array(dst.init)
        zeros = semantics.keep_written((), [dst.array, written], (True, False))
        if self.recorder is not None:
            self.recorder.before_open("keep_written", (), [dst, written], zeros, ("write", 0, dst, None, True))
        dst.array[...] = zeros
        if dst.tensor.blocks is None:
            dst.init[...] = True  # type: ignore[index]
        else:
            dst.tensor.recycler.mark_written(dst.tensor, dst)  # type: ignore[union-attr]
        dst.tensor.version += 1

    def finish(self) -> None:
        """End of the kernel: run what is still pending or deferred."""
        if self.pending is not None:
            self.flush()
        self.matmuls.run_all()

    # -- assignment: dst[items] = value -------------------------------------------------------------
    def assign(self, tensor: Tensor, items: Any, value: Any) -> None:
        self.garbage = None  # a pending result carries its own (commit); a plain value has none
        accumulate = None
        if isinstance(value, Accumulate):
            accumulate = value.op
            value = value.value
        p = self.pending
        if p is not None and value is p.tile:
            self.pending = None
            try:
                dst = tensor.access(items, p.window, p.op)
            except NKIError as e:
                raise e.with_line(p.line) from None
            if p.reduce is not None:
                # loop_reduce: combine with what the destination holds; the first contribution initialises it.
                initialised = isinstance(dst, FancyAccess) or dst.init is None or bool(dst.init.all())
                try:
                    split = self.split
                    if split is not None and split.reduces_across(p.line, p.reduce, dst):
                        split.reduce(self, p, dst, initialised)  # both halves reduce; the merge combines them
                    else:
                        self.commit(p, dst, p.reduce if initialised else None, race_accumulate=True)
                except NKIError as e:
                    raise e.with_line(p.line) from None
                p.tile.alias = dst if not isinstance(dst, FancyAccess) else None
                return
            if accumulate and not (accumulate == "add" and p.native_acc and dst.space == MemorySpace.PSUM):
                # Only the Tensor Engine accumulates in place (into PSUM); elsewhere `+=` is an extra
                # Vector Engine instruction reading the destination and the fresh tile.
                self.pending = p
                self.flush()
                self.begin("tensor_tensor")
                self._combine_into(tensor, items, value, accumulate)
                return
            try:
                self.commit(p, dst, accumulate)
            except NKIError as e:
                raise e.with_line(p.line) from None
            tile = p.tile
            if not isinstance(dst, FancyAccess):
                tile.alias = dst  # later uses of the result tile read the destination
            return
        self.begin("tensor_copy" if not accumulate else "tensor_tensor")
        if accumulate:
            self._combine_into(tensor, items, value, accumulate)
            return
        dst = tensor.access(items, None, self.op)
        if dst.space == MemorySpace.HBM:
            raise NKICompileError("store", f"writing HBM tensor {tensor.name!r} needs nl.store (or a DMA copy)")
        if isinstance(value, _SCALARS):
            self.write(dst, self.compute("scalar", (value,), []), "memset")
            self.emit("memset", Engine.VECTOR, tensor.dtype.name, dst.partitions, dst.free, dst.size, [], [dst],
                      self.line_no, self.ctx)
            return
        src = self.operand(value, None, "tensor_copy", on_chip=False)
        if isinstance(src, Access) and src.space == MemorySpace.HBM:
            raise NKICompileError("load", f"reading HBM tensor {src.tensor.name!r} into {tensor.name!r} needs "
                                          "nl.load (or a DMA copy)")
        vals = self.compute("move", (), [src], "tensor_copy")
        self.write(dst, vals, "tensor_copy")
        self.emit("tensor_copy", Engine.VECTOR, tensor.dtype.name, dst.partitions, dst.free, dst.size,
                  [src] if isinstance(src, Access) else [], [dst], self.line_no, self.ctx)

    def _combine_into(self, tensor: Tensor, items: Any, value: Any, op: str) -> None:
        dst = tensor.access(items, None, "tensor_tensor")
        src = self.operand(value, None, "tensor_tensor")
        vals = self.compute("move", (), [src], "tensor_tensor")
        self.write(dst, vals, "tensor_tensor", accumulate=op)
        self.emit("tensor_tensor", Engine.VECTOR, tensor.dtype.name, dst.partitions, dst.free, dst.size,
                  [dst] + ([src] if isinstance(src, Access) else []), [dst], self.line_no, self.ctx)

    # -- the trace ----------------------------------------------------------------------------------
    def emit(self, op: str, engine: Engine, dtype: str, partitions: int, free: int, flops: int,
             reads: list[Any], writes: list[Access], line: int, ctx: int, is_transpose: bool = False) -> None:
        self.instructions += 1
        if self.recorder is not None:
            self.recorder.emitted(self.instructions - 1, reads, writes)
        if not self.record_trace:
            return
        moved, rows = trace_rows(reads, writes, self.tensor_id)
        self.trace.record(engine, op, dtype, partitions, free, flops, is_transpose, moved, ctx, line, rows)
