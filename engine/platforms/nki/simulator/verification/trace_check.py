"""The cost trace is the program's own: every number the performance model reads is checked against the program.

A program (program.py) travels with its cost trace (trace.py), and the performance model prices the trace.
Both come from an untrusted process, so before the trace is priced the verifier checks that it describes the
program, and nothing cheaper:

* `check_structure` (no values needed): one row per recorded instruction that has one, in program order;
  each row's access rows are the instruction's operands and destinations in order (`trace_operands`), each
  naming the tensor whose buffer the region lies in, with that tensor's memory space and dtype; the bytes
  moved per memory are the regions' sizes; each access row's partition range and byte range (the box the
  model's dependencies are built from) contain the region's exact footprint in that tensor; the tensor
  table's shapes, dtypes and sizes fit the buffers they describe, and their layout is one-to-one (so boxes
  that do not overlap are memory that does not overlap); loop contexts name loops and iterations that exist.
* `RowCheck` (during the first replay, which knows every value's shape): each row's engine is one the
  instruction's page lets it run on (ops.ENGINE_CHOICES, which the simulator enforces too), its dtype the one it computes in, and its partitions, free elements, FLOPs and
  transpose flag are what the simulator charges for that instruction on those shapes.

* `check_covered`: the regions each instruction reads and writes are among its row's accesses.

The order of accesses (never-written memory, the affine race rule, HBM read back through another view) is
replay_checks.py's; what is still out of reach is listed in docs/evaluation.md ("Its limits").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.semantics.dtypes import as_dtype
from engine.platforms.nki.simulator.semantics.ops import ENGINE_CHOICES, label_allowed
from engine.platforms.nki.simulator.semantics.semantics_v06 import expected_row
from engine.platforms.nki.simulator.semantics.tensors import _partition_strides
from engine.platforms.nki.simulator.trace import ACCESS_COLUMNS, INSTRUCTION_COLUMNS, Engine, Trace
from engine.platforms.nki.simulator.verification.program import (
    Program,
    ReplayError,
    region_inside,
    spec_root,
    spec_shape,
)

_COMPUTE_ENGINES = frozenset(int(e) for e in (Engine.TENSOR, Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD))
_VECTOR_UNARY = frozenset(("abs", "negative", "sign", "ceil", "floor", "trunc", "logical_not", "invert"))
_MOVED = ("hbm_read", "hbm_write", "sbuf_read", "sbuf_write", "psum_read", "psum_write")


def check_structure(program: Program, trace: Trace) -> None:
    """Raise ReplayError where `trace` does not describe `program` (see the module docstring)."""
    cols, acc = trace.columns, trace.access
    n = len(cols["engine"]) if "engine" in cols else -1
    if set(cols) != set(INSTRUCTION_COLUMNS) or set(acc) != set(ACCESS_COLUMNS) \
            or any(len(v) != n for v in cols.values()) or len({len(v) for v in acc.values()}) > 1:
        raise ReplayError("the cost trace is malformed")
    rows = [ins[4] for ins in program.instructions if ins[4] != -1]
    if rows != list(range(n)):
        raise ReplayError(f"the cost trace has {n} rows; the program's instructions name rows {rows[:5]}...")
    counts = np.asarray(cols["access_count"], dtype=np.int64)
    starts = np.asarray(cols["access_start"], dtype=np.int64)
    if n and (np.any(counts < 0) or not np.array_equal(starts, np.concatenate(([0], np.cumsum(counts)[:-1])))
              or int(counts.sum()) != len(acc["tensor"])):
        raise ReplayError("the cost trace's access rows are not one run per instruction")
    for name, names in (("opcode", trace.op_names), ("dtype", trace.dtype_names),
                        ("loop_ctx", trace.loop_contexts)):
        column = np.asarray(cols[name], dtype=np.int64)
        if n and (column.min() < 0 or column.max() >= len(names)):
            raise ReplayError(f"the cost trace's {name} column names entries that do not exist")
    _check_loops(trace)
    _check_nests(program, trace)
    layouts = [_tensor_layout(program, trace, tid) for tid in range(len(trace.tensors))]
    tensor = np.asarray(acc["tensor"], dtype=np.int64)
    if len(tensor) and (tensor.min() < 0 or tensor.max() >= len(trace.tensors)):
        raise ReplayError("the cost trace's access rows name tensors that do not exist")
    index_of_row = {ins[4]: k for k, ins in enumerate(program.instructions) if ins[4] != -1}
    table = {name: np.asarray(acc[name], dtype=np.int64) for name in ACCESS_COLUMNS}
    moved_cols = [np.asarray(cols[name], dtype=np.int64) for name in _MOVED]
    for row in range(n):
        k = index_of_row[row]
        operands = program.trace_operands[k]
        line = program.instructions[k][5]
        if len(operands) != int(counts[row]):
            raise ReplayError(f"trace row {row} lists {int(counts[row])} accesses; instruction {k} has "
                              f"{len(operands)}", line)
        moved = [0] * 6
        for j, (is_write, spec) in enumerate(operands):
            a = int(starts[row]) + j
            if int(table["is_write"][a]) != int(is_write):
                raise ReplayError(f"trace row {row}: access {j} is a {'write' if is_write else 'read'}", line)
            tid = int(table["tensor"][a])
            info = trace.tensors[tid]
            item = as_dtype(info.dtype).itemsize
            moved[2 * int(info.space) + int(is_write)] += math.prod(spec_shape(spec, program.constants)) * item
            claimed = tuple(int(table[c][a]) for c in ("part_lo", "part_hi", "byte_lo", "byte_hi"))
            _check_box(program, info, layouts[tid], spec_root(spec), claimed, row, j, line)
        if any(int(c[row]) != m for c, m in zip(moved_cols, moved, strict=True)):
            raise ReplayError(f"trace row {row}: the bytes it moves are not its regions' sizes", line)


def check_covered(program: Program) -> None:
    """The regions each instruction with a cost-trace row reads, and where its result goes, are among that
    row's accesses (the ones priced), so a program cannot price one region and touch another. (A second
    result, such as an activation's `reduce_res`, is not priced by the simulator either.)"""
    for k, (_kind, _params, operands, stores, row, line) in enumerate(program.instructions):
        if row < 0:
            continue
        costed = program.trace_operands[k]
        reads = {spec_root(spec) for is_write, spec in costed if not is_write}
        writes = {spec_root(spec) for is_write, spec in costed if is_write}
        for spec in operands:
            if spec is not None and spec[0] in ("r", "f", "d") and spec_root(spec) not in reads:
                raise ReplayError(f"trace row {row}: instruction {k} reads a region its row does not list", line)
        for store in stores:
            if store[1] == 0 and store[2] not in writes:
                raise ReplayError(f"trace row {row}: instruction {k} writes a region its row does not list", line)


