"""The rules on the order of a kernel's accesses, applied again to a recorded program.

While it runs a kernel, the simulator refuses two things that no single instruction shows: a read of memory
nothing has written yet, and two iterations of one `affine_range` loop writing the same elements. A program
made in an untrusted process is checked for both again here, during the verifier's first replay (replay.py:
`AccessOrder` sees every instruction before it runs and every store before it lands). Neither depends on
values (addresses are recorded numbers), so one replay checks them for every seed.

* **Never-written memory** (runtime.Simulator.read's initialisation check). A buffer whose recorded first
  content is `zeros` (storage the kernel declared without a value: `nl.ndarray`, a result tile, a block of
  an unfilled blocked tensor) or `nan` (an HBM output) holds nothing a kernel may read until an instruction
  writes it. Every element an operand reads (a region, the elements its index arrays pick, the source of a
  derived view) and every destination an accumulating store reads (`write` with an accumulate operator, a
  queued PSUM accumulation) must have been written by an earlier store. The one read the simulator allows
  is `keep_written` (nisa.nc_matmul into a partly written PSUM tile: unwritten elements start at zero), and
  its mask of written elements must be exactly what was written. Outputs may hold unwritten elements
  (they read back NaN, and fail the comparison). An instruction computing partition by partition
  (semantics.PARTITION_LOCAL) may read partitions holding unwritten elements when those partitions of each
  of its destinations are unwritten too; they stay unwritten (runtime.Simulator._read_partitions).
* **The affine_range race rule** (races.py: the same `RaceCheck.file` the simulator calls). Every store of
  a region through `write` or `defer` is filed with its exact box in the coordinates of its buffer's trace
  tensor, with the loop nest of its cost-trace row and the loop kinds of the trace (what the performance
  model reads), so a sequential loop labelled `affine` in a forged trace fails as the simulator would have
  failed the kernel. A write that the simulator files as accumulating without accumulating (the first
  contribution to a `loop_reduce`, the zeros of `keep_written`) carries that flag in the program; the flag
  is accepted only where the simulator could set it: into a region not yet wholly written, not through
  index arrays.
* **HBM read back through another view.** Not a simulator rule but the performance model's blind spot
  (engine/platforms/nki/perf/deps.py orders an HBM read after a write of the same trace tensor only, and each reshaped
  view is a trace tensor of its own): a read of bytes last written through another view is refused, so no
  kernel is priced as if its load did not wait for its store.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKIRuntimeError
from engine.platforms.nki.simulator.semantics.races import RaceCheck
from engine.platforms.nki.simulator.semantics.semantics import PARTITION_LOCAL
from engine.platforms.nki.simulator.trace import MemorySpace
from engine.platforms.nki.simulator.verification.program import Program, ReplayError, spec_root
from engine.platforms.nki.simulator.verification.trace_check import region_box

UNWRITTEN = ("zeros", "nan")  # first contents that are not values a kernel may read


def _rows_for(rows: np.ndarray, partitions: int) -> np.ndarray | None:
    """Garbage partitions on `partitions` result partitions: the same, or one broadcast partition's to all."""
    if len(rows) == partitions:
        return rows
    if len(rows) == 1:
        return np.full(partitions, bool(rows[0]))
    return None


