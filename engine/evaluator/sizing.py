"""How much data a reference's problem moves: the bytes of its inputs and outputs, as the reference itself
makes them. The caller chooses the sandbox limits from it before the first evaluation starts (a full-size
reference needs the large ones; `benchmark.services.limits_for`).

The reference runs once in a sandboxed reference child (the role, static check and guards an evaluation
uses) on its plain inputs; only the sizes come back to the caller as a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.evaluator.sandbox.process import ChildProcess, Limits
from engine.evaluator.static_check import StaticCheckError, check_reference_source

# Sizes do not depend on the values, so any fixed seed will do.
_SEED = 0


@dataclass(frozen=True)
class ReferenceCheck:
    """What running a reference once showed: its problem's bytes (None: unknown), or why it is broken."""

    io_bytes: int | None = None
    error: str | None = None  # the reference's own fault, said for its author; None: it ran, or we could not tell
    line: int | None = None  # in the reference, when the error has one


def reference_io_bytes(reference_source: str, limits: Limits) -> int | None:
    """Bytes of the reference's inputs plus its outputs: NKIBench's `hbm_bytes` (each input read once, each
    output written once). None when the reference cannot run within `limits`; the evaluation says why."""
    return check_reference(reference_source, limits).io_bytes


def check_reference(reference_source: str, limits: Limits) -> ReferenceCheck:
    """Run a reference once in the sandboxed reference child, as an evaluation would: it must parse, define
    get_inputs and forward, import, make its inputs (and NKI layout) and return numeric arrays, of the shapes it
    declares in OUTPUT_SHAPES when it declares them. A reference too big for `limits` (timeout, memory) or a
    sandbox that cannot start says nothing against the reference: no error, size unknown."""
    try:
        check_reference_source(reference_source)
    except StaticCheckError as exc:
        return ReferenceCheck(error=exc.message, line=exc.line)
    try:
        with ChildProcess("reference", {}, limits) as reference:
            loaded, _ = reference.request({"op": "load", "source": reference_source})
            if not loaded["ok"]:
                return ReferenceCheck(error=loaded.get("message", "the reference did not load"), line=loaded.get("line"))
            rendered, arrays = reference.request({"op": "render", "seed": _SEED, "distribution": "reference",
                                                  "index": 0})
    except Exception:  # noqa: BLE001 - timeout, memory, no sandbox: unknown size, evaluated with the large limits
        return ReferenceCheck()
    if not rendered["ok"]:
        return ReferenceCheck(error=rendered.get("message", "the reference failed"), line=rendered.get("line"))
    problem = _output_problem(rendered["expected"], loaded.get("output_shapes"))
    if problem:
        return ReferenceCheck(error=problem)
    inputs = sum(array.nbytes for name, array in arrays.items() if name.startswith("in"))
    outputs = sum(np.dtype(dtype).itemsize * math.prod(shape) for dtype, shape in rendered["expected"])
    return ReferenceCheck(io_bytes=int(inputs + outputs))


def _output_problem(expected: list[list], declared: list | None) -> str | None:
    """Why forward()'s outputs (dtype, shape each) cannot be what a kernel is compared with, or None."""
    for index, (dtype, shape) in enumerate(expected):
        if np.dtype(dtype).kind not in "biuf":
            return (f"forward() output {index} is not a numeric array (numpy dtype {np.dtype(dtype)}); it must return "
                    "a numpy array, or a tuple of them")
        if not shape or math.prod(shape) == 0:
            return f"forward() output {index} has shape {tuple(shape)}; an output must be an array with elements"
    if declared is not None:
        got = [tuple(shape) for _, shape in expected]
        want = [tuple(shape) for shape in declared]
        if got != want:
            return f"forward() returned shapes {got}; the reference declares OUTPUT_SHAPES = {want}"
    return None