def _check_loops(trace: Trace) -> None:
    for nest in trace.loop_contexts:
        for loop, iteration in nest:
            if not (0 <= loop < len(trace.loops)) or not (0 <= iteration < trace.loops[loop].trip_count):
                raise ReplayError("the cost trace's loop contexts name loops or iterations that do not exist")


def _check_nests(program: Program, trace: Trace) -> None:
    """The rows' source lines and loop nests describe one run of the program, as the simulator records it: each
    row's line is its instruction's; each loop (one run of a `for` statement) holds one contiguous run of rows,
    all inside the same iterations of its enclosing loops, its own iterations in order. The model reads lines (a
    load run again from one line is a repeat it may hoist) and nests (which iterations it may overlap), so rows
    regrouped into loops that never ran, or loads moved to one line, would be priced as a program that is not this
    one."""
    lines = np.asarray(trace.columns["line"], dtype=np.int64)
    ctx = np.asarray(trace.columns["loop_ctx"], dtype=np.int64)
    rows = [(ins[4], ins[5]) for ins in program.instructions if ins[4] != -1]
    for row, line in rows:
        if int(lines[row]) != line:
            raise ReplayError(f"trace row {row} says line {int(lines[row])}; its instruction is at line {line}", line)
    seen: dict[int, tuple] = {}  # loop -> (enclosing nest, last iteration, last row)
    for row in range(len(ctx)):
        nest = trace.loop_contexts[int(ctx[row])]
        for depth, (loop, iteration) in enumerate(nest):
            outer = tuple(nest[:depth])
            state = seen.get(loop)
            if state is not None and (state[0] != outer or iteration < state[1] or state[2] != row - 1):
                raise ReplayError(f"trace row {row}: loop {loop} (line {trace.loops[loop].line}) is not one run of "
                                  "its statement in program order", int(lines[row]))
            seen[loop] = (outer, iteration, row)


