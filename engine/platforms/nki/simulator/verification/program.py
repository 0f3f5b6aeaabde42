"""The executable record of a simulation: every instruction with everything needed to run it again.

Beside the cost trace (trace.py, unchanged), `simulate(..., record_program=True)` records a `Program`:

* **buffers**: the storage the kernel touched, one per allocation: a tensor's array, one block of a blocked
  tensor (recycling.py), a result tile. Each says its tensor's name, memory space, dtype, shape and partition
  axis (for the hardware rules), its size in elements and what it holds before any instruction writes it:
  zeros (storage declared without a value: nothing may read it before a write, replay_checks.py), a fill
  value (`nl.zeros`/`nl.full`), NaN (an HBM output: unwritten elements read back NaN, and nothing may read
  them either), the k-th kernel input, or a host constant.
* **instructions**, in program order: `(kind, params, operands, stores, row, line)`. `kind` names a function
  of semantics.py and `params` its parameters (plain data); operands are what it reads, stores where its
  results go (`write`: Simulator.write's fit/accumulate/round, with its accumulate operator and whether the
  race rule counts it as accumulating; `defer`: a queued PSUM accumulation;
  `flush`: a result into its own tile; `assign`: a copy into a fresh tile). `row` is the instruction's row
  in the cost trace (-1 for the few writes that have none, e.g. `reduce_res`), `line` the kernel line.
* **operand specs** give the exact elements, as the simulator's addressing resolved them:
  `("r", buffer, offset, shape, strides)` (element offset and strides into the buffer, any affine pattern:
  slices, transposes, partition broadcasts); `("f", buffer, offset, shape, strides, index constants)`
  (non-affine indices: explicit index arrays, fixed when the kernel was traced; the simulator has no
  data-dependent addressing, so none is recorded); `("d", source, kind, shape, window)` (a view derived
  without an instruction: broadcast_to, reshape, .T); `("s", value)` a scalar, `("c", k)` a host constant
  array, None for an absent operand. `trace_operands` of an instruction are the specs behind its trace row's
  access rows, in order, for the verifier's cost check.
* **inputs** (each argument: an array's shape and dtype, or a scalar's value: a program is specific to its
  scalars) and **outputs** (specs of the returned tensors).

Buffers are found by their memory: the owner of a view's storage (followed through `.base`), or the block an
access cuts into; a view's offset and strides are its address and strides relative to that owner, so what is
recorded is exactly what the live simulation touched. `wire`/`from_wire` turn a program into a JSON header
plus numeric arrays (no pickle: the verifier reads programs made in an untrusted process).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.semantics.tensors import Access, FancyAccess, Tensor


@dataclass
class Program:
    # (name, space, dtype, shape, partition axis, size, init, block key or None, tensor serial)
    buffers: list[tuple] = field(default_factory=list)
    instructions: list[tuple] = field(default_factory=list)  # (kind, params, operands, stores, row, line)
    trace_operands: list[tuple] = field(default_factory=list)  # per instruction: ((is_write, spec), ...)
    constants: list[np.ndarray] = field(default_factory=list)
    inputs: list[tuple] = field(default_factory=list)  # ("array", shape, dtype) | ("scalar", value)
    outputs: list[Any] = field(default_factory=list)  # operand specs
    # Per trace tensor id: (buffer, tensor serial, offset, strides of its coordinates in the buffer); a blocked
    # tensor's buffer is -1: its blocks' buffers carry its serial and their block keys.
    trace_tensors: list[tuple] = field(default_factory=list)
    # Kernel lines whose addresses (indirect.py) or control flow (isa_v06.register_load) came from a tile's values:
    # they are this run's constants, so the program cannot be replayed on other inputs (check_program refuses it).
    indirect: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.instructions)


class ReplayError(Exception):
    """The program is malformed, breaks a hardware rule, or does not fit the inputs."""

    def __init__(self, message: str, line: int = 0) -> None:
        self.line = line
        super().__init__(f"{message} (kernel line {line})" if line else message)


def spec_shape(spec: tuple, constants: list[np.ndarray]) -> tuple[int, ...]:
    """The shape of the values an operand spec reads (its tile shape)."""
    tag = spec[0]
    if tag == "r":
        return tuple(spec[3])
    if tag == "f":
        return tuple(np.broadcast_shapes(*(constants[c].shape for c in spec[5])))
    if tag == "d":
        source = spec_shape(spec[1], constants)
        shape = tuple(spec[3]) if spec[2] != "transpose" else tuple(reversed(source))
        window = dict(spec[4]) if spec[4] else None
        if window:
            out = list(shape)
            for pos, (lo, hi, size) in window.items():
                if -pos <= len(out) and out[pos] == size:
                    out[pos] = max(0, min(hi, size) - max(lo, 0))
            shape = tuple(out)
        return shape
    if tag == "c":
        return tuple(constants[spec[1]].shape)
    return ()


def spec_root(spec: tuple) -> tuple:
    """The region a derived view reads."""
    while spec[0] == "d":
        spec = spec[1]
    return spec


def region_inside(offset: Any, shape: Any, strides: Any, size: int) -> bool:
    """Whether every element of the region lies in a buffer of `size` elements."""
    if not (isinstance(offset, int) and isinstance(shape, tuple) and isinstance(strides, tuple)
            and len(shape) == len(strides) and all(isinstance(n, int) and n >= 0 for n in shape)
            and all(isinstance(s, int) for s in strides)):
        return False
    if 0 in shape:
        return True
    lo = hi = offset
    for n, s in zip(shape, strides, strict=True):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return 0 <= lo and hi < size


class RecordingError(Exception):
    """The recorder met storage it cannot address (a simulator bug, never the kernel's)."""


def _address(a: np.ndarray) -> int:
    return a.ctypes.data


class ProgramRecorder:
    """Builds a Program as the simulator runs (runtime.Simulator calls it; see `Simulator.compute`)."""

    def __init__(self) -> None:
        self.program = Program()
        self._owners: dict[int, tuple] = {}  # id(owner array) -> (weakref, buffer, address, nbytes)
        self._blocks: dict[int, tuple] = {}  # id(Block) -> (block, buffer, address, nbytes)
        self._open: list | None = None  # [kind, params, operands, stores, row, line]
        self._outputs: tuple = ()  # the open instruction's results, for stores to name their slot
        self._specs: dict[int, tuple] = {}  # id(access) -> (access, spec), within the open instruction

    # -- storage ------------------------------------------------------------------------------------
    def declared(self, t: Tensor, init: tuple) -> None:
        """`t` was made with storage whose content matters before any write: ("fill", v), ("nan",),
        ("input", k), ("const", array)."""
        if t.data is None:
            return
        owner = _owner(t.data)
        if init[0] == "const":
            init = ("const", self.constant(init[1]))
        bid = self._register(owner, t, init)
        self._owners[id(owner)] = (weakref.ref(owner), bid, _address(owner), owner.nbytes)

    def _register(self, owner: np.ndarray, t: Tensor, init: tuple, key: tuple | None = None) -> tuple:
        item = np.dtype(t.dtype.storage).itemsize
        k = len(key) if key else 0
        shape = t.shape[k:]
        axis = t.partition_axis - k if t.partition_axis >= 0 else -1
        bid = len(self.program.buffers)
        self.program.buffers.append((t.name, int(t.space), t.dtype.name, shape, axis, owner.nbytes // item, init,
                                     key, t.serial))
        return bid

    def _owner_entry(self, t: Tensor, storage: np.ndarray) -> tuple:
        owner = _owner(storage)
        entry = self._owners.get(id(owner))
        if entry is None or entry[0]() is not owner:
            bid = self._register(owner, t, ("zeros",))
            entry = self._owners[id(owner)] = (weakref.ref(owner), bid, _address(owner), owner.nbytes)
        return entry

    def _block_entry(self, t: Tensor, key: tuple) -> tuple:
        block = t.blocks[key]  # type: ignore[index]
        entry = self._blocks.get(id(block))
        if entry is None or entry[0] is not block:
            init = ("zeros",) if t.fill is None else ("fill", t.fill)  # zeros: nothing written yet
            bid = self._register(block.data, t, init, key)
            entry = self._blocks[id(block)] = (block, bid, _address(block.data), block.data.nbytes)
        return entry

    def _locate(self, entry: tuple, view: np.ndarray, what: str) -> tuple:
        _, bid, base, nbytes = entry
        item = view.itemsize
        if not view.size:
            return ("r", bid, 0, tuple(view.shape), (0,) * view.ndim)
        offset = _address(view) - base
        if offset < 0 or offset >= nbytes or offset % item:
            raise RecordingError(f"{what}: a view outside its tensor's storage")
        return ("r", bid, offset // item, tuple(view.shape), tuple(s // item for s in view.strides))

    def array_spec(self, t: Tensor, view: np.ndarray) -> tuple:
        """A view of a non-blocked tensor's storage (outputs, inputs after the run)."""
        return self._locate(self._owner_entry(t, t.data), view, t.name)  # type: ignore[arg-type]

    def constant(self, values: Any) -> int:
        self.program.constants.append(np.array(values, copy=True))
        return len(self.program.constants) - 1

    # -- operands -----------------------------------------------------------------------------------
    def spec(self, x: Any) -> Any:
        if x is None:
            return None
        if isinstance(x, Access):
            found = self._specs.get(id(x))
            if found is not None and found[0] is x:
                return found[1]
            spec = self._access_spec(x)
            self._specs[id(x)] = (x, spec)
            return spec
        if isinstance(x, np.ndarray):
            return ("c", self.constant(x))
        return ("s", x)

    def _access_spec(self, acc: Access) -> tuple:
        t = acc.tensor
        if isinstance(acc, FancyAccess):
            base = self._locate(self._owner_entry(t, acc.base), acc.base, t.name)
            return ("f", *base[1:], tuple(self.constant(i) for i in acc.index))
        derivation = getattr(acc, "derivation", None)
        if derivation is not None:
            source, kind, shape, window = derivation
            return ("d", self.spec(source), kind, shape, _window(window))
        if t.blocks is not None:
            entry = self._block_entry(t, acc.key)  # type: ignore[arg-type]
        elif t.data is None:
            raise RecordingError(f"{t.name}: an access to a tensor without storage")
        else:
            entry = self._owner_entry(t, t.data)
        return self._locate(entry, acc.array, t.name)

    # -- instructions -------------------------------------------------------------------------------
    def compute(self, kind: str, params: tuple, operands: list[Any], outputs: Any, line: int) -> None:
        """An instruction starts: `kind(params, operands)` gave `outputs`."""
        if self._open is not None:
            self._close(-1)
        self._open = [kind, params, tuple(self.spec(o) for o in operands), [], -1, line]
        self._outputs = outputs if isinstance(outputs, tuple) else (outputs,)

    def before_open(self, kind: str, params: tuple, operands: list[Any], outputs: Any, store: tuple) -> None:
        """A row-less step the simulator only finds it needs once the open instruction is being stored (the
        zeros of a PSUM tile a matmul accumulates into, runtime._zero_unwritten_psum): recorded ahead of it.
        `store` is (mode, slot, destination access, *extra)."""
        mode, slot, dst, *extra = store
        entry = (kind, params, tuple(self.spec(o) for o in operands), ((mode, slot, self.spec(dst), *extra),), -1, 0)
        self.program.instructions.append(entry)
        self.program.trace_operands.append(())
        _ = outputs  # the step's value: kept by the caller, recomputed by the replayer

    def store(self, mode: str, value: Any, dst: Access, *extra: Any) -> None:
        """The open instruction's result `value` goes to `dst` (mode and its parameters: see the docstring)."""
        if self._open is None:
            raise RecordingError(f"a {mode} store outside an instruction")
        slot = next((k for k, out in enumerate(self._outputs) if out is value), None)
        if slot is None:
            raise RecordingError(f"a {mode} store of a value the instruction did not compute")
        self._open[3].append((mode, slot, self.spec(dst), *extra))

    def emitted(self, row: int, reads: list[Any], writes: list[Any]) -> None:
        """The open instruction got its trace row; `reads` and `writes` are the accesses behind it."""
        if self._open is None:
            raise RecordingError("a trace row without an instruction")
        costed = tuple((0, self.spec(a)) for a in reads if isinstance(a, Access))
        costed += tuple((1, self.spec(a)) for a in writes if isinstance(a, Access))
        self._close(row, costed)

    def _close(self, row: int, costed: tuple = ()) -> None:
        entry = self._open
        self._open = None
        entry[4] = row  # type: ignore[index]
        entry[3] = tuple(entry[3])  # type: ignore[index]
        self.program.instructions.append(tuple(entry))  # type: ignore[arg-type]
        self.program.trace_operands.append(costed)
        self._specs.clear()
        self._outputs = ()

    def traced(self, tid: int, t: Tensor) -> None:
        """Trace tensor `tid` is `t`: the buffer behind it (blocked tensors: their blocks' buffers name it)."""
        while len(self.program.trace_tensors) <= tid:
            self.program.trace_tensors.append((-1, -1, 0, ()))
        if t.blocks is None and t.data is not None:
            # How the tensor's coordinates sit in its buffer: the verifier maps regions to the trace's boxes.
            region = self._locate(self._owner_entry(t, t.data), t.data, t.name)
            self.program.trace_tensors[tid] = (region[1], t.serial, region[2], region[4])
        else:
            self.program.trace_tensors[tid] = (-1, t.serial, 0, ())

    def finish(self, inputs: list[tuple], outputs: list[Any]) -> Program:
        if self._open is not None:
            self._close(-1)
        self.program.inputs = inputs
        self.program.outputs = outputs
        return self.program


def _owner(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _window(window: Any) -> tuple | None:
    if not window:
        return None
    return tuple(sorted((int(pos), tuple(int(v) for v in bounds)) for pos, bounds in window.items()))


# -- the wire form: JSON plus numeric arrays (protocol.py frames them; no pickle) ---------------------------
PROGRAM_FIELDS = ("buffers", "instructions", "trace_operands", "inputs", "outputs", "trace_tensors", "indirect")


def wire(program: Program) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The program as a JSON-able header and its constants as arrays (`const<k>`)."""
    header = {name: _encode(getattr(program, name)) for name in PROGRAM_FIELDS}
    header["constants"] = len(program.constants)
    return header, {f"const{k}": c for k, c in enumerate(program.constants)}


def from_wire(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> Program:
    """The inverse of `wire`. The result is only as well-formed as its sender made it: replay.check_program
    checks it before anything runs."""
    try:
        count = int(header["constants"])
        fields = {name: _decode(header[name]) for name in PROGRAM_FIELDS}
        constants = [arrays[f"const{k}"] for k in range(count)]
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise RecordingError(f"malformed program: {type(exc).__name__}: {exc}") from None
    if not all(isinstance(v, tuple) for v in fields.values()):
        raise RecordingError("malformed program: its tables are not lists")
    return Program(constants=constants, **{k: list(v) for k, v in fields.items()})


def _encode(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_encode(v) for v in x]
    if isinstance(x, np.generic):
        return {"np": x.dtype.str, "v": x.item()}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"a program holds a {type(x).__name__}")


def _decode(x: Any) -> Any:
    """Lists become tuples (a program holds no lists), tagged numpy scalars their type again."""
    if isinstance(x, list):
        return tuple(_decode(v) for v in x)
    if isinstance(x, dict):
        kind = np.dtype(str(x["np"]))
        if kind.kind not in "biufc":
            raise ValueError(f"a scalar of dtype {kind}")
        return kind.type(x["v"])
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"a program holds a {type(x).__name__}")
