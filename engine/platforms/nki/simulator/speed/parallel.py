"""Two processes for one kernel: the halves of a top-level `affine_range` loop run side by side.

The iterations of an `affine_range` loop are independent by contract, so the simulator may run the
second half of a top-level one in a forked child while the parent runs the first half, then merge what
the child did into the parent: its writes to tensors that outlive the loop, its instruction trace, its
counters. The merged state is exactly what running the iterations in order would have produced (the
same trace, the same values), or the kernel is simulated again in one process (`ParallelFallback`).

Which loops may be split is read from the source (splittable.py). At run time (`LoopSplitter`, the
runtime's `Splitter`) the merge falls back whenever the halves interact: a region written by both (a
race, or an accumulation across the loop), a region the child read that the parent wrote (a dependency
across iterations), or any error in the child's half (the one-process run reports it with the usual
message and line). Values cross through shared memory (exchange.py), the rest through a pipe.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import signal
import sys
import weakref
from itertools import chain
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.semantics.alu import binary
from engine.platforms.nki.simulator.semantics.runtime import Pending, Simulator
from engine.platforms.nki.simulator.semantics.tensors import Access, FancyAccess, Tensor, next_serial
from engine.platforms.nki.simulator.speed.exchange import (
    Exchange,
    cut_view,
    in_shared_memory,
    share_storage,
    storage_cut,
)
from engine.platforms.nki.simulator.speed.recycling import EVICTED
from engine.platforms.nki.simulator.speed.splittable import SplitLoop
from engine.platforms.nki.simulator.trace import MemorySpace, TensorInfo


class ParallelFallback(Exception):
    """The halves of a split loop interacted, or the child failed: simulate again in one process."""


# `loop_reduce` operators whose partial results combine exactly in any grouping: op(op(x, a), op(x, b))
# equals op(op(x, a), b), so each half may start from the value before the split.
IDEMPOTENT = frozenset(("maximum", "minimum"))


class LoopSplitter:
    """Runs the splittable loops `splittable.parallel_loops` found in two processes (runtime.Splitter).

    It reads and extends the simulator's state the merge must carry over: the instruction count and name
    counter, the loop tables, the trace, the storage of tensors (blocks through their recycler)."""

    def __init__(self, loops: dict[int, SplitLoop]) -> None:
        self.loops = loops  # the loops that may be split, by line
        # Tensors made outside every loop, by serial: the child names them so. Weak: a kernel's Python
        # `range` loop makes its tiles outside every NKI loop, and holding them all kept rope's 512
        # iterations of tiles alive (1.1 GB, every page of it faulted in fresh).
        self.top: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
        self.merged_tid: dict[int, int] = {}  # serial -> trace id given out when a child's trace merged
        self.shared_storage: set[int] = set()  # serials of tensors with storage later children share (outputs, adopted blocks)

    def remember(self, t: Tensor) -> None:
        self.top[t.serial] = t

    def trace_id(self, t: Tensor) -> int | None:
        return self.merged_tid.get(t.serial) if self.merged_tid else None

    # -- the fork -----------------------------------------------------------------------------------
    def start(self, sim: Simulator, line: int, bounds: range) -> Split | None:
        """Fork at the loop at `line`, if it may be split: the child runs the second half of its
        iterations, the parent the first."""
        loop = self.loops.get(line)
        if loop is None:
            return None
        if sim.pending is not None:
            # A result waiting for a destination: committed now, as the loop's first instruction would
            # (`parallel_loops` keeps loops that could claim it instead whole).
            sim.flush()
        sim.matmuls.run_all()  # queued work from before the split belongs to neither half
        start = {"instructions": sim.instructions, "counter": sim.counter, "loops": len(sim.loop_kind),
                 "rows": len(sim.trace), "accesses": len(sim.trace.access["tensor"]),
                 "contexts": len(sim.trace.loop_contexts), "tensors": len(sim.trace.tensors)}
        serial_next = next_serial()  # every tensor made from now on belongs to one half
        self.shared_storage |= {serial for serial, t in self.top.items()
                                if t.space == MemorySpace.HBM and share_storage(t)}
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
        half = (len(bounds) + 1) // 2
        if pid == 0:
            os.close(read_fd)
            split = Split(serial_next, loop, True, 0, write_fd, bounds[half:])
            if sim.recycler is not None:
                inner = split.inner
                sim.recycler.share_new_blocks(exchange, lambda t: t.serial < serial_next
                                              and not (t.home is not None and t.home in inner))
        else:
            os.close(write_fd)
            split = Split(serial_next, loop, False, pid, read_fd, bounds[:half])
        split.start = start
        split.shared = set(self.shared_storage)
        split.exchange = exchange
        return split

    def abandon(self, split: Split) -> None:
        reap(split, kill=True)

    # -- the join -----------------------------------------------------------------------------------
    def join(self, sim: Simulator, split: Split) -> None:
        """The end of a half: the child hands its work over and exits; the parent waits for it, checks
        that the halves did not interact and merges (or raises ParallelFallback)."""
        if split.child:
            self._hand_over(sim, split)  # does not return
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
            self._merge(sim, split, payload)
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

    def _hand_over(self, sim: Simulator, split: Split) -> None:
        """The child's end: send what it did to the parent and exit (never returns)."""
        code = 0
        try:
            sim.matmuls.run_all()
            payload = self._child_payload(sim, split)
        except BaseException as err:  # noqa: BLE001 - any failure means: run the kernel in one process
            payload = {"fallback": f"the second half failed: {type(err).__name__}: {err}"}
            code = 1
        child_exit(split, payload, code)

    def _child_payload(self, sim: Simulator, split: Split) -> dict[str, Any]:
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
        trace = sim.trace
        payload: dict[str, Any] = {
            # Boxes as arrays: they pickle and load several times faster than the tuples.
            "writes": {serial: box_array(boxes) for serial, boxes in split.writes.items()},
            "reads": {serial: box_array(boxes) for serial, boxes in split.reads.items()},
            "reduced": split.reduced, "presumed": split.presumed, "alias_read": split.alias_read,
            "data": data,
            "instructions": sim.instructions - start["instructions"], "counter": sim.counter - start["counter"],
            "loop_kind": sim.loop_kind[start["loops"]:], "loop_line": sim.loop_line[start["loops"]:],
            "loops": trace.loops[start["loops"]:],
            "fresh": split.fresh, "contexts": trace.loop_contexts[start["contexts"]:]}
        if sim.record_trace:
            payload["trace"] = {"first_access": start["accesses"], "tid_serial": split.tid_serial,
                "columns": {k: v[start["rows"]:].tobytes() for k, v in trace.columns.items()},
                "access": {k: v[start["accesses"]:].tobytes() for k, v in trace.access.items()},
                "op_names": trace.op_names, "dtype_names": trace.dtype_names,
                "tensors": trace.tensors[start["tensors"]:]}
        return payload

    def _merge(self, sim: Simulator, split: Split, payload: dict[str, Any]) -> None:
        """Carry the child's half over, as if the parent had run those iterations after its own."""
        start = split.start
        sim.matmuls.run_all()  # queued products may read what the child's values overwrite
        exchange = split.exchange
        for serial, key, offset, shape, strides, where, reduce in payload["data"]:
            t = self.top[serial]
            values = exchange.get(where) if where is not None else None  # type: ignore[union-attr]
            if reduce is not None:
                self._combine_reduced(t, key, offset, shape, strides, values, reduce)
                continue
            if t.blocks is not None:
                recycler = sim.recycler
                block = t.blocks.get(key)
                if block is None and offset == 0 and shape == t.shape[len(key):] \
                        and strides == _c_strides(shape):
                    # The child wrote the whole of a block the parent never had: keep its values in place.
                    # That memory is shared: later splits record the parent's reads of this tensor, which
                    # a later child's writes there would otherwise change under it.
                    recycler.adopt_shared(t, key, values)  # type: ignore[union-attr]
                    self.shared_storage.add(serial)
                    t.version += 1
                    continue
                if block is None:
                    block = recycler.take(t, key)  # type: ignore[union-attr]
                elif block is EVICTED:
                    raise ParallelFallback(f"block {key} of tensor {t.name!r} was recycled")
                cut_view(block.data, offset, shape, strides)[...] = values
                if block.init is not None:
                    if math.prod(shape) == block.data.size:
                        block.init = None
                    else:
                        mask = block.init if block.init.flags.writeable else recycler.mask(block)  # type: ignore[union-attr]
                        cut_view(mask, offset, shape, strides)[...] = True
            else:
                if t.data is None:
                    t.allocate()
                if values is not None:  # None: the child wrote into storage the processes share
                    cut_view(t.data, offset, shape, strides)[...] = values  # type: ignore[arg-type]
                if t.init is not None:
                    cut_view(t.init, offset, shape, strides)[...] = True
            t.version += 1
        sim.instructions += payload["instructions"]
        loop_base = len(sim.loop_kind)
        sim.loop_kind.extend(payload["loop_kind"])
        sim.loop_line.extend(payload["loop_line"])
        sim.loop_open.extend([False] * len(payload["loop_kind"]))
        counter_shift = sim.counter - start["counter"]
        sim.counter += payload["counter"]
        sim.trace.loops.extend(payload["loops"])  # kept in step with loop_kind even without a trace
        # Loop contexts are kept in step even without a trace.
        contexts = sim.trace.merge_contexts(payload["contexts"], first_loop=start["loops"],
                                             loop_shift=loop_base - start["loops"])
        trace_part = payload.get("trace")
        if trace_part is None:
            return
        own = {serial: tid for tid, serial in split.tid_serial.items()}
        sim.trace.merge(trace_part, contexts=contexts, first_context=start["contexts"], first_tensor=start["tensors"],
                        tensor_id=lambda serial, info: self._merged_tensor_id(sim, split, serial, info, payload,
                                                                              counter_shift, own))

    def _combine_reduced(self, t: Tensor, key: tuple, offset: int, shape: tuple, strides: tuple,
                         values: np.ndarray | None, op: str) -> None:
        """The parent's value op the child's, as the child's contributions would have combined into it."""
        if values is None:
            raise ParallelFallback(f"tensor {t.name!r} was reduced into in shared storage")
        if t.blocks is not None:
            block = t.blocks.get(key)
            if block is None or block is EVICTED:
                raise ParallelFallback(f"block {key} of tensor {t.name!r} is not the first half's to combine")
            storage, mask = block.data, block.init
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
        cut[...] = binary(op, "loop_reduce")(cut, values)
        t.version += 1

    def _merged_tensor_id(self, sim: Simulator, split: Split, serial: int, info: TensorInfo,
                          payload: dict[str, Any], counter_shift: int, own: dict[int, int]) -> int:
        if serial < split.serial:
            tid = own.get(serial)  # the parent's half traced it too
            if tid is None:
                tid = self.merged_tid.get(serial)
            if tid is None:
                tid = self.merged_tid[serial] = sim.trace.add_tensor(info)
            return tid
        if info.name in payload["fresh"]:
            prefix, _, number = info.name.rpartition("_")
            info = dataclasses.replace(info, name=f"{prefix}_{int(number) + counter_shift}")
        return sim.trace.add_tensor(info)