def _tensor_layout(program: Program, trace: Trace, tid: int) -> tuple:
    """How trace tensor `tid`'s coordinates map to its buffer: (buffer or -1 (blocked), serial, offset, strides),
    checked against the buffer and the tensor table."""
    if tid >= len(program.trace_tensors):
        raise ReplayError(f"the cost trace names tensor {tid}, which the program does not describe")
    layout = program.trace_tensors[tid]
    info = trace.tensors[tid]
    if not (isinstance(layout, tuple) and len(layout) == 4):
        raise ReplayError(f"trace tensor {tid}: malformed layout")
    bid, _serial, offset, strides = layout
    shape = tuple(info.shape)
    item = as_dtype(info.dtype).itemsize
    axis = info.partition_axis if int(info.space) else -1
    per_partition = 0 if axis < 0 else math.prod(shape[axis + 1:]) * item
    if info.total_bytes != math.prod(shape) * item or info.bytes_per_partition != per_partition \
            or info.partition_axis != axis:
        raise ReplayError(f"trace tensor {tid} ({info.name}): its sizes do not follow from its shape")
    if bid == -1:
        return layout
    if not (isinstance(bid, int) and 0 <= bid < len(program.buffers)):
        raise ReplayError(f"trace tensor {tid}: a buffer that does not exist")
    buffer = program.buffers[bid]
    if buffer[1] != int(info.space) or buffer[2] != info.dtype:
        raise ReplayError(f"trace tensor {tid} ({info.name}) is not in its buffer's memory and dtype")
    if len(strides) != len(shape) or not region_inside(offset, shape, strides, buffer[5]) \
            or not _one_to_one(shape, strides):
        raise ReplayError(f"trace tensor {tid} ({info.name}): its layout does not fit its buffer one-to-one")
    return layout