class AccessOrder:
    """Checks a program's reads of never-written memory, its writes against the affine race rule and its HBM
    reads against the views that wrote (the last two need its cost trace, which holds the loops and the views).
    `replay._Machine` calls `reads` before each instruction, `store` before and `stored` after each of its
    stores, `drop` when a buffer dies and `finish` at the end."""

    def __init__(self, program: Program, trace: Any = None) -> None:
        self.program = program
        self.tracked = [b[6][0] in UNWRITTEN for b in program.buffers]
        self.masks: dict[int, np.ndarray] = {}  # per tracked buffer: its elements written so far
        self.opened: dict[tuple, tuple[int, int]] = {}  # PSUM regions a keep_written began: (index, line)
        # Regions known to be wholly written (masks only grow until their buffer dies): most reads and
        # accumulations repeat a region a store wrote whole, and skip the mask.
        self.known: dict[int, set[tuple]] = {}  # per buffer
        self.whole: set[int] = set()  # tracked buffers written whole (no mask)
        self.mark_log: dict[int, list[tuple]] = {}  # HBM buffers' writes not yet in a mask (`stored`)
        # The current instruction's result partitions computed from unwritten ones: (rows, the read's spec,
        # where, line), and the destination partitions they land in (`store`, for `stored`).
        self.garbage: tuple | None = None
        self.garbage_rows: np.ndarray | None = None
        self.trace = trace
        if trace is None:
            return
        self.nests = [tuple(tuple(pair) for pair in nest) for nest in trace.loop_contexts]
        self.ctx = np.asarray(trace.columns["loop_ctx"], dtype=np.int64)
        self.loop_open = [False] * len(trace.loops)
        self.races = RaceCheck([loop.kind for loop in trace.loops], self.loop_open,
                               [loop.line for loop in trace.loops])
        self.open_ctx = -1
        self.records: dict[Any, dict] = {}
        self.boxes: dict[tuple, tuple] = {}  # per store region: how it is filed (`_box`)
        self.tensor_of = _buffer_tensors(program, trace)
        self.access_tensor = np.asarray(trace.access["tensor"], dtype=np.int64)
        self.access_start = np.asarray(trace.columns["access_start"], dtype=np.int64)
        views: dict[int, list[int]] = {}
        for tid, layout in enumerate(program.trace_tensors[:len(trace.tensors)]):
            bid = layout[0]
            if bid >= 0 and program.buffers[bid][1] == int(MemorySpace.HBM):
                views.setdefault(bid, []).append(tid)
        self.views = {bid: tids for bid, tids in views.items() if len(tids) > 1}
        self.writers: dict[int, np.ndarray] = {}  # per such buffer: the view (index in views) that last wrote
        self.view_log: dict[int, list[tuple]] = {}  # writes through views not yet in a `writers` array

    # -- never-written memory -----------------------------------------------------------------------
    def _cut(self, flat: np.ndarray, spec: tuple, value: Any = None) -> np.ndarray:
        """The elements of region `spec` ("r" or "f") in `flat`, a per-element array beside its buffer; with
        `value`, set them to it."""
        _, _, offset, shape, strides = spec[:5]
        item = flat.itemsize
        view = np.ndarray(shape, flat.dtype, buffer=flat, offset=offset * item, strides=tuple(s * item for s in strides))
        index = tuple(self.program.constants[c] for c in spec[5]) if spec[0] == "f" else ...
        if value is not None:
            view[index] = value
        return view[index]

    def _written(self, spec: tuple) -> np.ndarray | None:
        """Which elements of region `spec` ("r" or "f") have been written; None for a buffer that holds values
        from the start or has been written whole."""
        bid = spec[1]
        if not self.tracked[bid] or bid in self.whole:
            return None
        if 0 in spec[3]:
            return np.ones(spec[3], dtype=np.bool_)
        mask = self.masks.get(bid)
        if mask is None:
            mask = self.masks[bid] = np.zeros(self.program.buffers[bid][5], dtype=np.bool_)
            for region in self.mark_log.pop(bid, ()):
                self._cut(mask, region, True)
        return self._cut(mask, spec)

    def _require_written(self, spec: tuple, where: str, line: int) -> None:
        if spec in self.known.get(spec[1], ()):
            return
        written = self._written(spec)
        if written is not None and not written.all():
            missing = int(written.size - np.count_nonzero(written))
            name = self.program.buffers[spec[1]][0]
            raise ReplayError(f"{where} reads memory of {name!r} that nothing wrote before it ({missing} of "
                              f"{written.size} elements of the region were never written)", line)
        if written is not None:
            self.known.setdefault(spec[1], set()).add(spec)

    def reads(self, index: int, instruction: tuple) -> None:
        kind, _params, operands, _stores, row, line = instruction
        where = f"instruction {index} ({kind})"
        self.garbage = None
        if self.trace is not None and row >= 0 and self.views:
            self._through_views(index, row, where, line)
        for k, spec in enumerate(operands):
            if spec is None or spec[0] in ("s", "c"):
                continue
            spec = spec_root(spec)
            if kind == "keep_written" and k == 0:
                if spec[0] != "r" or self.program.buffers[spec[1]][1] != int(MemorySpace.PSUM):
                    raise ReplayError(f"{where}: not the start of a matmul into a PSUM tile", line)
                written = self._written(spec)
                if written is None:  # holds values from the start, or written whole
                    written = np.ones(spec[3], dtype=np.bool_)
                mask = operands[1] if len(operands) == 2 else None
                if mask is None or mask[0] != "c" or not np.array_equal(self.program.constants[mask[1]], written):
                    raise ReplayError(f"{where}: its mask of written elements is not what the program wrote", line)
                self.opened[spec] = (index, line)  # the next store into it must be a matmul's
                continue
            if kind in PARTITION_LOCAL and self._garbage_read(spec, where, line):
                continue
            self._require_written(spec, where, line)

    def _garbage_read(self, spec: tuple, where: str, line: int) -> bool:
        """A partly unwritten on-chip region read partition by partition: note its unwritten partitions."""
        if spec[0] != "r" or not spec[3] or self.program.buffers[spec[1]][1] == int(MemorySpace.HBM):
            return False
        written = self._written(spec)
        if written is None or written.all():
            return False
        rows = ~written.reshape(spec[3][0], -1).all(axis=1)
        if self.garbage is None:
            self.garbage = (rows, spec, where, line)
        else:
            mine = _rows_for(self.garbage[0], max(len(rows), len(self.garbage[0])))
            theirs = _rows_for(rows, max(len(rows), len(self.garbage[0])))
            if mine is not None and theirs is not None:
                self.garbage = (mine | theirs, *self.garbage[1:])
        return True

    def _garbage_lands(self, mode: str, dst: tuple, extra: list) -> None:
        """The destination partitions of garbage must be a plain region nothing wrote; else the read is refused."""
        rows, spec, where, line = self.garbage  # type: ignore[misc]
        accumulate = extra[0] if mode == "write" and extra else None
        written = self._written(dst) if dst[0] == "r" and dst[3] else None
        landing = _rows_for(rows, dst[3][0]) if written is not None else None
        if mode not in ("write", "flush") or accumulate or landing is None \
                or written.reshape(dst[3][0], -1)[landing].any():  # type: ignore[union-attr]
            self._require_written(spec, where, line)  # raises: the garbage cannot stay where it lands
        self.garbage_rows = landing

    def store(self, index: int, instruction: tuple, store: tuple) -> None:
        """Before `store` of instruction `index` lands: what it reads, and the race rule."""
        kind, _params, _operands, _stores, row, line = instruction
        mode, _slot, dst, *extra = store
        where = f"instruction {index} ({kind})"
        self.garbage_rows = None
        if self.garbage is not None:
            self._garbage_lands(mode, dst, extra)
        if self.opened and kind != "keep_written" and dst in self.opened:
            # keep_written has no cost-trace row: the simulator issues it only as the first step of a matmul
            # into a PSUM tile (isa_dst.nc_matmul), so it must be one, not a free memset.
            start, start_line = self.opened.pop(dst)
            if kind != "matmul":
                raise ReplayError(f"instruction {start} (keep_written) does not start a matmul into its PSUM tile",
                                  start_line)
        combines = False
        if mode == "write":
            if len(extra) != 2 or not isinstance(extra[1], bool):
                raise ReplayError(f"{where}: malformed store {store!r}", line)
            accumulate, combines = extra
            if accumulate:
                self._require_written(dst, where, line)
            elif combines:
                written = self._written(dst)
                if dst[0] == "f" or written is None or written.all():
                    raise ReplayError(f"{where}: a write flagged as a reduction's first contribution into a "
                                      "region that already holds values", line)
            combines = combines or bool(accumulate)
        elif mode == "defer":
            self._require_written(dst, where, line)
            combines = True
        else:
            return
        if self.trace is not None and row >= 0 and dst[0] == "r" and 0 not in dst[3]:
            self._file(dst, combines, kind, row, line)

    def stored(self, store: tuple) -> None:
        dst = store[2]
        bid = dst[1]
        if self.garbage_rows is not None:  # only the partitions computed from written ones are written
            self._written(dst)  # the mask (`_garbage_lands` found the buffer tracked, not written whole)
            mask = self.masks[bid]
            for row in np.flatnonzero(~self.garbage_rows):
                self._cut(mask, (dst[0], bid, dst[2] + int(row) * dst[4][0], (1, *dst[3][1:]), *dst[4:]), True)
            self.garbage_rows = None
            return
        if not self.tracked[bid] or 0 in dst[3] or bid in self.whole or dst in self.known.get(bid, ()):
            return
        if bid not in self.masks and _covers(dst, self.program.buffers[bid][5]):
            self.whole.add(bid)  # the common case: a fresh tile written at once, no mask needed
            self.mark_log.pop(bid, None)
            return
        if bid not in self.masks and self.program.buffers[bid][1] == int(MemorySpace.HBM):
            # An HBM tensor (an output, mostly) is seldom read back: log its writes, and make its mask only
            # at the first read (`_written`), instead of a mask a quarter of an output's size.
            self.mark_log.setdefault(bid, []).append(dst)
            return
        self._written(dst)  # allocates the mask
        self._cut(self.masks[dst[1]], dst, True)
        self.known.setdefault(dst[1], set()).add(dst)

    def finish(self) -> None:
        """The program has run: every keep_written was followed by its matmul."""
        for start, start_line in self.opened.values():
            raise ReplayError(f"instruction {start} (keep_written) does not start a matmul into its PSUM tile",
                              start_line)

    def drop(self, bid: int) -> None:
        self.masks.pop(bid, None)
        self.mark_log.pop(bid, None)
        self.known.pop(bid, None)
        self.whole.discard(bid)
        if self.trace is not None:
            self.writers.pop(bid, None)
            self.view_log.pop(bid, None)

    # -- reshaped views of one HBM tensor ---------------------------------------------------------------
    def _through_views(self, index: int, row: int, where: str, line: int) -> None:
        """The performance model orders HBM accesses only within one trace tensor (engine/platforms/nki/perf/deps.py: a
        read after a write of the same tensor's bytes), and each reshaped view of an HBM tensor is a tensor of
        its own in the trace. A read of bytes last written through another view would not wait for that
        write, so it is refused."""
        start = int(self.access_start[row])
        writes = []
        for j, (is_write, spec) in enumerate(self.program.trace_operands[index]):
            region = spec_root(spec)
            tids = self.views.get(region[1])
            tid = int(self.access_tensor[start + j])
            if tids is None or tid not in tids or 0 in region[3]:
                continue
            if is_write:
                writes.append((region, tids.index(tid)))
                continue
            writer = self._writer(region[1])
            if writer is None:
                continue  # nothing written through any view yet
            last = self._cut(writer, region)
            other = last[(last != np.iinfo(last.dtype).max) & (last != tids.index(tid))]
            if other.size:
                tensors = self.trace.tensors
                raise ReplayError(f"{where} reads HBM tensor {tensors[tid].name!r} through a view "
                                  f"{list(tensors[tid].shape)} other than the one that wrote those bytes "
                                  f"{list(tensors[tids[int(other[0])]].shape)}: the performance model orders a read "
                                  "after a write only within one view (each reshape is a tensor of its own in the "
                                  "trace); read it back through the view it was written with", line)
        for region, view in writes:
            writer = self.writers.get(region[1])
            if writer is None:  # most such buffers are outputs, never read: log the write, no array yet
                self.view_log.setdefault(region[1], []).append((region, view))
            else:
                self._cut(writer, region, view)

    def _writer(self, bid: int) -> np.ndarray | None:
        """Per element of HBM buffer `bid`, the view that last wrote it (the dtype's maximum: none), made from
        the logged writes at the first read that needs it."""
        writer = self.writers.get(bid)
        log = self.view_log.pop(bid, None)
        if writer is None and log:
            dtype = np.uint8 if len(self.views[bid]) < 255 else np.int32
            writer = self.writers[bid] = np.full(self.program.buffers[bid][5], np.iinfo(dtype).max, dtype)
            for region, view in log:
                self._cut(writer, region, view)
        return writer

    # -- the affine race rule -----------------------------------------------------------------------
    def _file(self, dst: tuple, accumulate: bool, op: str, row: int, line: int) -> None:
        ctx = int(self.ctx[row])
        nest = self.nests[ctx]
        if ctx != self.open_ctx:  # the loops of this row's nest are the ones running (runtime.Simulator.loop)
            if self.open_ctx >= 0:
                for loop, _iteration in self.nests[self.open_ctx]:
                    self.loop_open[loop] = False
            for loop, _iteration in nest:
                self.loop_open[loop] = True
            self.open_ctx = ctx
        if not nest:
            return
        filed = self.boxes.get(dst)
        if filed is None:
            filed = self.boxes[dst] = self._box(dst, line)
        if not filed:
            return  # storage no trace row names: the performance model does not see it
        holder, key_len, name, box, key = filed
        records = self.records.setdefault(holder, {})
        try:
            self.races.file(records, key_len, name, box, key, accumulate, op, nest)
        except NKIRuntimeError as exc:
            raise ReplayError(f"a store breaks the affine_range race rule: {exc}", line) from None


    def _box(self, dst: tuple, line: int) -> tuple:
        """How a store into region `dst` is filed: (records holder, key length, tensor name, box, key)."""
        found = self.tensor_of.get(dst[1])
        if found is None:
            return ()
        tid, holder = found
        info = self.trace.tensors[tid]
        box = region_box(self.program, info, self.program.trace_tensors[tid], dst)
        if isinstance(box, str):
            raise ReplayError(f"a store {box} tensor {info.name!r}", line)
        box = tuple(box)
        key_len = max(0, len(info.shape) - 2) if int(info.space) == int(MemorySpace.HBM) else info.partition_axis
        lead = box[:key_len]
        key = tuple(lo for lo, _hi in lead) if all(hi - lo == 1 for lo, hi in lead) else None
        return holder, key_len, info.name, box, key