class Split:
    """One top-level loop split in two: what each side records while its half runs (runtime.SplitHalf).

    Both sides record the boxes they write in tensors that existed before the split (by serial); the
    child also records the boxes it reads, and the accesses whose values the parent needs (writes to
    tensors that outlive the loop, per `liveness`)."""

    def __init__(self, serial: int, loop: SplitLoop, child: bool, pid: int, fd: int, bounds: range) -> None:
        self.bounds = bounds  # the iterations this process runs
        self.serial = serial  # tensors with a smaller serial existed before the split
        self.inner = loop.inner  # the lines of the split loop and of the loops inside it
        self.reductions = loop.reductions  # lines of the max/min reductions across it
        self.child = child
        self.pid = pid
        self.fd = fd
        self.writes: dict[int, set[tuple]] = {}
        self.reads: dict[int, set[tuple]] = {}
        # `loop_reduce` contributions with an idempotent operator (max, min), box -> operator: the halves
        # may both reduce into one region, and the merge combines their values with the operator.
        self.reduced: dict[int, dict[tuple, str]] = {}
        # child: reduced boxes it found uninitialised and treated as the first half's, as one process
        # would have found them (the merge checks the first half did reduce into each).
        self.presumed: dict[int, set[tuple]] = {}
        self.filing = True  # False while a reduction above is committed: its accesses are filed by `reduce`
        self.alias_read = False  # read shared memory through a tensor made over it later (`out.reshape`)
        self.views: list[Any] = []  # child: Accesses written in tensors the parent keeps using
        self.fresh: set[str] = set()  # child: tile names drawn from the simulator's counter
        self.tid_serial: dict[int, int] = {}  # trace tensor id -> serial, for ids given out after the split
        self.unmergeable = ""  # child: why its writes cannot be carried over (the parent then falls back)
        self.start: dict[str, Any] = {}  # the simulator's counters at the split
        self.shared: set[int] = set()  # serials of tensors whose storage both processes share
        self.exchange: Exchange | None = None

    def named(self, name: str) -> None:
        if self.child:
            self.fresh.add(name)

    def traced(self, tid: int, t: Tensor) -> None:
        self.tid_serial[tid] = t.serial

    def wrote(self, acc: Access) -> None:
        if self.filing and _note(self.writes, acc, self.serial):
            self._hand_over(acc)

    def _hand_over(self, acc: Access) -> None:
        """child: keep a write whose values the parent needs (a tensor that outlives the loop)."""
        t = acc.tensor
        if self.child and not (t.home is not None and t.home in self.inner):
            if not acc.exact or not hasattr(acc, "array") or hasattr(acc, "index"):
                self.unmergeable = f"an indirect write to tensor {t.name!r}"
            else:
                self.views.append(acc)

    def reduces_across(self, line: int, op: str, dst: Access) -> bool:
        """Whether the `loop_reduce` at `line` with `op` into `dst` is one the halves may both make and the
        merge combine: a max or min across the split loop, into a tensor from before the split."""
        return line in self.reductions and op in IDEMPOTENT and not isinstance(dst, FancyAccess) \
            and dst.tensor.serial < self.serial

    def reduce(self, sim: Simulator, p: Pending, dst: Access, initialised: bool) -> None:
        """Commit such a reduction. The child's first contribution to a region it finds uninitialised is
        traced as one process would have traced it, after the first half's contributions (reading the
        destination), but stores only its own value (`presumed`; the parent checks the assumption)."""
        presumed = self.child and not initialised
        if presumed and dst.init is not None and dst.init.any():
            # Partly written by this half already (an overlapping reduction): one process would find it
            # whole, from the first half, and combine; a plain store here would lose what is written.
            self.unmergeable = f"a reduction across the loop into a partly written region of {dst.tensor.name!r}"
        self._file_reduction(dst, p.reduce, presumed)  # type: ignore[arg-type]
        self.filing = False  # the reduction's own read and write are filed above, not as plain ones
        try:
            sim.commit(p, dst, p.reduce if initialised else None, race_accumulate=True, traced_as_combine=presumed)
        finally:
            self.filing = True

    def _file_reduction(self, acc: Access, op: str, presumed: bool) -> None:
        """File a `loop_reduce` with an idempotent `op` (see `IDEMPOTENT`) into `acc`."""
        t = acc.tensor
        box = acc.box or ((0, 1),)
        ops = self.reduced.get(t.serial)
        if ops is None:
            self.reduced[t.serial] = ops = {}
        if ops.setdefault(box, op) != op:
            self.unmergeable = f"two operators reduce into one region of tensor {t.name!r}"
        if presumed:
            self.presumed.setdefault(t.serial, set()).add(box)
        self._hand_over(acc)

    def read(self, acc: Access) -> None:
        # The child's reads are checked against the parent's writes; the parent's only matter where the
        # child's writes reach them, in shared storage.
        if not self.filing:
            return
        t = acc.tensor
        if self.child or t.serial in self.shared:
            _note(self.reads, acc, self.serial)
        data = t.data
        if not self.alias_read and t.serial not in self.shared and data is not None and data.base is not None \
                and in_shared_memory(data):
            self.alias_read = True


