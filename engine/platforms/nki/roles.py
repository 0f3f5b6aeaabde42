"""Record, then verify: what the kernel child and the verifier child do with a kernel's program.

The simulator backend's kernel child runs the kernel once, on the first seed, and records its executable
program beside the cost trace (`record`; engine.platforms.nki.simulator.verification.program). The verifier child (`VerifyRole` here, started as
`engine.platforms.nki.roles:VerifyRole`: our code only; it never imports, parses or runs the kernel's code) receives that program and trace
once (`Verifier.load`: structure, bounds, hardware rules, and the trace against the program,
engine.platforms.nki.simulator.verification.replay.check_program), then every seed's inputs (`Verifier.replay`): it re-executes the program
with numpy and returns the outputs, which are what the parent compares with the reference. The parent also
requires the kernel child's own outputs for the first seed to equal the replay's bit for bit; the verifier then
prices the trace it checked (`VerifyRole.profile`). See docs/evaluation.md ("Record, then verify").

A program crosses the pipes as arrays: its JSON (engine.platforms.nki.simulator.verification.program.wire) as bytes in `program.json`, its
constants as `program.const<k>`; the trace as frames.encode_trace does it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from engine.evaluator.kernel_replies import (
    Layout,
    ReplyCheck,
    failure_problem,
    output_count_problem,
    outputs_bytes,
)
from engine.platforms.nki.simulator.trace import ACCESS_COLUMNS, INSTRUCTION_COLUMNS

PROGRAM_PREFIX = "program."
TRACE_REPLY_BYTES = 512 * 1024**2  # room for the instruction trace in a kernel child's reply
PROGRAM_REPLY_BYTES = 1024**3  # and for the recorded program (first seed)


PROGRAM_BASE_BYTES = 256 * 1024**2  # the recorded program's JSON and constants, beyond what the shapes allow


def program_budget(inputs: list[np.ndarray], expected: list[np.ndarray]) -> int:
    """The recorded program's arrays: a base, plus host constants and index arrays in proportion to the
    problem's declared shapes, never more than PROGRAM_REPLY_BYTES."""
    shapes = sum(a.nbytes for a in inputs) + sum(e.size * e.dtype.itemsize for e in expected)
    return min(PROGRAM_REPLY_BYTES, PROGRAM_BASE_BYTES + 4 * shapes)


def record_reply_budget(inputs: list[np.ndarray], expected: list[np.ndarray]) -> int:
    """The recording run's reply: outputs, the trace and the program (no inputs: the verifier checks those)."""
    return outputs_bytes(expected) + TRACE_REPLY_BYTES + program_budget(inputs, expected) + 1024**2


# -- what the recording run's reply may hold ----------------------------------------------------------------
# As a plain run's (engine.evaluator.kernel_replies), with the trace's columns and the program's arrays in
# place of the inputs after the run, each with its own budget.
_TRACE_META_FIELDS = frozenset({"op_names", "dtype_names", "tensors", "loops", "loop_contexts"})


def record_reply_check(inputs: list[np.ndarray], expected: list[np.ndarray]) -> ReplyCheck:
    """The check `ChildProcess.receive` applies to the simulator's recording run reply (outputs, trace,
    program) before reading its arrays."""

    columns = {f"trace.col.{c}" for c in INSTRUCTION_COLUMNS} | {f"trace.acc.{c}" for c in ACCESS_COLUMNS}
    out_budget = outputs_bytes(expected) + 1024
    program_limit = program_budget(inputs, expected)

    def check(header: dict[str, Any], layout: Layout) -> str | None:
        if header.get("ok") is not True:
            return failure_problem(header, layout)
        problem = output_count_problem(header, expected)
        if problem:
            return problem
        if not isinstance(header.get("trace"), dict) or set(header["trace"]) != _TRACE_META_FIELDS:
            return "a trace description that is missing or malformed"
        if header.get("latency_ms") is not None:
            return "a latency it cannot claim"
        outputs = {f"out{k}" for k in range(header["output_count"])}
        sizes = {"outputs": 0, "trace": 0, "program": 0}
        lengths: dict[str, set[int]] = {"trace.col.": set(), "trace.acc.": set()}
        names = [name for name, _dtype, _shape in layout]
        if len(set(names)) != len(names):
            return "an array named twice"
        constants = sorted(int(n[len("program.const"):]) for n in names
                           if n.startswith("program.const") and n[len("program.const"):].isdigit())
        for name, dtype, shape in layout:
            nbytes = math.prod(shape) * dtype.itemsize
            if name in outputs:
                sizes["outputs"] += nbytes
            elif name in columns:
                if len(shape) != 1 or dtype.kind not in "iub":
                    return f"array {name!r} is {dtype.str}{list(shape)}"
                lengths[name[:10]].add(shape[0])
                sizes["trace"] += nbytes
            elif (name == f"{PROGRAM_PREFIX}json" or name.startswith(f"{PROGRAM_PREFIX}const")) \
                    and name in {f"{PROGRAM_PREFIX}json"} | {f"{PROGRAM_PREFIX}const{k}" for k in constants}:
                if name == f"{PROGRAM_PREFIX}json" and (len(shape) != 1 or dtype != np.uint8):
                    return f"array {name!r} is {dtype.str}{list(shape)}"
                sizes["program"] += nbytes
            else:
                return f"an unknown array {name[:80]!r}"
        if not all(name in names for name in outputs):
            return "fewer outputs than it announces"
        if (not columns <= set(names) or f"{PROGRAM_PREFIX}json" not in names
                or constants != list(range(len(constants))) or any(len(v) > 1 for v in lengths.values())):
            return "an incomplete or inconsistent trace or program"
        limits = {"outputs": out_budget, "trace": TRACE_REPLY_BYTES, "program": program_limit}
        for part, size in sizes.items():
            if size > limits[part]:
                return f"{size} bytes of {part}, over its budget of {limits[part]} bytes"
        return None

    return check