def _covers(spec: tuple, size: int) -> bool:
    """Whether region `spec` is every element of a buffer of `size` elements, each once (C order)."""
    if spec[0] != "r" or spec[2] != 0 or math.prod(spec[3]) != size:
        return False
    step = 1
    for n, stride in zip(reversed(spec[3]), reversed(spec[4]), strict=True):
        if n > 1 and stride != step:
            return False
        step *= n
    return True


def _buffer_tensors(program: Program, trace: Any) -> dict[int, tuple[int, Any]]:
    """Per buffer, the trace tensor whose coordinates its writes are filed in, and whose records they go to
    (the simulator's `Tensor.records`: one per storage, shared by an HBM tensor's reshaped views; one per
    blocked tensor, across its blocks). An HBM buffer seen through several trace tensors (reshaped views)
    is filed in its declared shape's coordinates, so writes through different views meet."""
    layouts = program.trace_tensors
    direct: dict[int, int] = {}
    by_serial: dict[int, int] = {}
    for tid, (bid, serial, _offset, _strides) in enumerate(layouts[:len(trace.tensors)]):
        if bid == -1:
            by_serial.setdefault(serial, tid)
        elif bid not in direct or (tuple(trace.tensors[tid].shape) == tuple(program.buffers[bid][3])
                                   and tuple(trace.tensors[direct[bid]].shape) != tuple(program.buffers[bid][3])):
            direct[bid] = tid
    out: dict[int, tuple[int, Any]] = {}
    for bid, buffer in enumerate(program.buffers):
        if bid in direct:
            out[bid] = (direct[bid], ("buffer", bid))
        elif isinstance(buffer[7], tuple) and buffer[8] in by_serial:
            out[bid] = (by_serial[buffer[8]], ("tensor", buffer[8]))
    return out

