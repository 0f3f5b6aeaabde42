"""Record, then verify: what the kernel child and the verifier child do with a kernel's program.

The simulator backend's kernel child runs the kernel once, on the first seed, and records its executable
program beside the cost trace (`record`; engine.platforms.nki.simulator.verification.program). The verifier child (the `verify` role of
child.py: our code only; it never imports, parses or runs the kernel's code) receives that program and trace
once (`Verifier.load`: structure, bounds, hardware rules, and the trace against the program,
engine.platforms.nki.simulator.verification.replay.check_program), then every seed's inputs (`Verifier.replay`): it re-executes the program
with numpy and returns the outputs, which are what the parent compares with the reference. The parent also
requires the kernel child's own outputs for the first seed to equal the replay's bit for bit, and prices the
verified trace in the profile child. See docs/evaluation.md ("Record, then verify").

A program crosses the pipes as arrays: its JSON (engine.platforms.nki.simulator.verification.program.wire) as bytes in `program.json`, its
constants as `program.const<k>`; the trace as protocol.encode_trace does it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

PROGRAM_PREFIX = "program."
TRACE_REPLY_BYTES = 512 * 1024**2  # room for the instruction trace in a kernel child's reply
PROGRAM_REPLY_BYTES = 1024**3  # and for the recorded program (first seed)


def kernel_reply_budget(inputs: list[np.ndarray], expected: list[np.ndarray]) -> int:
    """A kernel child's reply: outputs (up to twice the expected size: a wrong dtype is reported, not refused),
    inputs after the run, a trace."""
    return _outputs_bytes(expected) + sum(a.nbytes for a in inputs) + TRACE_REPLY_BYTES + 1024**2


def record_reply_budget(inputs: list[np.ndarray], expected: list[np.ndarray]) -> int:
    """The recording run's reply: the above plus the program."""
    return kernel_reply_budget(inputs, expected) + PROGRAM_REPLY_BYTES


def replay_reply_budget(expected: list[np.ndarray]) -> int:
    """A replay's reply: the outputs (inputs are checked in the verifier, not sent back)."""
    return _outputs_bytes(expected) + 1024**2


def _outputs_bytes(expected: list[np.ndarray]) -> int:
    return 2 * sum(e.size * e.dtype.itemsize for e in expected)


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


def first_difference(recorded: list[np.ndarray], replayed: list[np.ndarray]) -> str | None:
    """Where the kernel child's outputs differ from the replay's, bit for bit (None: nowhere)."""
    if len(recorded) != len(replayed):
        return f"{len(recorded)} outputs returned, {len(replayed)} computed"
    for i, (a, b) in enumerate(zip(recorded, replayed, strict=True)):
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"output {i} is {a.dtype}{list(a.shape)}, the program computes {b.dtype}{list(b.shape)}"
        if np.ascontiguousarray(a).view(np.uint8).tobytes() != np.ascontiguousarray(b).view(np.uint8).tobytes():
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

    def load(self, platform: str, trace_meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.evaluator.protocol import ProtocolError, decode_trace
        from engine.platforms.nki.simulator.verification.program import RecordingError, ReplayError, from_wire
        from engine.platforms.nki.simulator.verification.replay import check_program, written_buffers

        try:
            header = json.loads(arrays[f"{PROGRAM_PREFIX}json"].tobytes())
            constants = {name[len(PROGRAM_PREFIX):]: a for name, a in arrays.items()
                         if name.startswith(PROGRAM_PREFIX) and name != f"{PROGRAM_PREFIX}json"}
            program = from_wire(header, constants)
            trace = decode_trace(trace_meta, arrays, "trace.")
        except (KeyError, ValueError, TypeError, RecursionError, RecordingError, ProtocolError) as exc:
            raise VerificationFailed(f"the recorded program cannot be read: {type(exc).__name__}: {exc}") from None
        try:
            check_program(program, platform, trace)
        except ReplayError as exc:
            raise VerificationFailed(str(exc), exc.line or None) from None
        self.program, self.trace, self.platform = program, trace, platform
        written = written_buffers(program)
        self.written_inputs = {b[6][1] for bid, b in enumerate(program.buffers) if bid in written and b[6][0] == "input"}

    def replay(self, inputs: list[Any], check_rows: bool) -> tuple[list[np.ndarray], str | None]:
        """The program's outputs on `inputs`, and a message if it wrote one of them (inputs are read-only).
        `check_rows`: check the trace's per-row numbers against the shapes this replay computes on (once)."""
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.evaluator.checks import CheckFailed, check_inputs_unchanged
        from engine.platforms.nki.simulator.verification.program import ReplayError
        from engine.platforms.nki.simulator.verification.replay import replay

        sent = {k: x.copy() for k, x in enumerate(inputs) if k in self.written_inputs}
        try:
            result = replay(self.program, inputs, self.platform, trace=self.trace if check_rows else None,
                            checked=True)
        except ReplayError as exc:
            raise VerificationFailed(str(exc), exc.line or None) from None
        for k in sorted(sent):  # only inputs the program stores into can change
            try:
                check_inputs_unchanged([sent[k]], [np.asarray(result.inputs_after[k])])
            except CheckFailed as exc:
                return list(result.outputs), str(exc).replace("its input 0", f"its input {k}", 1)
        return list(result.outputs), None