def replay_reply_budget(expected: list[np.ndarray]) -> int:
    """A replay's reply: the outputs (inputs are checked in the verifier, not sent back)."""
    return outputs_bytes(expected) + 1024**2


def record(kernel: Callable[..., Any], inputs: Sequence[Any], platform: str) -> tuple[Any, dict[str, np.ndarray]]:
    """In the kernel child: simulate once, recording the program. Returns the backend run (outputs, trace,
    inputs after) and the program as arrays."""
    # late: loaded in the child by the role that needs it, in its order around the guard
    from engine.evaluator.backends import BackendRun
    from engine.platforms.nki.simulator import simulate
    from engine.platforms.nki.simulator.verification.program import wire

    simulation = simulate(kernel, list(inputs), platform=platform, record_trace=True, record_program=True)
    header, constants = wire(simulation.program)  # type: ignore[arg-type]
    arrays = {f"{PROGRAM_PREFIX}json": np.frombuffer(json.dumps(header, allow_nan=True).encode(), dtype=np.uint8)}
    arrays.update({f"{PROGRAM_PREFIX}{name}": array for name, array in constants.items()})
    outputs = tuple(np.asarray(o) for o in simulation.outputs)
    return BackendRun(outputs=outputs, trace=simulation.trace, inputs_after=simulation.inputs_after), arrays


SAME_BITS_SLICE_BYTES = 1 << 24


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one dtype and shape hold the same bytes. Compared in 16 MiB slices with numpy,
    which lets other threads run while it compares: `tobytes()` and a bytes comparison hold the GIL for the
    whole array, and on a full-size output that froze the server's event loop for over a second."""
    flat_a = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    flat_b = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
    for start in range(0, flat_a.size, SAME_BITS_SLICE_BYTES):
        stop = start + SAME_BITS_SLICE_BYTES
        if not np.array_equal(flat_a[start:stop], flat_b[start:stop]):
            return False
    return True


def first_difference(recorded: list[np.ndarray], replayed: list[np.ndarray]) -> str | None:
    """Where the kernel child's outputs differ from the replay's, bit for bit (None: nowhere)."""
    if len(recorded) != len(replayed):
        return f"{len(recorded)} outputs returned, {len(replayed)} computed"
    for i, (a, b) in enumerate(zip(recorded, replayed, strict=True)):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"output {i} is {a.dtype}{list(a.shape)}, the program computes {b.dtype}{list(b.shape)}"
        if not same_bits(a, b):
            differ = int(np.count_nonzero(~((a == b) | (np.isnan(a) & np.isnan(b))) if a.dtype.kind in "fc"
                                          else a != b))
            return f"output {i}: {differ} of {a.size} elements differ"
    return None