def _note(table: dict[int, set[tuple]], acc: Access, serial: int) -> bool:
    """File the access's box under its tensor, if that tensor is from before the split (`serial`)."""
    t = acc.tensor
    if t.serial >= serial:
        return False
    boxes = table.get(t.serial)
    if boxes is None:
        table[t.serial] = boxes = set()
    boxes.add(acc.box or ((0, 1),))
    return True


Boxes = set | dict | np.ndarray | None  # boxes of one tensor (None: none), or `box_array`'s array of them
# Boxes of different ranks (views of one storage in two shapes): one box of no axes, which meets any box.
_MIXED = np.zeros((1, 0, 2), dtype=np.int64)


def box_array(boxes: Boxes) -> np.ndarray:
    """Boxes of one tensor (tuples of (lo, hi) per axis) as an (n, axes, 2) array."""
    if isinstance(boxes, np.ndarray):
        return boxes
    if not boxes:
        return np.zeros((0, 0, 2), dtype=np.int64)
    axes = len(next(iter(boxes)))
    if any(len(box) != axes for box in boxes):
        return _MIXED
    # Flattened through iterators: about 2.5x faster than np.array on the nested tuples.
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(boxes)), dtype=np.int64, count=len(boxes) * axes * 2)
    return flat.reshape(len(boxes), axes, 2)


