"""The simulator state: loops, the instruction being issued, the hardware rules, and the trace.

Every NKI operation goes through the active `Simulator`: `begin` (flush the previous instruction, find
the kernel line), `operand` (resolve an input tile, check scope/partitions), `result` (a new tile for a
functional ISA call, held *pending* until we know where it goes) and `commit` (write the destination,
check buffer rules, initialisation and races, append the trace row).

A pending result exists because `dst[idx] = nisa.op(...)` is one instruction on the device writing
straight into `dst`, while `t = nisa.op(...)` writes a fresh tile: the destination is only known once
Python calls `__setitem__` (or when the next operation starts and nothing claimed the result).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import pickle
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import dtypes as dt
from .errors import NKICompileError, NKIError, NKIRuntimeError
from .liveness import Liveness
from .memory import (
    EVICTED,
    Access,
    Accumulate,
    BlockPool,
    Buffer,
    Derived,
    FancyAccess,
    ParDim,
    Tensor,
    View,
    Window,
    apply_recipe,
    next_serial,
)
from .parallel import (
    IDEMPOTENT,
    Exchange,
    ParallelFallback,
    Split,
    SplitLoop,
    box_array,
    child_exit,
    cut_view,
    overlapping,
    reap,
    share_storage,
    storage_cut,
)
from .trace import Engine, LoopInfo, LoopKind, Memory, TensorInfo, Trace

_ACTIVE: Simulator | None = None

SBUF = Buffer("sbuf", Memory.SBUF)
PSUM = Buffer("psum", Memory.PSUM)
HBM = Buffer("hbm", Memory.HBM)
SHARED_HBM = Buffer("shared_hbm", Memory.HBM)
PRIVATE_HBM = Buffer("private_hbm", Memory.HBM)

ON_CHIP = frozenset((Memory.SBUF, Memory.PSUM))
_SCALARS = (int, float, bool, np.generic)
# Retired blocks kept with their values before their storage is reused (see memory.BlockPool).
RETIRED_BLOCK_BYTES = 64 * 2**20


def active(op: str) -> Simulator:
    if _ACTIVE is None:
        raise NKICompileError(op, "NKI operations run only inside a simulated kernel "
                                  "(call benchmark.nki.simulate or a @nki.jit kernel with numpy arrays)")
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


class Pending:
    """A functional instruction whose destination is not known yet."""

    __slots__ = ("op", "engine", "dtype", "data", "full_shape", "window", "reads", "line", "ctx", "nest",
                 "partitions", "free", "flops", "is_transpose", "tile", "allowed", "native_acc", "compute", "reduce", "scope")

    def __init__(self, op: str, engine: Engine, dtype: str, data: Any, full_shape: tuple[int, ...],
                 window: Window | None, reads: list[Any], line: int, ctx: int, nest: tuple, partitions: int,
                 scope: tuple, free: int, flops: int, is_transpose: bool, tile: Tensor, allowed: frozenset,
                 native_acc: bool, compute: str | None) -> None:
        self.op = op
        self.engine = engine
        self.dtype = dtype
        self.data = data
        self.full_shape = full_shape
        self.window = window
        self.reads = reads
        self.line = line
        self.ctx = ctx
        self.nest = nest
        self.partitions = partitions
        self.scope = scope
        self.free = free
        self.flops = flops
        self.is_transpose = is_transpose
        self.tile = tile
        self.allowed = allowed
        self.native_acc = native_acc
        self.compute = compute
        self.reduce = None  # loop_reduce: the combining operator


class Simulator:
    def __init__(self, platform: Any, *, record_trace: bool, kernel_file: str, recycle: bool = False,
                 liveness: Liveness | None = None, parallel: dict[int, SplitLoop] | None = None) -> None:
        self.platform = platform
        self.pool = BlockPool(RETIRED_BLOCK_BYTES) if recycle else None
        self.liveness = liveness or Liveness()
        self.trace = Trace()
        self.record_trace = record_trace
        self.kernel_file = kernel_file
        self.stack: list[tuple[int, int]] = []
        self.nest: tuple[tuple[int, int], ...] = ()
        # The nest without unrolled (static) loops: a tile lives in the iteration of the loops that are
        # real loops on the device, so only those scope it.
        self.scope: tuple[tuple[int, int], ...] = ()
        self.ctx = self.trace.context_id(())
        self.loop_kind: list[LoopKind] = []
        self.loop_line: list[int] = []
        self.loop_open: list[bool] = []
        self.pending: Pending | None = None
        self.op = ""
        self.line_no = 0
        self.lines: dict[tuple[Any, int], int] = {}  # (code, bytecode offset) -> kernel line
        self.instructions = 0
        self.counter = 0
        self.deferred_set: dict[int, Tensor] = {}  # tensors with queued PSUM accumulations
        self.program: tuple[int, ...] = ()
        self.grid: tuple[int, ...] = ()
        self.shared: list[Tensor] = []  # HBM tensors declared by SPMD program 0, reused by the others
        self.shared_next = 0
        # Splitting top-level affine loops across two processes (parallel.py): the loops that may be split,
        # by line; the split in progress; tensors made outside every loop, by serial.
        self.parallel = parallel or {}
        self.split: Split | None = None
        # Weak: a kernel's Python `range` loop makes its tiles outside every NKI loop, and holding them
        # all kept rope's 512 iterations of tiles alive (1.1 GB, every page of it faulted in fresh).
        self.top: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
        self.merged_tid: dict[int, int] = {}  # serial -> trace id given out when a child's trace merged
        self.shared_storage: set[int] = set()  # serials of tensors with storage later children share (outputs, adopted blocks)

    def remember(self, t: Tensor) -> Tensor:
        """Keep a tensor made outside every loop findable by serial: a split loop's child names it so."""
        if not self.stack:
            self.top[t.serial] = t
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
        return self

    def fresh_name(self, prefix: str) -> str:
        self.counter += 1
        name = f"{prefix}_{self.counter}"
        if self.split is not None and self.split.child:
            self.split.fresh.add(name)
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
        if depth == 0 and kind == LoopKind.AFFINE and line in self.parallel and len(bounds) >= 2 and not self.grid:
            split = self._split(line)
            if split is not None:
                half = (len(bounds) + 1) // 2
                bounds = bounds[half:] if split.child else bounds[:half]
        self.stack.append((loop_id, 0))
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
                if self.pool is not None:
                    if depth == 0:
                        # Queued matmul groups hold views of blocks the pool may now recycle: run them.
                        if self.pending is not None:
                            self.flush()
                        self.materialize_all()
                        self.pool.end_iteration(None)
                    elif line in home_loops:
                        if self.pending is not None:
                            self.flush()
                        self.pool.end_iteration(line)
            if split is not None:
                if self.pending is not None:
                    self.flush()  # while the split is on: the tile it makes is the child's to report
                self.split = None
                self._join(split)  # the child's half ends here: it hands its work over and exits
        finally:
            if split is not None and not split.child and self.split is split:
                self.split = None  # the parent's half failed: its child's work is not wanted
                reap(split, kill=True)
            if self.pending is not None:
                self.flush()
            del self.stack[depth:]
            self.nest = tuple(self.stack)
            self.scope = tuple(e for e in self.nest if self.loop_kind[e[0]] != LoopKind.STATIC)
            self.ctx = self.trace.context_id(self.nest)
            self.loop_open[loop_id] = False

    # -- splitting a top-level affine loop across two processes (parallel.py) ---------------------------
    def _split(self, line: int) -> Split | None:
        """Fork: the child runs the second half of the loop's iterations, the parent the first."""
        if self.pending is not None:
            # A result waiting for a destination: committed now, as the loop's first instruction would
            # (`parallel_loops` keeps loops that could claim it instead whole).
            self.flush()
        self.materialize_all()  # queued work from before the split belongs to neither half
        start = {"instructions": self.instructions, "counter": self.counter, "loops": len(self.loop_kind),
                 "rows": len(self.trace), "accesses": len(self.trace.access["tensor"]),
                 "contexts": len(self.trace.loop_contexts), "tensors": len(self.trace.tensors)}
        serial_next = next_serial()  # every tensor made from now on belongs to one half
        self.shared_storage |= {serial for serial, t in self.top.items() if t.memory == Memory.HBM and share_storage(t)}
        try:
            exchange = Exchange()
        except (OSError, ValueError):  # no room for the address space (the evaluation sandbox's limit)
            return None
        try:
            read_fd, write_fd = os.pipe()
        except OSError:
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            return None
        if pid == 0:
            os.close(read_fd)
            split = Split(serial_next, self.parallel[line], True, 0, write_fd)
            if self.pool is not None:
                inner = split.inner
                self.pool.outgoing = lambda t: t.serial < serial_next and not (t.home is not None and t.home in inner)
                self.pool.outgoing_arena = exchange
        else:
            os.close(write_fd)
            split = Split(serial_next, self.parallel[line], False, pid, read_fd)
        split.start = start
        split.shared = set(self.shared_storage)
        split.exchange = exchange
        self.split = split
        return split

    def _join(self, split: Split) -> None:
        if split.child:
            self._hand_over(split)  # does not return
        ours = {serial: box_array(boxes) for serial, boxes in split.writes.items()}  # while the child runs
        try:
            with os.fdopen(split.fd, "rb") as pipe:
                payload = pickle.load(pipe)
        except Exception:  # the child died before handing over
            payload = {"fallback": "the child process ended without its results"}
        except BaseException:  # interrupted while waiting: the child's work is not wanted
            reap(split, kill=True)
            raise
        reap(split, kill=False)
        if "fallback" in payload:
            raise ParallelFallback(payload["fallback"])
        try:
            self._check_halves(split, payload, ours)
            for serial, *_ in payload["data"]:
                if serial not in self.top:
                    raise ParallelFallback("the second half wrote a tensor the first half cannot name")
            self._merge(split, payload)
        except ParallelFallback:
            raise
        except Exception as err:  # a case the checks or the merge do not handle: one process will
            raise ParallelFallback(f"the merge failed: {type(err).__name__}: {err}") from err

    def _check_halves(self, split: Split, payload: dict[str, Any], ours: dict[int, Any]) -> None:
        """Raise ParallelFallback if the halves interacted in a way the merge cannot carry over. `ours`:
        the first half's written boxes as arrays, made while the second half was still running."""
        reduced = payload["reduced"]  # the child's max/min reductions, box -> operator
        child = payload["writes"]
        for serial, boxes in child.items():
            if overlapping(boxes, ours.get(serial)):
                raise ParallelFallback("both halves wrote one region")
            if overlapping(boxes, split.reduced.get(serial)) or overlapping(boxes, reduced.get(serial)):
                raise ParallelFallback("the second half wrote a region reduced across the loop")
        for serial, boxes in payload["reads"].items():
            if overlapping(boxes, ours.get(serial)) or overlapping(boxes, split.reduced.get(serial)) \
                    or overlapping(boxes, reduced.get(serial)):
                raise ParallelFallback("the second half read a region the first half wrote")
        for serial, ops in reduced.items():
            if serial in split.shared:
                raise ParallelFallback("the second half reduced into shared memory")
            theirs = split.reduced.get(serial, {})
            if overlapping(ops, ours.get(serial)):
                raise ParallelFallback("the first half wrote a region the second half reduced into")
            if len({*ops.values(), *theirs.values()}) > 1 and overlapping(ops, theirs):
                raise ParallelFallback("the halves reduced into one region with different operators")
            if not payload["presumed"].get(serial, set()) <= theirs.keys():
                raise ParallelFallback("the second half assumed a reduction the first half did not make")
        wrote_shared = any(serial in self.shared_storage for serial in (*payload["writes"], *reduced))
        if wrote_shared and (split.alias_read or payload["alias_read"]):
            raise ParallelFallback("a half read shared memory through an alias while the second half wrote it")
        if payload["alias_read"] and any(serial in self.shared_storage for serial in split.writes):
            raise ParallelFallback("the second half read shared memory through an alias the first half wrote")
        for serial in self.shared_storage:  # memory both processes see: the first half may have read the second's writes
            read = split.reads.get(serial)
            if overlapping(read, child.get(serial)) or overlapping(read, reduced.get(serial)):
                raise ParallelFallback("the first half read shared memory the second half wrote")

    def _hand_over(self, split: Split) -> None:
        """The child's end: send what it did to the parent and exit (never returns)."""
        code = 0
        try:
            self.materialize_all()
            payload = self._child_payload(split)
        except BaseException as err:  # noqa: BLE001 - any failure means: run the kernel in one process
            payload = {"fallback": f"the second half failed: {type(err).__name__}: {err}"}
            code = 1
        child_exit(split, payload, code)

    def _child_payload(self, split: Split) -> dict[str, Any]:
        if split.unmergeable:
            return {"fallback": split.unmergeable}
        data = []
        seen = set()
        for acc in split.views:
            t = acc.tensor
            cut = storage_cut(t, acc)
            if cut is None:
                return {"fallback": f"a write to tensor {t.name!r} outside its storage"}
            if (t.serial, *cut) in seen:
                continue
            seen.add((t.serial, *cut))
            where = None
            if t.blocks is not None or t.serial not in split.shared:  # else it wrote into the shared output
                where = split.exchange.put(acc.array)  # type: ignore[union-attr]
                if where is None:
                    return {"fallback": "the values the second half wrote do not fit the exchange memory"}
            data.append((t.serial, *cut, where, split.reduced.get(t.serial, {}).get(acc.box or ((0, 1),))))
        start = split.start
        trace = self.trace
        payload: dict[str, Any] = {
            # Boxes as arrays: they pickle and load several times faster than the tuples.
            "writes": {serial: box_array(boxes) for serial, boxes in split.writes.items()},
            "reads": {serial: box_array(boxes) for serial, boxes in split.reads.items()},
            "reduced": split.reduced, "presumed": split.presumed, "alias_read": split.alias_read,
            "data": data,
            "instructions": self.instructions - start["instructions"], "counter": self.counter - start["counter"],
            "loop_kind": self.loop_kind[start["loops"]:], "loop_line": self.loop_line[start["loops"]:],
            "loops": self.trace.loops[start["loops"]:],
            "fresh": split.fresh, "contexts": trace.loop_contexts[start["contexts"]:]}
        if self.record_trace:
            payload["trace"] = {"first_access": start["accesses"], "tid_serial": split.tid_serial,
                "columns": {k: v[start["rows"]:].tobytes() for k, v in trace.columns.items()},
                "access": {k: v[start["accesses"]:].tobytes() for k, v in trace.access.items()},
                "op_names": trace.op_names, "dtype_names": trace.dtype_names,
                "tensors": trace.tensors[start["tensors"]:]}
        return payload

    def _merge(self, split: Split, payload: dict[str, Any]) -> None:
        """Carry the child's half over, as if the parent had run those iterations after its own."""
        start = split.start
        self.materialize_all()  # queued products may read what the child's values overwrite
        exchange = split.exchange
        for serial, key, offset, shape, strides, where, reduce in payload["data"]:
            t = self.top[serial]
            values = exchange.get(where) if where is not None else None  # type: ignore[union-attr]
            if reduce is not None:
                self._combine_reduced(t, key, offset, shape, strides, values, reduce)
                continue
            if t.blocks is not None:
                entry = t.blocks.get(key)
                if entry is None and offset == 0 and shape == t.shape[len(key):] \
                        and strides == _c_strides(shape):
                    # The child wrote the whole of a block the parent never had: keep its values in place.
                    # That memory is shared: later splits record the parent's reads of this tensor, which
                    # a later child's writes there would otherwise change under it.
                    t.blocks[key] = [values, None, False, False, None]
                    self.shared_storage.add(serial)
                    t.pool._touch(t, key, t.blocks[key])  # type: ignore[union-attr]
                    t.version += 1
                    continue
                if entry is None:
                    entry = t.pool.take(t, key)  # type: ignore[union-attr]
                elif entry is EVICTED:
                    raise ParallelFallback(f"block {key} of tensor {t.name!r} was recycled")
                cut_view(entry[0], offset, shape, strides)[...] = values
                if entry[1] is not None:
                    if math.prod(shape) == entry[0].size:
                        entry[1] = None
                    else:
                        mask = entry[1] if entry[1].flags.writeable else t.pool.mask(entry)  # type: ignore[union-attr]
                        cut_view(mask, offset, shape, strides)[...] = True
            else:
                if t.data is None:
                    t.allocate()
                if values is not None:  # None: the child wrote into storage the processes share
                    cut_view(t.data, offset, shape, strides)[...] = values  # type: ignore[arg-type]
                if t.init is not None:
                    cut_view(t.init, offset, shape, strides)[...] = True
            t.version += 1
        self.instructions += payload["instructions"]
        loop_base = len(self.loop_kind)
        self.loop_kind.extend(payload["loop_kind"])
        self.loop_line.extend(payload["loop_line"])
        self.loop_open.extend([False] * len(payload["loop_kind"]))
        counter_shift = self.counter - start["counter"]
        self.counter += payload["counter"]
        self.trace.loops.extend(payload["loops"])  # kept in step with loop_kind even without a trace
        # Loop contexts are kept in step even without a trace.
        contexts = self.trace.merge_contexts(payload["contexts"], first_loop=start["loops"],
                                             loop_shift=loop_base - start["loops"])
        trace_part = payload.get("trace")
        if trace_part is None:
            return
        own = {serial: tid for tid, serial in split.tid_serial.items()}
        self.trace.merge(trace_part, contexts=contexts, first_context=start["contexts"], first_tensor=start["tensors"],
                         tensor_id=lambda serial, info: self._merged_tensor_id(split, serial, info, payload,
                                                                               counter_shift, own))

    def _combine_reduced(self, t: Tensor, key: tuple, offset: int, shape: tuple, strides: tuple,
                         values: np.ndarray | None, op: str) -> None:
        """The parent's value op the child's, as the child's contributions would have combined into it."""
        if values is None:
            raise ParallelFallback(f"tensor {t.name!r} was reduced into in shared storage")
        if t.blocks is not None:
            entry = t.blocks.get(key)
            if entry is None or entry is EVICTED:
                raise ParallelFallback(f"block {key} of tensor {t.name!r} is not the first half's to combine")
            storage, mask = entry[0], entry[1]
        else:
            storage, mask = t.data, t.init
        if storage is None or (mask is not None and not cut_view(mask, offset, shape, strides).all()):
            raise ParallelFallback(f"a reduced region of tensor {t.name!r} is uninitialised in the first half")
        cut = cut_view(storage, offset, shape, strides)
        if cut.dtype.kind == "f":
            # Equal values with different bits (+0.0 and -0.0, two NaNs): which one one process keeps
            # depends on the order of the contributions, which the halves no longer have.
            bits = np.dtype(f"u{cut.dtype.itemsize}")
            differ = cut.view(bits) != np.asarray(values, dtype=cut.dtype).view(bits)
            if np.any(differ & ((cut == values) | (np.isnan(cut) & np.isnan(values)))):
                raise ParallelFallback(f"the halves' reductions into {t.name!r} tie with different bits")
        cut[...] = _apply(op, cut, values, "loop_reduce")
        t.version += 1

    def _merged_tensor_id(self, split: Split, serial: int, info: TensorInfo, payload: dict[str, Any],
                          counter_shift: int, own: dict[int, int]) -> int:
        if serial < split.serial:
            tid = own.get(serial)  # the parent's half traced it too
            if tid is None:
                tid = self.merged_tid.get(serial)
            if tid is None:
                tid = self.merged_tid[serial] = self.trace.add_tensor(info)
            return tid
        if info.name in payload["fresh"]:
            prefix, _, number = info.name.rpartition("_")
            info = dataclasses.replace(info, name=f"{prefix}_{int(number) + counter_shift}")
        return self.trace.add_tensor(info)

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
        if buffer.memory == Memory.HBM and self.grid:
            if any(self.program):
                t = self.shared[self.shared_next]
                self.shared_next += 1
                return t
        # On-chip tensors with leading block axes store each block when first touched (memory.BlockPool).
        blocked = (self.pool is not None and buffer.memory in ON_CHIP and (fill is None or isinstance(fill, _SCALARS))
                   and not any(isinstance(s, ParDim) for s in shape[:1]) and any(isinstance(s, ParDim) for s in shape))
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
            self.pool.adopt(t, t.home)
        self.check_declared(op, t)
        if buffer.memory == Memory.HBM and self.grid:
            self.shared.append(t)
        return self.remember(t)

    def check_declared(self, op: str, t: Tensor) -> None:
        if t.memory == Memory.HBM:
            return
        parts = t.shape[t.partition_axis] if t.shape else 1
        limit = self.platform.partitions
        if parts > limit:
            raise NKICompileError(op, f"partition dimension {parts} of tensor {t.name!r} {t.shape} exceeds "
                                      f"{limit}")
        per_part = t.bytes_per_partition
        if t.memory == Memory.PSUM:
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
            tid = self.merged_tid.get(t.serial) if self.merged_tid else None
            if tid is None:
                tid = self.trace.add_tensor(TensorInfo(
                    name=t.name, memory=t.memory, shape=t.shape, dtype=t.dtype.name, partition_axis=t.partition_axis,
                    bytes_per_partition=t.bytes_per_partition, total_bytes=int(np.prod(t.shape)) * t.dtype.itemsize))
                if self.split is not None:
                    self.split.tid_serial[tid] = t.serial
            t.trace_id = tid
        return t.trace_id

    # -- operands -----------------------------------------------------------------------------------
    def operand(self, x: Any, window: Window | None = None, op: str | None = None,
                on_chip: bool = True) -> Any:
        """Resolve an input: an Access for tensors/views, the value itself for scalars."""
        op = op or self.op
        if isinstance(x, View):
            acc = x.base.access(x.items, window, op)
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
            if t.memory not in ON_CHIP:
                raise NKICompileError(op, f"operand {t.name!r} is in HBM; {op} reads SBUF or PSUM tiles "
                                          "(load it with nl.load first)")
            if acc.partitions > self.platform.partitions:
                raise NKICompileError(op, f"partition dimension {acc.partitions} of operand {t.name!r} "
                                          f"exceeds {self.platform.partitions}")
        return acc

    def via_sbuf(self, acc: Access, op: str) -> Access:
        """An implicit PSUM -> SBUF copy the compiler inserts (e.g. nl.store of a matmul result)."""
        values = self.read(acc, op)
        tile = Tensor(self.fresh_name("psum_to_sbuf"), tuple(values.shape), acc.tensor.dtype, SBUF,
                      data=np.array(values, dtype=acc.tensor.dtype.storage), initialised=True, scope=self.scope,
                      is_tile=True)
        copy = tile.whole(None, op)
        self.emit("tensor_copy", Engine.VECTOR, acc.tensor.dtype.name, copy.partitions, copy.free, copy.size, [acc],
                  [copy], self.line_no, self.ctx)
        return copy

    def derived(self, d: Derived, window: Window | None, op: str) -> Access:
        src = self.operand(d.source, None, op)
        if not isinstance(src, Access):
            raise NKICompileError(op, f"{d.kind} needs a tile")
        values = self.read(src, op)
        if d.kind == "broadcast":
            if values.ndim < len(d.shape) and values.shape and values.shape[0] == d.shape[0]:
                values = values.reshape(values.shape + (1,) * (len(d.shape) - values.ndim))
            array = np.broadcast_to(values, d.shape)
        elif d.kind == "reshape":
            array = values.reshape(d.shape)
        elif d.kind == "transpose":
            array = values.T
        else:  # pragma: no cover - kinds are fixed by language.py
            raise NKICompileError(op, f"unknown view {d.kind}")
        shape = tuple(array.shape)
        if window:
            index = [slice(None)] * array.ndim
            for pos, (lo, hi, size) in window.items():
                if -pos <= array.ndim and array.shape[pos] == size:
                    index[pos] = slice(lo, hi)
            array = array[tuple(index)]
        return Access(src.tensor, array, None, src.box, tuple(array.shape), shape, src.key, exact=False)

    def read(self, acc: Any, op: str | None = None) -> Any:
        if not isinstance(acc, Access):
            return acc
        if self.split is not None:
            self.split.read(acc)
        if acc.tensor.deferred:
            self.materialize(acc.tensor)
        if isinstance(acc, FancyAccess):
            if acc.base_init is not None and not acc.base_init[acc.index].all():
                self._uninitialised(acc, op)
            return acc.base[acc.index]
        if acc.init is not None and not acc.init.all():
            self._uninitialised(acc, op)
        return acc.array

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
        fused into a single BLAS call when the tile is next read (see `_defer`)."""
        if lazy is not None:
            data = _LazyMatmul(*lazy)
        full = tuple(full_shape) if full_shape is not None else tuple(data.shape)
        if full and full[0] > self.platform.partitions:
            raise NKICompileError(self.op, f"result partition dimension {full[0]} exceeds "
                                           f"{self.platform.partitions} (shape {full})")
        whole = full == tuple(data.shape) and not window
        # The tile keeps `data` only if it owns it: an op may return a view of its operand (a copy, a
        # transpose), and a tile nobody claims gets its own copy in `flush`.
        owns = whole and lazy is None and isinstance(data, np.ndarray) and data.flags.owndata
        tile = self.remember(Tensor.tile(self.fresh_name(self.op), full, dtype, default, data if owns else None,
                                         whole, self.scope))
        if default.memory == Memory.SBUF and tile.bytes_per_partition > self.platform.sbuf_bytes_per_partition:
            raise NKICompileError(self.op, f"result tile {full} needs {tile.bytes_per_partition} bytes per "
                                           f"partition, over the {self.platform.sbuf_bytes_per_partition}-byte "
                                           f"SBUF partition of {self.platform.name}")
        size = math.prod(data.shape)
        parts = partitions if partitions is not None else (data.shape[0] if len(data.shape) else 1)
        self.pending = Pending(
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
        if isinstance(p.data, _LazyMatmul):
            p.data = p.data.compute()
        if tile.data is None:  # a tile is stored only if nothing claimed it
            if not p.window and tile.shape == np.shape(p.data):
                tile.data, tile.init = np.array(p.data, dtype=tile.dtype.storage), None
            else:
                tile.allocate()
        if tile.data.shape != p.data.shape or p.window:
            acc = tile.access((Ellipsis,), p.window, p.op)
            if isinstance(acc, Access) and acc.array.size:
                acc.array[...] = _fit(p.data, acc.shape, p.op)
                if acc.init is not None:
                    acc.init[...] = True
        else:
            acc = tile.whole(None, p.op)
            if tile.dtype.mantissa_bits:
                tile.data = tile.dtype.round(tile.data)
                acc = tile.whole(None, p.op)
        self.emit_pending(p, acc, accumulate=False)

    def commit(self, p: Pending, dst: Access, accumulate: str | None, race_accumulate: bool = False,
               traced_as_combine: bool = False) -> None:
        t = dst.tensor
        if t.memory not in p.allowed:
            where = " or ".join(sorted(m.name for m in p.allowed))
            raise NKICompileError(p.op, f"{p.op} writes its result to {where}, but the destination {t.name!r} is "
                                        f"in {t.memory.name}")
        if t.scope and p.scope[:len(t.scope)] != t.scope:
            raise NKICompileError(p.op, f"tensor {t.name!r} is used outside the loop iteration that defined it "
                                        f"(defined inside the loop at line {self.loop_line[t.scope[-1][0]]})")
        if t.memory == Memory.PSUM:
            per_part = dst.free * 4
            bank = self.platform.psum_bank_bytes_per_partition
            if per_part > bank:
                raise NKICompileError(p.op, f"PSUM tile of {dst.free} elements per partition ({per_part} bytes) "
                                            f"exceeds the {bank}-byte PSUM tile")
        reads = p.reads
        if accumulate or traced_as_combine:
            reads = [*reads, dst]
        if isinstance(p.data, _LazyMatmul):
            if accumulate == "add" and not isinstance(dst, FancyAccess) and dst.array.shape == p.data.shape:
                self._defer(dst, p.data, p.op, p.nest, [r.tensor for r in p.reads if isinstance(r, Access)])
                self.emit_pending(p, dst, accumulate=True, reads=reads)
                return
            if accumulate or isinstance(dst, FancyAccess) or dst.array.shape != p.data.shape:
                p.data = p.data.compute()
        self.write(dst, p.data, p.op, accumulate=accumulate, nest=p.nest, race_accumulate=race_accumulate)
        self.emit_pending(p, dst, accumulate=bool(accumulate), reads=reads)

    def emit_pending(self, p: Pending, dst: Access, *, accumulate: bool, reads: list[Any] | None = None) -> None:
        self.emit(p.op, p.engine, p.dtype, p.partitions, p.free, p.flops, reads if reads is not None else p.reads,
                  [dst], p.line, p.ctx, p.is_transpose)

    # -- writes -------------------------------------------------------------------------------------
    def write(self, dst: Access, values: Any, op: str, *, accumulate: str | None = None,
              nest: tuple | None = None, race_accumulate: bool = False) -> None:
        t = dst.tensor
        if self.split is not None:
            self.split.wrote(dst)
        if t.deferred:
            self.materialize(t)
        if t.readers:
            self.run_readers(t)
        if isinstance(dst, FancyAccess):
            vals = _fit(values, dst.shape, op)
            if accumulate:
                cur = self.read(dst, op)
                vals = _apply(accumulate, cur, vals, op)
            dst.base[dst.index] = t.dtype.round(np.asarray(vals, dtype=t.dtype.storage)) \
                if t.dtype.mantissa_bits else vals
            if dst.base_init is not None:
                dst.base_init[dst.index] = True
            t.version += 1
            return
        if dst.array.size == 0:
            return
        if type(values) is _LazyMatmul:  # a matmul overwriting its destination: computed straight into it
            values.into(dst.array)
        elif accumulate:
            vals = _fit(values, dst.shape, op)
            cur = self.read(dst, op)
            if accumulate == "add":
                np.add(cur, vals, out=dst.array, casting="unsafe")
            else:
                dst.array[...] = _apply(accumulate, cur, vals, op)
        else:
            dst.array[...] = _fit(values, dst.shape, op)
        if t.dtype.mantissa_bits:
            dst.array[...] = t.dtype.round(dst.array)
        if dst.init is not None:
            if t.blocks is None:
                dst.init[...] = True
            else:
                self._mark_block_written(t, dst)
        t.version += 1
        self.check_race(dst, bool(accumulate) or race_accumulate, op, self.nest if nest is None else nest)

    def _mark_block_written(self, t: Tensor, dst: Access) -> None:
        entry = t.blocks[dst.key]  # type: ignore[index]
        whole = entry[0].size == dst.array.size and dst.exact and _volume(dst.box) == entry[0].size
        if dst.init.flags.writeable:  # type: ignore[union-attr]
            dst.init[...] = True  # type: ignore[index]
        elif not whole:
            dst.init = apply_recipe(t.pool.mask(entry), dst.recipe)  # type: ignore[union-attr,arg-type]
            dst.init[...] = True
        if whole:
            entry[1] = dst.init = None  # the whole block is written: later accesses skip the mask

    def check_race(self, dst: Access, accumulate: bool, op: str, nest: tuple) -> None:
        if not nest or not dst.exact:
            return
        t = dst.tensor
        box = dst.box
        records_of = t.records
        # Buckets: a write whose leading (race-key) axes are all pinned goes under those indices; any other
        # goes under "*", in a sub-bucket keyed the same way with None for each axis it spans. Only
        # buckets whose keys agree on every axis pinned in both can hold an overlapping write, which keeps
        # a kernel storing thousands of tiles through an unpinned axis from comparing each with all.
        star = records_of.get("*")
        key = dst.key
        if key is None:
            part = tuple(lo if hi - lo == 1 else None for lo, hi in box[:t.race_key_len])
            lists = [records for k, records in records_of.items() if k != "*" and _agree(k, part)]
            if star:
                lists.extend(records for k, records in star.items() if _agree(k, part))
        else:
            lists = [records_of.get(key, ())]
            if star:
                lists.extend(records for k, records in star.items() if _agree(k, key))
        loop_kind = self.loop_kind
        for records in lists:
            for rbox, rnest, racc in records:
                if accumulate and racc:
                    continue
                if rnest is nest:
                    continue
                overlap = True
                for (alo, ahi), (blo, bhi) in zip(rbox, box, strict=True):
                    if alo >= bhi or blo >= ahi:
                        overlap = False
                        break
                if not overlap:
                    continue
                for k in range(min(len(rnest), len(nest))):
                    if rnest[k] != nest[k]:
                        loop_id = nest[k][0]
                        if rnest[k][0] == loop_id and loop_kind[loop_id] == LoopKind.AFFINE:
                            self._race(t, dst, op, loop_id, rnest[k][1], nest[k][1])
                        break
        if key is None:
            if star is None:
                records_of["*"] = star = {}
            records = star.get(part)
            if records is None:
                star[part] = records = []
        else:
            records = records_of.get(key)
            if records is None:
                records_of[key] = records = []
        if records:
            if len(records) == 1:
                last = records[0]
                if last[0] == box and last[2] == accumulate and self.loop_open[last[1][0][0]]:
                    records[0] = (box, nest, accumulate)  # the common case: accumulating into one tile
                    return
            open_ = self.loop_open
            # Drop records outside every open loop (they can no longer race) and records the new write
            # covers with the same accumulate flag (the new record stands for them).
            records[:] = [r for r in records if open_[r[1][0][0]] and not (
                r[2] == accumulate and _inside(r[0], box))]
        records.append((box, nest, accumulate))

    def _race(self, t: Tensor, dst: Access, op: str, loop_id: int, it_a: int, it_b: int) -> None:
        region = ", ".join(f"{lo}:{hi}" for lo, hi in dst.box)
        raise NKIRuntimeError(op, f"iterations {it_a} and {it_b} of the affine_range loop at line "
                                  f"{self.loop_line[loop_id]} both write tensor {t.name!r} [{region}]; "
                                  "use sequential_range for a loop-carried dependency, or index the "
                                  "destination by the loop variable")

    # -- deferred PSUM accumulation ------------------------------------------------------------------
    def _defer(self, dst: Access, mm: _LazyMatmul, op: str, nest: tuple, sources: list[Tensor]) -> None:
        """Queue `dst += stationary.T @ moving`; the group runs when dst is next used."""
        t = dst.tensor
        if self.split is not None:
            self.split.wrote(dst)
        if dst.init is not None and not dst.init.all():
            self._uninitialised(dst, op)
        self.check_race(dst, True, op, nest)
        groups = t.deferred
        if groups is None:
            t.deferred = groups = {}
            self.deferred_set[id(t)] = t
        key = dst.box
        group = groups.get(key)
        if group is None:
            for other in groups:
                if not all(a_hi <= b_lo or b_hi <= a_lo for (a_lo, a_hi), (b_lo, b_hi) in zip(other, key, strict=True)):
                    self.materialize(t)
                    groups = t.deferred = {}
                    self.deferred_set[id(t)] = t
                    break
            groups[key] = group = (dst, [], [])
        # Views, not copies: a write to an operand's tensor runs the group first (see `write`).
        group[1].append(np.asarray(mm.stationary, dtype=np.float32))
        group[2].append(np.asarray(mm.moving, dtype=np.float32))
        for src in sources:
            if src.readers is None:
                src.readers = [t]
            else:
                src.readers.append(t)
        t.version += 1

    def run_readers(self, t: Tensor) -> None:
        """`t` is about to change: run the queued matmul groups that read it."""
        readers = t.readers
        t.readers = None
        for reader in readers:  # type: ignore[union-attr]
            if reader.deferred:
                self.materialize(reader)

    def materialize(self, t: Tensor) -> None:
        groups = t.deferred
        t.deferred = None
        self.deferred_set.pop(id(t), None)
        if not groups:
            return
        if t.readers:
            self.run_readers(t)
        # One product per queued matmul, added in issue order as PSUM accumulates them. Concatenating
        # the operands into one long-K product was 18-24% slower (one group of 40 products, measured
        # alone): the copies cost more than the calls.
        for dst, stationaries, movings in groups.values():
            acc = dst.array
            for stationary, moving in zip(stationaries, movings, strict=True):
                acc += stationary.T @ moving

    def materialize_all(self) -> None:
        """Run every queued matmul group."""
        for t in list(self.deferred_set.values()):
            self.materialize(t)

    def finish(self) -> None:
        """End of the kernel: run what is still pending or deferred."""
        if self.pending is not None:
            self.flush()
        self.materialize_all()

    # -- assignment: dst[items] = value -------------------------------------------------------------
    def assign(self, tensor: Tensor, items: Any, value: Any) -> None:
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
                    if self.split is not None and p.line in self.split.reductions and p.reduce in IDEMPOTENT \
                            and not isinstance(dst, FancyAccess):
                        self._split_reduce(p, dst, initialised)
                    else:
                        self.commit(p, dst, p.reduce if initialised else None, race_accumulate=True)
                except NKIError as e:
                    raise e.with_line(p.line) from None
                p.tile.alias = dst if not isinstance(dst, FancyAccess) else None
                return
            if accumulate and not (accumulate == "add" and p.native_acc and dst.memory == Memory.PSUM):
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
        if dst.memory == Memory.HBM:
            raise NKICompileError("store", f"writing HBM tensor {tensor.name!r} needs nl.store (or a DMA copy)")
        if isinstance(value, _SCALARS):
            self.write(dst, value, "memset")
            self.emit("memset", Engine.VECTOR, tensor.dtype.name, dst.partitions, dst.free, dst.size, [], [dst],
                      self.line_no, self.ctx)
            return
        src = self.operand(value, None, "tensor_copy", on_chip=False)
        if isinstance(src, Access) and src.memory == Memory.HBM:
            raise NKICompileError("load", f"reading HBM tensor {src.tensor.name!r} into {tensor.name!r} needs "
                                          "nl.load (or a DMA copy)")
        vals = self.read(src, "tensor_copy")
        self.write(dst, vals, "tensor_copy")
        self.emit("tensor_copy", Engine.VECTOR, tensor.dtype.name, dst.partitions, dst.free, dst.size,
                  [src] if isinstance(src, Access) else [], [dst], self.line_no, self.ctx)

    def _split_reduce(self, p: Pending, dst: Access, initialised: bool) -> None:
        """A max/min `loop_reduce` inside a split loop: both halves may reduce into one region, and the
        merge combines their values. The child's first contribution to a region it finds uninitialised
        is traced as one process would have traced it, after the first half's contributions (reading the
        destination), but stores only its own value (`Split.presumed`; `_join` checks the assumption)."""
        split = self.split
        assert split is not None
        if dst.tensor.serial >= split.serial:  # made during the split: an ordinary reduction of this half
            self.commit(p, dst, p.reduce if initialised else None, race_accumulate=True)
            return
        presumed = split.child and not initialised
        if presumed and dst.init is not None and dst.init.any():
            # Partly written by this half already (an overlapping reduction): one process would find it
            # whole, from the first half, and combine; a plain store here would lose what is written.
            split.unmergeable = f"a reduction across the loop into a partly written region of {dst.tensor.name!r}"
        split.reduce(dst, p.reduce, presumed)
        split.filing = False  # the reduction's own read and write are filed above, not as plain ones
        try:
            self.commit(p, dst, p.reduce if initialised else None, race_accumulate=True, traced_as_combine=presumed)
        finally:
            split.filing = True

    def _combine_into(self, tensor: Tensor, items: Any, value: Any, op: str) -> None:
        dst = tensor.access(items, None, "tensor_tensor")
        src = self.operand(value, None, "tensor_tensor")
        vals = self.read(src, "tensor_tensor")
        self.write(dst, vals, "tensor_tensor", accumulate=op)
        self.emit("tensor_tensor", Engine.VECTOR, tensor.dtype.name, dst.partitions, dst.free, dst.size,
                  [dst] + ([src] if isinstance(src, Access) else []), [dst], self.line_no, self.ctx)

    # -- the trace ----------------------------------------------------------------------------------
    def emit(self, op: str, engine: Engine, dtype: str, partitions: int, free: int, flops: int,
             reads: list[Any], writes: list[Access], line: int, ctx: int, is_transpose: bool = False) -> None:
        self.instructions += 1
        if not self.record_trace:
            return
        moved = [0, 0, 0, 0, 0, 0]  # hbm r/w, sbuf r/w, psum r/w
        rows = []
        # One pass per access: bytes moved, and the region (tensor, partitions, bytes within a partition).
        for is_write, accs in ((0, reads), (1, writes)):
            for acc in accs:
                if not isinstance(acc, Access):
                    continue
                t = acc.tensor
                item = t.dtype.itemsize
                n = item
                for size in acc.shape:
                    n *= size
                moved[2 * int(t.memory) + is_write] += n
                tid = t.trace_id if t.trace_id >= 0 else self.tensor_id(t)
                box = acc.box
                k = t.partition_axis
                lo = hi = 0
                for (b_lo, b_hi), stride in zip(box, _partition_strides(t.shape, k), strict=True):
                    lo += b_lo * stride
                    hi += (b_hi - 1) * stride
                if k < 0:
                    rows.append((tid, is_write, 0, 1, lo * item, (hi + 1) * item))
                else:
                    rows.append((tid, is_write, box[k][0], box[k][1], lo * item, (hi + 1) * item))
        self.trace.record(engine, op, dtype, partitions, free, flops, is_transpose, moved, ctx, line, rows)


@functools.lru_cache(maxsize=1024)
def _partition_strides(shape: tuple[int, ...], partition_axis: int) -> tuple[int, ...]:
    """Per-partition element strides: row-major over the axes other than the partition axis (all axes
    for an HBM tensor, whose partition axis is -1)."""
    strides = [0] * len(shape)
    acc = 1
    for axis in range(len(shape) - 1, -1, -1):
        if axis != partition_axis:
            strides[axis] = acc
            acc *= shape[axis]
    return tuple(strides)


class _LazyMatmul:
    """stationary.T @ moving, computed only when someone needs the values."""

    __slots__ = ("stationary", "moving", "shape")

    def __init__(self, stationary: np.ndarray, moving: np.ndarray) -> None:
        self.stationary = stationary
        self.moving = moving
        self.shape = (stationary.shape[1], moving.shape[1])

    def compute(self) -> np.ndarray:
        return self.stationary.T @ self.moving

    def into(self, out: np.ndarray) -> None:
        if out.dtype == np.float32 and out.flags.c_contiguous and not (
                np.may_share_memory(out, self.stationary) or np.may_share_memory(out, self.moving)):
            np.matmul(self.stationary.T, self.moving, out=out)
        else:
            out[...] = self.compute()


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a C-ordered array of `shape`."""
    strides = []
    n = 1
    for size in reversed(shape):
        strides.append(n)
        n *= size
    return tuple(reversed(strides))


def _volume(box: tuple[tuple[int, int], ...]) -> int:
    n = 1
    for lo, hi in box:
        n *= hi - lo
    return n


def _agree(a: tuple, b: tuple) -> bool:
    """Two race-bucket keys that can name the same element: equal on every axis both pin (None spans).
    Keys of different lengths come from differently shaped views of one HBM tensor (`reshape`): their
    coordinates cannot be compared."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x is not None and y is not None and x != y:
            return False
    return True


def _inside(inner: tuple, outer: tuple) -> bool:
    for (ilo, ihi), (olo, ohi) in zip(inner, outer, strict=True):
        if ilo < olo or ihi > ohi:
            return False
    return True


def _apply(op: str, a: Any, b: Any, where: str) -> Any:
    from .alu import binary

    return binary(op, where)(a, b)


def _fit(values: Any, shape: tuple[int, ...], op: str) -> Any:
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
