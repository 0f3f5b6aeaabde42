"""Correctness checks the parent runs on what the children sent back (never inside the kernel's process).

Every number a kernel is judged by is defined here once: the tolerance, the relative error, what counts as
lower precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# NKIBench's fp32 criterion: relative L2 error ||out - ref|| / ||ref|| <= 2e-5.
RELATIVE_L2_TOLERANCE = 2e-5
# Denominator floor, so an all-zero reference cannot divide by zero. With ||ref|| as the denominator a
# near-zero output scores about 1.0, never under the tolerance.
_TINY_NORM = 1e-30

# Significand bits of the float types a trace or an output may carry; names as numpy/NKI spell them.
_SIGNIFICAND_BITS = {
    "float64": 52, "fp64": 52, "double": 52,
    "float32": 23, "fp32": 23, "single": 23,
    "tfloat32": 10, "tf32": 10, "float16": 10, "fp16": 10, "half": 10,
    "bfloat16": 7, "bf16": 7,
    "float8_e4m3": 3, "float8_e4m3fn": 3, "fp8_e4m3": 3, "float8e4": 3,
    "float8_e5m2": 2, "fp8_e5m2": 2, "float8e5": 2, "fp8": 2,
}


class CheckFailed(Exception):
    """The kernel's result is wrong; the message says how (and `line` where, when a trace row knows)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def float_significand_bits(dtype_name: str) -> int | None:
    """Precision of a float dtype name (None for integers, bools and unknown names)."""
    name = str(dtype_name).lower().replace("np.", "").replace("nl.", "")
    name = name.rsplit(".", 1)[-1].strip("<>' ").removeprefix("class ")
    return _SIGNIFICAND_BITS.get(name)


def reference_precision(expected: Sequence[np.ndarray]) -> tuple[int, str] | None:
    """The least precise float dtype among the reference's outputs: the precision a kernel must keep."""
    floats = [(float_significand_bits(a.dtype.name), a.dtype.name) for a in expected]
    floats = [(bits, name) for bits, name in floats if bits is not None]
    return min(floats) if floats else None


def relative_l2(output: np.ndarray, reference: np.ndarray) -> float:
    """||out - ref|| / max(||ref||, tiny) over the elements where the reference is finite."""
    out = np.asarray(output, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    finite = np.isfinite(ref)
    if not finite.all():
        out, ref = out[finite], ref[finite]
    if not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref) / max(float(np.linalg.norm(ref)), _TINY_NORM))


def check_inputs_unchanged(sent: Sequence[np.ndarray], after: Sequence[np.ndarray]) -> None:
    if len(after) != len(sent):
        raise CheckFailed(f"kernel child returned {len(after)} inputs after the run, {len(sent)} were sent")
    for index, (before, now) in enumerate(zip(sent, after, strict=True)):
        if before.shape != now.shape or before.dtype != now.dtype:
            raise CheckFailed(f"kernel modified its input {index}: it was {before.dtype}{list(before.shape)} "
                              f"and is now {now.dtype}{list(now.shape)}")
        if not np.array_equal(before, now, equal_nan=True):
            changed = int(np.count_nonzero(~((before == now) | (np.isnan(before) & np.isnan(now)))
                                           if before.dtype.kind in "fc" else before != now))
            raise CheckFailed(f"kernel modified its input {index} (shape {list(before.shape)}): {changed} of "
                              f"{before.size} elements changed; inputs must be read-only")


def check_output_layout(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> None:
    shapes = [list(a.shape) for a in outputs]
    wanted = [list(a.shape) for a in expected]
    if len(outputs) != len(expected):
        raise CheckFailed(f"kernel returned {len(outputs)} output(s) with shapes {shapes}; the reference "
                          f"expects {len(expected)} with shapes {wanted}")
    if shapes != wanted:
        raise CheckFailed(f"kernel returned outputs of shapes {shapes}; the reference expects {wanted}")


def check_output_precision(outputs: Sequence[np.ndarray], expected: Sequence[np.ndarray]) -> None:
    for index, (out, ref) in enumerate(zip(outputs, expected, strict=True)):
        out_bits, ref_bits = float_significand_bits(out.dtype.name), float_significand_bits(ref.dtype.name)
        if ref_bits is not None and (out_bits is None or out_bits < ref_bits):
            raise CheckFailed(f"output {index} is {out.dtype.name}; the reference computes {ref.dtype.name}, "
                              "and a kernel may not return lower precision")


def non_finite_mismatch(output: np.ndarray, reference: np.ndarray) -> str | None:
    """Describe NaN/Inf in the output where the reference is finite (NaN is what unwritten elements hold)."""
    out = np.asarray(output)
    ref = np.asarray(reference)
    if out.dtype.kind not in "fc":
        return None
    bad = ~np.isfinite(out) & np.isfinite(ref)
    count = int(np.count_nonzero(bad))
    if not count:
        ref_bad = ~np.isfinite(ref)
        if ref_bad.any() and not np.array_equal(out[ref_bad], ref[ref_bad], equal_nan=True):
            return "its NaN/Inf values differ from the reference's where the reference is not finite"
        return None
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{count} of {out.size} elements are NaN or Inf where the reference is finite (first at index "
            f"{list(first)}); unwritten output elements read as NaN")


@dataclass(frozen=True)
class TraceDtypes:
    """The columns of a trace the precision check needs (sent by the kernel child as plain arrays)."""

    engine: np.ndarray
    dtype: np.ndarray
    opcode: np.ndarray
    line: np.ndarray
    dtype_names: list[str]
    op_names: list[str]


_ENGINE_NAMES = {"TENSOR": "Tensor", "VECTOR": "Vector", "SCALAR": "Scalar", "GPSIMD": "GpSimd", "DMA": "DMA"}


def check_trace_precision(trace: TraceDtypes, floor: tuple[int, str] | None) -> None:
    """No instruction may compute in a float type narrower than the reference's outputs."""
    if floor is None or not len(trace.dtype):
        return
    floor_bits, floor_name = floor
    narrow = [i for i, name in enumerate(trace.dtype_names)
              if (bits := float_significand_bits(name)) is not None and bits < floor_bits]
    if not narrow:
        return
    rows = np.flatnonzero(np.isin(trace.dtype, narrow))
    if not len(rows):
        return
    row = int(rows[0])
    op = trace.op_names[int(trace.opcode[row])] if int(trace.opcode[row]) < len(trace.op_names) else "?"
    from benchmark.nki.trace import Engine

    code = int(trace.engine[row])
    engine = _ENGINE_NAMES[Engine(code).name] if code in Engine._value2member_map_ else str(code)
    line = int(trace.line[row])
    where = f" at line {line}" if line > 0 else ""
    raise CheckFailed(f"{len(rows)} instruction(s) compute in lower precision than the reference ({floor_name}): "
                      f"first {op} on the {engine} engine in {trace.dtype_names[int(trace.dtype[row])]}{where}",
                      line=line if line > 0 else None)
