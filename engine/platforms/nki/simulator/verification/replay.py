"""Run a recorded program (program.py) again on new inputs: pure numpy, no kernel code, no `exec`.

`replay(program, inputs, platform)` returns the outputs and the inputs as the program left them. Every
instruction computes with the same function of semantics.py the live simulator called, on operands cut out
of the same storage layout (each buffer is a flat array; a region is its recorded offset, shape and strides),
so a replay on the recorded inputs is bit-identical to the simulation that recorded it, and a replay on other
inputs is bit-identical to a simulation on those (the kernel's control flow cannot depend on values:
host_reads.py).

Before anything runs, `check_program` checks what a program made by an untrusted process could get wrong
(rules.py has the hardware rules): its structure (known kinds and store modes, buffers and constants that
exist), every region inside its buffer (a region outside would read memory that is not the program's), index
arrays inside their base, inputs of the recorded shapes and dtypes, scalar inputs equal to the recorded ones.
A replay given the cost trace also checks the order of accesses (replay_checks.py: no read of never-written
memory, the affine race rule, no HBM read back through another view than the one that wrote it).
Failures raise `ReplayError` naming the instruction and its kernel line. Buffers are allocated at their first
use and dropped after their last, so a replay holds what is live, not everything the kernel ever touched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKIError
from engine.platforms.nki.simulator.semantics import dtypes as dt

# the NKI 0.6 instructions' kinds (registered into semantics.KINDS)
from engine.platforms.nki.simulator.semantics import (
    semantics,
    semantics_v06,  # noqa: F401
)
from engine.platforms.nki.simulator.speed.blas import single_threaded_blas
from engine.platforms.nki.simulator.verification import rules
from engine.platforms.nki.simulator.verification.program import Program, ReplayError, region_inside, spec_root
from engine.platforms.nki.simulator.verification.replay_checks import AccessOrder
from engine.platforms.nki.simulator.verification.trace_check import RowCheck, check_covered, check_structure

STORE_MODES = ("write", "defer", "flush", "assign")
_SCALARS = (int, float, bool, np.generic)


@dataclass(frozen=True)
class Replay:
    outputs: tuple[np.ndarray, ...]
    inputs_after: tuple[Any, ...]  # array inputs as the program left them; scalars as given


def replay(program: Program, inputs: list[Any], platform: str = "trn1", *, trace: Any = None,
           checked: bool = False) -> Replay:
    """Run `program` on `inputs` (the kernel's arguments, in order). `trace`: its cost trace (the rules then
    know each instruction's op). `checked`: `check_program` already ran."""
    if not checked:
        check_program(program, platform, trace)
    check_inputs(program, inputs)
    machine = _Machine(program, inputs)
    if trace is not None:
        machine.row_check = RowCheck(program, trace)
        machine.order = AccessOrder(program, trace)
    with single_threaded_blas():  # as the simulator computes: BLAS results depend on its threads
        for index, instruction in enumerate(program.instructions):
            try:
                machine.run(index, instruction)
            except (ReplayError, MemoryError):
                raise
            except NKIError as exc:
                raise ReplayError(f"instruction {index} ({instruction[0]}) breaks a rule: {exc}",
                                  instruction[5]) from None
            except Exception as exc:  # noqa: BLE001 - a malformed program, whatever numpy makes of it
                raise ReplayError(f"instruction {index} ({instruction[0]}) cannot run: {type(exc).__name__}: "
                                  f"{exc}", instruction[5]) from None
    if machine.order is not None:
        machine.order.finish()
    try:
        outputs = tuple(machine.output(spec) for spec in program.outputs)
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - as above
        raise ReplayError(f"an output cannot be read: {exc}") from None
    after = []
    for k, x in enumerate(inputs):
        bid = machine.input_buffers.get(k)
        written = bid is not None and bid in machine.written
        after.append(machine.buffer(bid).reshape(np.shape(x)).copy() if written else x)
    return Replay(outputs=outputs, inputs_after=tuple(after))


def check_inputs(program: Program, inputs: list[Any]) -> None:
    """The inputs must look like the recorded ones: arrays of the same shapes and dtypes, the same scalars (a
    scalar is a parameter of the program: the kernel may have branched on it)."""
    if len(inputs) != len(program.inputs):
        raise ReplayError(f"the program takes {len(program.inputs)} inputs, got {len(inputs)}")
    for k, (x, entry) in enumerate(zip(inputs, program.inputs, strict=True)):
        if entry[0] == "array":
            if not isinstance(x, np.ndarray) or tuple(x.shape) != tuple(entry[1]) or x.dtype.str != entry[2]:
                got = f"{x.dtype.str}{list(x.shape)}" if isinstance(x, np.ndarray) else type(x).__name__
                raise ReplayError(f"input {k} is {got}; the program was recorded for {entry[2]}{list(entry[1])}")
        elif type(x) is not type(entry[1]) or not _same_scalar(x, entry[1]):
            raise ReplayError(f"scalar input {k} is {x!r}; the program was recorded for {entry[1]!r} and is "
                              "specific to it")


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, (float, np.floating)) and math.isnan(a):
        return isinstance(b, (float, np.floating)) and math.isnan(b)
    return bool(a == b)