class VerificationFailed(Exception):
    """The program is malformed, breaks a hardware rule, or its trace does not describe it (the kernel's fault)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class Verifier:
    """The verifier child's state: one checked program and its trace."""

    def __init__(self) -> None:
        self.program: Any = None
        self.trace: Any = None
        self.platform = "trn1"
        self.written_inputs: set[int] = set()
        self.stated_loops: dict[int, int] = {}

    def load(self, platform: str, trace_meta: dict[str, Any], arrays: dict[str, np.ndarray],
             stated_loops: dict[int, int] | None = None) -> None:
        """Read and check the program and its trace. `stated_loops`: {line: LoopKind} the kernel's source states
        (source_loops.stated_loop_kinds, computed by the parent, which has the source); the first replay holds the
        trace's loops to them."""
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.evaluator.protocol import ProtocolError
        from engine.platforms.nki.frames import decode_trace
        from engine.platforms.nki.simulator.verification.program import RecordingError, ReplayError, from_wire
        from engine.platforms.nki.simulator.verification.replay import check_program, written_buffers
        from engine.platforms.nki.simulator.verification.trace_check import check_outputs

        try:
            header = json.loads(arrays[f"{PROGRAM_PREFIX}json"].tobytes())
            constants = {name[len(PROGRAM_PREFIX):]: a for name, a in arrays.items()
                         if name.startswith(PROGRAM_PREFIX) and name != f"{PROGRAM_PREFIX}json"}
            if not isinstance(header, dict) or set(constants) != {f"const{k}" for k in range(int(header["constants"]))}:
                raise ValueError("its constants are not the ones it declares")
            program = from_wire(header, constants)
            trace = decode_trace(trace_meta, arrays, "trace.")
        except (KeyError, ValueError, TypeError, RecursionError, RecordingError, ProtocolError) as exc:
            raise VerificationFailed(f"the recorded program cannot be read: {type(exc).__name__}: {exc}") from None
        try:
            check_program(program, platform, trace)
            check_outputs(program)
        except ReplayError as exc:
            raise VerificationFailed(str(exc), exc.line or None) from None
        self.program, self.trace, self.platform = program, trace, platform
        self.stated_loops = dict(stated_loops or {})
        written = written_buffers(program)
        self.written_inputs = {b[6][1] for bid, b in enumerate(program.buffers) if bid in written and b[6][0] == "input"}

    def replay(self, inputs: list[Any], check_rows: bool) -> tuple[list[np.ndarray], str | None]:
        """The program's outputs on `inputs`, and a message if it wrote one of them (inputs are read-only).
        `check_rows`: check the trace's per-row numbers against the shapes this replay computes on (once)."""
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.evaluator.checks import CheckFailed, check_inputs_unchanged
        from engine.platforms.nki.simulator.verification.program import ReplayError
        from engine.platforms.nki.simulator.verification.replay import replay
        from engine.platforms.nki.simulator.verification.source_loops import check_loop_kinds

        sent = {k: x.copy() for k, x in enumerate(inputs) if k in self.written_inputs}
        try:
            result = replay(self.program, inputs, self.platform, trace=self.trace if check_rows else None,
                            checked=True)
            if check_rows:  # after the replay's race rule, whose message says more about an affine label
                check_loop_kinds(self.trace, self.stated_loops)
        except ReplayError as exc:
            raise VerificationFailed(str(exc), exc.line or None) from None
        for k in sorted(sent):  # only inputs the program stores into can change
            try:
                check_inputs_unchanged([sent[k]], [np.asarray(result.inputs_after[k])])
            except CheckFailed as exc:
                return list(result.outputs), str(exc).replace("its input 0", f"its input {k}", 1)
        return list(result.outputs), None


class VerifyRole:
    """The `verify` child (started by the pipeline as `engine.platforms.nki.roles:VerifyRole`): replays the
    kernel's recorded program on every seed's inputs, then prices the trace it checked with the backend's
    performance model (`profile`); only our code runs there, it never sees the kernel's source."""

    def __init__(self, config: dict[str, Any]) -> None:
        # late: the generic roles module, for the profile role's pricing (the same code a profile child runs)
        from engine.evaluator.child import ProfileRole

        self.verifier = Verifier()
        # Pricing here, not in a fourth child: this process already holds the checked trace and runs our code
        # only, so a separate child would add a start-up (0.34 s of CPU per mini evaluation) and a copy of the trace.
        self.pricer = ProfileRole(config) if config.get("implementation") or config.get("backend") else None
        self.checked_trace: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None

    def load(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        try:
            stated = header.get("stated_loops") or []
            if not (isinstance(stated, list) and all(isinstance(pair, list) and len(pair) == 2
                                                     and all(type(v) is int for v in pair) for pair in stated)):
                raise ValueError("stated_loops must be [line, kind] pairs of integers")
            self.verifier.load(header["platform"], header["trace"], arrays, {line: kind for line, kind in stated})
        except VerificationFailed as exc:
            return {"ok": False, "kind": "incorrect", "message": str(exc), "line": exc.line}, {}
        # Kept as received, so `profile` decodes exactly what a profile child would have been sent.
        self.checked_trace = (header["trace"], {k: v for k, v in arrays.items() if k.startswith("trace.")})
        return {"ok": True, "instructions": len(self.verifier.program)}, {}

    def replay(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: a role loads only its own modules, in its order around the guards
        from engine.evaluator.protocol import join_inputs

        inputs = join_inputs(header["input_count"], arrays, header.get("scalars", []))
        del arrays
        try:
            outputs, modified = self.verifier.replay(inputs, bool(header.get("check_rows")))
        except VerificationFailed as exc:
            return {"ok": False, "kind": "incorrect", "message": str(exc), "line": exc.line}, {}
        return ({"ok": True, "output_count": len(outputs), "modified_input": modified},
                {f"out{i}": o for i, o in enumerate(outputs)})

    def profile(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The performance model's price for the trace this child loaded and checked; the request carries no
        trace (the parent cannot substitute another) and is sent once every seed's replay was asked for."""
        if self.pricer is None or self.checked_trace is None:
            reason = "no backend was named" if self.pricer is None else "no checked trace was loaded"
            return {"ok": False, "kind": "infrastructure_error", "message": f"cannot price: {reason}"}, {}
        meta, trace_arrays = self.checked_trace
        return self.pricer.profile({"trace": meta, "platform": self.verifier.platform}, trace_arrays)