def _one_to_one(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    axes = sorted(((abs(s), n) for n, s in zip(shape, strides, strict=True) if n > 1), reverse=True)
    return all(big >= small * n for (big, _), (small, n) in zip(axes, axes[1:], strict=False)) \
        and all(s > 0 for s, _ in axes)


def region_box(program: Program, info: Any, layout: tuple, region: tuple) -> list[tuple[int, int]] | str:
    """The bounding box of `region` (an "r" or "f" spec) in the coordinates of trace tensor `info` laid out as
    `layout` (`_tensor_layout`, checked); a string saying why when the region is not in that tensor."""
    shape = tuple(info.shape)
    bid, serial, offset, strides = layout
    if bid == -1:  # a block of a blocked tensor: the block's key gives the leading coordinates
        buffer = program.buffers[region[1]]
        key = buffer[7]
        if buffer[8] != serial or not isinstance(key, tuple) or tuple(buffer[3]) != shape[len(key):]:
            return "is not in a block of"
        inner = shape[len(key):]
        prefix, strides, offset = key, _c_strides(inner), 0
    else:
        if region[1] != bid:
            return "is not in the buffer of"
        prefix, inner = (), shape
    box = _footprint(region, offset, strides, inner, program.constants)
    if box is None:
        return "reaches outside"
    return [(k, k + 1) for k in prefix] + box


def _check_box(program: Program, info: Any, layout: tuple, region: tuple, claimed: tuple, row: int, j: int,
               line: int) -> None:
    shape = tuple(info.shape)
    box = region_box(program, info, layout, region)
    if isinstance(box, str):
        raise ReplayError(f"trace row {row}: access {j} {box} tensor {info.name!r}", line)
    if not box or any(b_lo >= b_hi for b_lo, b_hi in box):
        return  # an empty region (a mask that keeps nothing) touches no bytes to check a claim against
    axis = info.partition_axis
    lo = hi = 0
    for (b_lo, b_hi), stride in zip(box, _partition_strides(shape, axis), strict=True):
        lo += b_lo * stride
        hi += (b_hi - 1) * stride
    item = as_dtype(info.dtype).itemsize
    parts = (0, 1) if axis < 0 else box[axis]
    needed = (parts[0], parts[1], lo * item, (hi + 1) * item)
    # Equal, not containing: the model takes two loads with one box for a repeat of one region (and elides it),
    # so a widened box is as much a lie as a shrunk one (issue 35).
    if claimed != needed:
        raise ReplayError(f"trace row {row}: access {j} claims partitions {claimed[:2]} and bytes {claimed[2:]} of "
                          f"{info.name!r}, but touches partitions {needed[:2]} and bytes {needed[2:]}", line)


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def _footprint(region: tuple, base: int, strides: tuple, shape: tuple, constants: list) -> list | None:
    """The bounding box, in the tensor's coordinates, of the elements `region` touches; None when one of them
    is not an element of the tensor."""
    if math.prod(region[3]) == 0:
        return [(0, 0)] * len(shape) if shape else []
    if region[0] == "f":  # explicit index arrays over the tensor's own storage
        view = _footprint(("r", region[1], region[2], region[3], region[4]), base, strides, shape, constants)
        if view is None or tuple(region[3]) != shape:
            return None
        return [(int(constants[c].min()), int(constants[c].max()) + 1) if constants[c].size else (0, 0)
                for c in region[5]]
    plan = _plan(strides, shape, tuple(region[3]), tuple(region[4]))
    order, steps = plan
    start = _unravel(region[2] - base, order, strides, shape)
    if start is not None and steps is not None:
        lo, hi = list(start), list(start)
        for axis, span in steps:
            if span < 0:
                lo[axis] += span
            else:
                hi[axis] += span
        if all(0 <= lo[k] and hi[k] < shape[k] for k in range(len(shape))):
            return [(lo[k], hi[k] + 1) for k in range(len(shape))]
    # Not a step per axis: every element, one by one.
    addresses = np.full((), region[2] - base, dtype=np.int64)
    for n, s in zip(region[3], region[4], strict=True):
        addresses = np.add.outer(addresses, np.arange(n, dtype=np.int64) * s)
    rest = addresses.reshape(-1)
    coords = np.zeros((len(shape), rest.size), dtype=np.int64)
    for k in order:
        coords[k] = rest // strides[k]
        rest = rest - coords[k] * strides[k]
    if np.any(rest != 0) or any(np.any((coords[k] < 0) | (coords[k] >= shape[k])) for k in range(len(shape))):
        return None
    return [(int(coords[k].min()), int(coords[k].max()) + 1) for k in range(len(shape))]


_PLANS: dict[tuple, tuple] = {}


def _plan(strides: tuple, shape: tuple, dims: tuple, steps: tuple) -> tuple:
    """How a region's dimensions step through a tensor's axes, computed once per shape of access: the axes by
    decreasing stride, and per dimension (axis, span), or None when a step is not along one axis."""
    key = (strides, shape, dims, steps)
    found = _PLANS.get(key)
    if found is None:
        order = sorted((k for k, n in enumerate(shape) if n > 1), key=lambda k: -strides[k])
        spans: list[tuple[int, int]] | None = []
        for n, s in zip(dims, steps, strict=True):
            if n <= 1 or s == 0:
                continue
            axis = next((k for k in order if s % strides[k] == 0), None)
            if axis is None:
                spans = None
                break
            spans.append((axis, s // strides[axis] * (n - 1)))  # type: ignore[union-attr]
        if len(_PLANS) > 65536:
            _PLANS.clear()
        found = _PLANS[key] = (order, spans)
    return found


def _unravel(rel: int, order: list[int], strides: tuple, shape: tuple) -> list[int] | None:
    coords = [0] * len(shape)
    for k in order:
        coords[k], rel = divmod(rel, strides[k])
        if coords[k] >= shape[k]:
            return None
    return coords if rel == 0 else None


# -- the rows' numbers, against the shapes the replay computes on ---------------------------------------
class RowCheck:
    """Checks each row's engine, dtype, partitions, free elements, FLOPs and transpose flag as the replay runs
    its instruction (the formulas are the simulator's: isa.py, language.py, runtime.py)."""

    def __init__(self, program: Program, trace: Trace) -> None:
        self.program = program
        cols = trace.columns
        self.cols = {name: np.asarray(cols[name]) for name in ("engine", "opcode", "dtype", "partitions",
                                                                "free_elems", "flops", "is_transpose")}
        self.op_names = trace.op_names
        self.dtype_names = trace.dtype_names

    def __call__(self, index: int, instruction: tuple, values: list[Any], outputs: tuple) -> None:
        kind, params, operands, stores, row, line = instruction
        if row < 0:
            if kind != "keep_written":
                raise ReplayError(f"instruction {index} ({kind}) has no cost-trace row", line)
            return
        c = {name: int(col[row]) for name, col in self.cols.items()}
        op, dtype = self.op_names[c["opcode"]], self.dtype_names[c["dtype"]]
        if not label_allowed(op, kind, params, stores):  # the model prices by this name (ops.py)
            raise ReplayError(f"trace row {row} labels a {kind} instruction {op!r}, which is not what runs", line)
        expected = self.expected(kind, op, c["engine"], params, operands, stores, values, outputs)
        if expected is None:
            raise ReplayError(f"instruction {index}: a {kind} cannot be a {op!r}", line)
        engines, want_dtype, partitions, free, flops, transpose = expected
        got = (dtype, c["partitions"], c["free_elems"], c["flops"], c["is_transpose"])
        if c["engine"] not in engines or got != (want_dtype, partitions, free, flops, transpose):
            raise ReplayError(f"trace row {row} ({op}) says engine {c['engine']}, dtype {dtype}, {c['partitions']} "
                              f"partitions, {c['free_elems']} free elements, {c['flops']} FLOPs, transpose "
                              f"{c['is_transpose']}; the instruction is {sorted(engines)}, {want_dtype}, {partitions}, "
                              f"{free}, {flops}, {transpose}", line)

    def expected(self, kind: str, op: str, engine: int, params: tuple, operands: tuple, stores: tuple,
                 values: list[Any], outputs: tuple) -> tuple | None:
        program = self.program
        result = outputs[0]
        shape = tuple(getattr(result, "shape", ()))
        size = math.prod(shape)
        parts = shape[0] if shape else 1
        default = (parts, size // parts if parts else 0, size)
        first = np.shape(values[0]) if values else ()
        first_size = math.prod(first)
        first_free = first_size // first[0] if first and first[0] else 0
        vector = frozenset((int(Engine.VECTOR),))
        engines_tensor = frozenset((int(Engine.TENSOR),))
        v06 = expected_row(kind, params, values, outputs, program.buffers[stores[0][2][1]][2] if stores else None)
        if v06 is not None:  # the NKI 0.6 instructions (semantics_v06.py)
            return v06
        if kind == "matmul":
            k, m, n, is_transpose = params
            dtype = program.buffers[spec_root(operands[0])[1]][2]
            return engines_tensor, dtype, k, n, 2 * m * n * k, int(is_transpose)
        if kind == "transpose":
            partitions, free, d = params
            if engine == int(Engine.TENSOR):  # rules.py: into PSUM, at most 128x128
                dtype = program.buffers[spec_root(operands[0])[1]][2]
                return engines_tensor, dtype, partitions, free, 2 * partitions * free * partitions, 1
            return vector, d, *default, 1
        if kind in ("move", "scalar"):  # store, dma_copy, and the assignments: priced by their destination
            dst = stores[0][2] if stores else None
            if dst is None:
                return None
            d_shape = spec_shape(dst, program.constants)
            d_size = math.prod(d_shape)
            d_parts = d_shape[0] if d_shape else 1
            dtype = program.buffers[dst[1]][2]
            if op == "tensor_copy" and kind == "move" and stores[0][0] == "assign":  # PSUM -> SBUF for a DMA
                dtype = program.buffers[spec_root(operands[0])[1]][2]
            free = d_size // d_parts if d_parts else 0
            if op in ("store", "dma_copy"):
                return frozenset((int(Engine.DMA),)), dtype, d_parts, free, 0, 0
            return vector, dtype, d_parts, free, d_size, 0
        if kind == "activation":
            return frozenset((int(Engine.SCALAR),)), "float32", parts, first_free, size, 0
        d = params[0] if kind in ("convert", "reciprocal", "where", "constant") else params[-1]
        if kind == "convert" and op == "load":
            return frozenset((int(Engine.DMA),)), d, parts, default[1], 0, 0
        choices = {name: frozenset(int(e) for e in engines) for name, engines in ENGINE_CHOICES.items()}
        engines = {"binary": choices["tensor_tensor"] if op == "tensor_tensor" else vector,
                   "unary": vector if params[0] in _VECTOR_UNARY else frozenset((int(Engine.SCALAR),)),
                   "convert": choices["tensor_copy"] if op == "tensor_copy" else vector,
                   "memset": choices["memset"], "tensor_scalar": choices["tensor_scalar"], "constant": frozenset(
                       (int(Engine.GPSIMD),))}.get(kind, vector)
        if kind == "tensor_scalar":
            n_ops = sum(1 for p in params[:2] if p is not None)
            return engines, d, parts, default[1], first_size * max(1, n_ops), 0
        if kind in ("scalar_tensor_tensor", "scan"):
            return engines, d, parts, default[1], 2 * first_size, 0
        if kind == "reduce":
            return engines, d, parts, first_free, first_size, 0
        return engines, d, *default, 0


# -- the outputs are the program's own, written by its DMAs ----------------------------------------------
def check_outputs(program: Program) -> None:
    """`_check_outputs`, with whatever a malformed program makes it raise turned into a ReplayError."""
    try:
        _check_outputs(program)
    except (ReplayError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed program the checks met unprepared
        raise ReplayError(f"the program's outputs are malformed: {type(exc).__name__}: {exc}") from None


def _check_outputs(program: Program) -> None:
    """Each output is a whole HBM tensor the program allocated (not an input, not a constant, not an on-chip
    tile), no two outputs share one, and recorded DMA instructions (rows in the cost trace) wrote every element.
    Otherwise the price would leave out the stores (an SBUF tile returned as the output) or the work (an
    input's buffer returned as the answer): issue 35."""
    seen: set[int] = set()
    masks: dict[int, np.ndarray] = {}
    for number, spec in enumerate(program.outputs):
        where = f"output {number}"
        if not (isinstance(spec, tuple) and spec and spec[0] == "r"):
            raise ReplayError(f"{where} is not a tensor of its own (a view or an index pattern)")
        bid = spec[1]
        name, space, _dtype, shape, _axis, size, init, key, _serial = program.buffers[bid]
        if space != 0:
            raise ReplayError(f"{where} ({name!r}) is in {('HBM', 'SBUF', 'PSUM')[space]}, not an HBM tensor: a kernel "
                              "returns HBM tensors it stored into")
        if init[0] in ("input", "const"):
            what = f"the kernel's input {init[1]}" if init[0] == "input" else "a host constant"
            raise ReplayError(f"{where} ({name!r}) is {what}, not a tensor the kernel allocated and wrote")
        if bid in seen:
            raise ReplayError(f"{where} ({name!r}) is also an earlier output")
        if key is not None or spec[2] != 0 or math.prod(spec[3]) != size \
                or tuple(spec[4]) != _c_strides(tuple(spec[3])):
            raise ReplayError(f"{where} ({name!r}) is not the whole of its tensor, in order")
        seen.add(bid)
        masks[bid] = np.zeros(size, dtype=bool)
    for _kind, _params, _operands, stores, row, _line in program.instructions:
        for store in stores:
            dst = store[2]
            mask = masks.get(dst[1])
            if mask is None or row < 0 or math.prod(dst[3]) == 0:
                continue
            view = np.ndarray(tuple(dst[3]), dtype=bool, buffer=mask, offset=dst[2], strides=tuple(dst[4]))
            if dst[0] == "f":
                view[tuple(program.constants[c] for c in dst[5])] = True
            else:
                view[...] = True
    for number, spec in enumerate(program.outputs):
        mask = masks[spec[1]]
        if not mask.all():
            missing = int(mask.size - np.count_nonzero(mask))
            raise ReplayError(f"output {number} ({program.buffers[spec[1]][0]!r}): {missing} of its {mask.size} "
                              "elements are written by no recorded instruction")