# -- the structure of a program ------------------------------------------------------------------------
def check_program(program: Program, platform: str = "trn1", trace: Any = None) -> None:
    """Everything about `program` that does not need input values: structure, bounds, hardware rules, and the
    cost trace against the program when given. Raises ReplayError (MemoryError passes: a resource limit)."""
    try:
        _check_program(program, platform, trace)
    except (ReplayError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - a malformed program or trace, which the checks met unprepared
        raise ReplayError(f"the program or its trace is malformed: {type(exc).__name__}: {exc}") from None


def _check_program(program: Program, platform: str, trace: Any) -> None:
    buffers, constants = program.buffers, program.constants
    if program.indirect:
        line = program.indirect[0]
        raise ReplayError("the kernel's addresses or control flow depend on values computed on the device "
                          "(indirect DMA, gather or scatter, register_load); the recorded program holds this run's, "
                          "so it cannot be replayed on other inputs (simulate each input instead)",
                          line if isinstance(line, int) else 0)
    for bid, buffer in enumerate(buffers):
        _check_buffer(bid, buffer, program)
    if len(program.trace_operands) != len(program.instructions):
        raise ReplayError("the program's trace operands do not match its instructions")
    for index, instruction in enumerate(program.instructions):
        if not isinstance(instruction, tuple) or len(instruction) != 6:
            raise ReplayError(f"instruction {index} is malformed")
        kind, params, operands, stores, _row, line = instruction
        where = f"instruction {index} ({kind})"
        if kind not in semantics.KINDS or not isinstance(params, tuple):
            raise ReplayError(f"{where}: unknown kind or malformed parameters", line)
        for spec in operands:
            _check_spec(spec, buffers, constants, where, line)
        for store in stores:
            if not isinstance(store, tuple) or len(store) < 3 or store[0] not in STORE_MODES:
                raise ReplayError(f"{where}: malformed store {store!r}", line)
            if not isinstance(store[2], tuple) or store[2][0] not in ("r", "f"):
                raise ReplayError(f"{where}: a store must name a region of a buffer", line)
            _check_spec(store[2], buffers, constants, where, line)
        if kind in ("matmul", "transpose") and not all(isinstance(p, int) for p in params[:3 if kind == "matmul" else 2]):
            raise ReplayError(f"{where}: malformed parameters", line)
        for _is_write, spec in program.trace_operands[index]:
            _check_spec(spec, buffers, constants, where, line)
    for spec in program.outputs:
        _check_spec(spec, buffers, constants, "an output", 0)
    if trace is not None:
        check_structure(program, trace)
    rules.check(program, trace, platform)
    if trace is not None:
        check_covered(program)


def _check_buffer(bid: int, buffer: Any, program: Program) -> None:
    if not isinstance(buffer, tuple) or len(buffer) != 9:
        raise ReplayError(f"buffer {bid} is malformed")
    _name, space, dtype_name, shape, axis, size, init, _key, _serial = buffer
    if space not in (0, 1, 2) or not isinstance(axis, int) or not isinstance(shape, tuple) \
            or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ReplayError(f"buffer {bid} is malformed")
    try:
        storage = dt.as_dtype(dtype_name).storage
    except TypeError:
        raise ReplayError(f"buffer {bid} has an unknown dtype {dtype_name!r}") from None
    if not isinstance(size, int) or size < 0:
        raise ReplayError(f"buffer {bid} has a bad size")
    kind = init[0] if isinstance(init, tuple) and init else None
    if kind == "input":
        entry = program.inputs[init[1]] if isinstance(init[1], int) and 0 <= init[1] < len(program.inputs) else None
        if entry is None or entry[0] != "array" or math.prod(entry[1]) != size \
                or np.dtype(entry[2]) != np.dtype(storage):
            raise ReplayError(f"buffer {bid} does not hold the input it names")
    elif kind == "const":
        if not (isinstance(init[1], int) and 0 <= init[1] < len(program.constants)) \
                or program.constants[init[1]].size != size:
            raise ReplayError(f"buffer {bid} does not hold the constant it names")
    elif kind == "fill":
        if not isinstance(init[1], _SCALARS):
            raise ReplayError(f"buffer {bid} has a bad fill value")
    elif kind not in ("zeros", "nan"):
        raise ReplayError(f"buffer {bid} has an unknown initial content")


def _check_spec(spec: Any, buffers: list[tuple], constants: list[np.ndarray], where: str, line: int) -> None:
    if spec is None:
        return
    if not isinstance(spec, tuple) or not spec:
        raise ReplayError(f"{where}: malformed operand {spec!r}", line)
    tag = spec[0]
    if tag in ("r", "f"):
        if len(spec) != (5 if tag == "r" else 6):
            raise ReplayError(f"{where}: malformed region", line)
        _, bid, offset, shape, strides = spec[:5]
        if not (isinstance(bid, int) and 0 <= bid < len(buffers)):
            raise ReplayError(f"{where}: a region of buffer {bid!r}, which does not exist", line)
        if not region_inside(offset, shape, strides, buffers[bid][5]):
            raise ReplayError(f"{where}: a region outside buffer {bid} ({buffers[bid][0]})", line)
        if tag == "f":
            _check_indices(spec, constants, where, line)
    elif tag == "d":
        if len(spec) != 5 or spec[2] not in ("broadcast", "reshape", "transpose"):
            raise ReplayError(f"{where}: malformed view", line)
        _check_spec(spec[1], buffers, constants, where, line)
    elif tag == "c":
        if not (len(spec) == 2 and isinstance(spec[1], int) and 0 <= spec[1] < len(constants)):
            raise ReplayError(f"{where}: a constant that does not exist", line)
    elif tag == "s":
        if len(spec) != 2 or not isinstance(spec[1], _SCALARS):
            raise ReplayError(f"{where}: a scalar operand that is not a number", line)
    else:
        raise ReplayError(f"{where}: unknown operand kind {tag!r}", line)


def _check_indices(spec: tuple, constants: list[np.ndarray], where: str, line: int) -> None:
    shape, cids = spec[3], spec[5]
    if not isinstance(cids, tuple) or len(cids) != len(shape):
        raise ReplayError(f"{where}: malformed index arrays", line)
    arrays = []
    for axis, cid in enumerate(cids):
        if not (isinstance(cid, int) and 0 <= cid < len(constants)):
            raise ReplayError(f"{where}: an index array that does not exist", line)
        index = constants[cid]
        if index.dtype.kind not in "iu" or (index.size and (index.min() < 0 or index.max() >= shape[axis])):
            raise ReplayError(f"{where}: index array outside axis {axis} of its tensor", line)
        arrays.append(index)
    try:
        np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError:
        raise ReplayError(f"{where}: index arrays do not broadcast", line) from None


# -- running it ----------------------------------------------------------------------------------------
class _Machine:
    def __init__(self, program: Program, inputs: list[Any]) -> None:
        self.program = program
        self.inputs = inputs
        self.flat: list[np.ndarray | None] = [None] * len(program.buffers)
        self.storage = [np.dtype(dt.as_dtype(b[2]).storage) for b in program.buffers]
        self.dtypes = [dt.as_dtype(b[2]) for b in program.buffers]
        self.input_buffers = {b[6][1]: bid for bid, b in enumerate(program.buffers) if b[6][0] == "input"}
        self.last_use = _last_uses(program)
        self.written = written_buffers(program)
        self.row_check: Any = None  # trace_check.RowCheck, on the replay that checks the cost trace
        self.order: AccessOrder | None = None  # replay_checks.py, on that replay too

    def buffer(self, bid: int) -> np.ndarray:
        flat = self.flat[bid]
        if flat is None:
            flat = self.flat[bid] = self._allocate(bid)
        return flat

    def _allocate(self, bid: int) -> np.ndarray:
        _name, _space, _dtype, _shape, _axis, size, init, _key, _serial = self.program.buffers[bid]
        storage = self.storage[bid]
        kind = init[0]
        if kind == "zeros":
            return np.zeros(size, dtype=storage)
        if kind == "fill":
            return np.full(size, init[1], dtype=storage)
        if kind == "nan":
            return np.full(size, np.nan, dtype=storage)
        if kind == "input":  # read in place unless the program stores into it
            copy = True if bid in self.written else None
            return np.array(self.inputs[init[1]], dtype=storage, copy=copy).reshape(-1)
        return np.array(self.program.constants[init[1]], dtype=storage, copy=True).reshape(-1)

    def view(self, spec: tuple) -> np.ndarray:
        _, bid, offset, shape, strides = spec[:5]
        flat = self.buffer(bid)
        item = flat.itemsize
        if 0 in shape:
            return np.zeros(shape, dtype=flat.dtype)
        return np.ndarray(shape, flat.dtype, buffer=flat, offset=offset * item, strides=tuple(s * item for s in strides))

    def read(self, spec: Any) -> Any:
        if spec is None:
            return None
        tag = spec[0]
        if tag == "r":
            return self.view(spec)
        if tag == "f":
            return self.view(spec)[self.index(spec)]
        if tag == "d":
            window = dict(spec[4]) if spec[4] else None
            return semantics.derive(self.read(spec[1]), spec[2], tuple(spec[3]), window, "view")[0]
        if tag == "c":
            return self.program.constants[spec[1]]
        return spec[1]

    def output(self, spec: tuple) -> np.ndarray:
        """An output's values: the buffer itself when the output is all of it in order (the replay is over)."""
        values = self.read(spec)
        flat = self.flat[spec[1]] if spec[0] == "r" else None
        if flat is not None and spec[2] == 0 and values.size == flat.size and values.flags.c_contiguous:
            return values
        return np.array(values)

    def index(self, spec: tuple) -> tuple:
        return tuple(self.program.constants[c] for c in spec[5])

    def run(self, index: int, instruction: tuple) -> None:
        kind, params, operands, stores, _row, line = instruction
        order = self.order
        if order is not None:
            order.reads(index, instruction)
        values = [self.read(o) for o in operands]
        tiles = tuple(o is not None and o[0] in ("r", "f", "d") for o in operands)
        out = semantics.KINDS[kind](params, values, tiles)
        outputs = out if isinstance(out, tuple) else (out,)
        if self.row_check is not None:
            self.row_check(index, instruction, values, outputs)
        for store in stores:
            mode, slot, dst, *extra = store
            if not (isinstance(slot, int) and 0 <= slot < len(outputs)):
                raise ReplayError(f"instruction {index} ({kind}) stores a result it does not compute", line)
            if order is not None:
                order.store(index, instruction, store)
            self.store(mode, outputs[slot], dst, extra, kind)
            if order is not None:
                order.stored(store)
        for bid in self.last_use.get(index, ()):
            self.flat[bid] = None
            if order is not None:
                order.drop(bid)

    def store(self, mode: str, value: Any, dst: tuple, extra: list[Any], op: str) -> None:
        d = self.dtypes[dst[1]]
        if mode == "write":
            accumulate, _combines = extra  # _combines: for the race rule (replay_checks.py)
            if dst[0] == "f":
                shape = tuple(np.broadcast_shapes(*(self.program.constants[c].shape for c in dst[5])))
                semantics.write_fancy(self.view(dst), self.index(dst), shape, value, accumulate, d, op)
            else:
                semantics.write(self.view(dst), value, accumulate, d, op)
            return
        target = self.view(dst)
        if mode == "defer":
            if type(value) is not semantics.LazyMatmul or value.shape != target.shape:
                raise ReplayError(f"a queued accumulation of {type(value).__name__} into {target.shape}")
            semantics.add_product(target, *value.fp32_operands())
        elif mode == "flush":
            (windowed,) = extra
            semantics.fill_tile(target, value, bool(windowed), d, op)
        else:  # assign: a copy into a fresh tile
            target[...] = value


def written_buffers(program: Program) -> set[int]:
    """The buffers some instruction stores into."""
    return {store[2][1] for instruction in program.instructions for store in instruction[3]}


def _last_uses(program: Program) -> dict[int, list[int]]:
    """Per instruction index, the buffers nothing after it uses (inputs and outputs are kept to the end)."""
    last: dict[int, int] = {}
    for index, (_kind, _params, operands, stores, _row, _line) in enumerate(program.instructions):
        for spec in (*operands, *(s[2] for s in stores)):
            while spec is not None and spec[0] == "d":
                spec = spec[1]
            if spec is not None and spec[0] in ("r", "f"):
                last[spec[1]] = index
    kept = {spec_root(s)[1] for s in program.outputs if s is not None and spec_root(s)[0] in ("r", "f")}
    kept |= {bid for bid, b in enumerate(program.buffers) if b[6][0] == "input"}
    by_index: dict[int, list[int]] = {}
    for bid, index in last.items():
        if bid not in kept:
            by_index.setdefault(index, []).append(bid)
    return by_index