def overlapping(a: Boxes, b: Boxes) -> bool:
    """Whether a box of `a` overlaps a box of `b`."""
    if a is None or b is None or not len(a) or not len(b):
        return False
    boxes_a, boxes_b = box_array(a), box_array(b)
    if boxes_a.shape[1:] != boxes_b.shape[1:]:
        return True  # boxes of different ranks: views of one storage in two shapes, so assume they meet
    # The common case: on some axis (the one the split loop's variable indexes) the halves lie apart.
    apart = (boxes_a[:, :, 1].max(axis=0) <= boxes_b[:, :, 0].min(axis=0)) | \
        (boxes_b[:, :, 1].max(axis=0) <= boxes_a[:, :, 0].min(axis=0))
    if apart.any():
        return False
    step = max(1, 2**22 // max(1, boxes_b.size))  # compare in slices of a few MB
    for chunk in range(0, len(boxes_a), step):
        part = boxes_a[chunk:chunk + step, None]
        if np.all((part[..., 0] < boxes_b[None, :, :, 1]) & (boxes_b[None, :, :, 0] < part[..., 1]), axis=2).any():
            return True
    return False


def reap(split: Split, *, kill: bool) -> None:
    """Wait for a split's child (killing it first when its work is not wanted)."""
    if kill:
        try:
            os.kill(split.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.close(split.fd)
        except OSError:
            pass
    try:
        os.waitpid(split.pid, 0)
    except ChildProcessError:
        pass


def child_exit(split: Split, payload: dict[str, Any], code: int = 0) -> None:
    """Send the child's results to the parent and end the child process at once (no cleanup: the
    kernel's caller must not go on running in it)."""
    try:
        with os.fdopen(split.fd, "wb") as pipe:
            pickle.dump(payload, pipe, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # noqa: BLE001 - the parent sees a broken pipe and falls back
        code = 2
    os._exit(code)

def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a C-ordered array of `shape`."""
    strides = []
    n = 1
    for size in reversed(shape):
        strides.append(n)
        n *= size
    return tuple(reversed(strides))
