"""Correctness checks the parent runs on what the children sent back (never inside the kernel's process).

Every number a kernel is judged by is defined here once: the tolerance, the relative error, what counts as
lower precision.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    comparison = OutputComparison(np.shape(reference))
    comparison.add(output, reference)
    return comparison.relative_l2()


class OutputComparison:
    """One output compared with its reference slice by slice (flat C order), so neither needs a float64
    copy of the whole array: the relative L2 error, NaN/Inf where the reference is finite, all-zero."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = tuple(shape)
        self.offset = 0
        self.diff_squares = 0.0
        self.ref_squares = 0.0
        self.output_non_finite = False  # where the reference is finite
        self.bad_count = 0
        self.first_bad: int | None = None
        self.special_mismatch = False  # NaN/Inf of the reference not matched by the output
        self.float_output = True
        self.reference_all_zero = True

    def add(self, output: np.ndarray, reference: np.ndarray) -> None:
        # Finiteness is read on the arrays as sent (a cast to float64 keeps it); only the reference is copied
        # to float64, and the output is widened inside the subtraction: the same numbers as widening both,
        # with one float64 copy of a slice instead of two (the parent's share of an evaluation, issue 38).
        out_raw, ref_raw = np.ravel(output), np.ravel(reference)
        self.float_output = out_raw.dtype.kind in "fc"
        ref = ref_raw.astype(np.float64, copy=False)
        if self.reference_all_zero and np.any(ref_raw):
            self.reference_all_zero = False
        finite = np.isfinite(ref_raw)
        all_finite = bool(finite.all())
        if not all_finite:
            out_f, ref_f = out_raw[finite], ref[finite]
            ref_bad = ~finite
            if self.float_output and not np.array_equal(out_raw[ref_bad], ref_raw[ref_bad], equal_nan=True):
                self.special_mismatch = True
        else:
            out_f, ref_f = out_raw, ref
        if out_f.dtype.kind in "fc" and not np.isfinite(out_f).all():
            self.output_non_finite = True
            if self.float_output:
                bad = ~np.isfinite(out_raw) & finite
                self.bad_count += int(np.count_nonzero(bad))
                if self.first_bad is None:
                    self.first_bad = self.offset + int(np.flatnonzero(bad)[0])
        if not self.output_non_finite:
            if out_f.dtype.kind == "c":  # as a float64 cast reads it (the real part)
                out_f = out_f.real
            diff = np.subtract(out_f, ref_f, dtype=np.float64)
            self.diff_squares += float(np.dot(diff, diff))
            del diff
        self.ref_squares += float(np.dot(ref_f, ref_f))
        self.offset += out_raw.size

    def relative_l2(self) -> float:
        if self.output_non_finite:
            return float("inf")
        return float(np.sqrt(self.diff_squares) / max(float(np.sqrt(self.ref_squares)), _TINY_NORM))

    def non_finite_problem(self) -> str | None:
        """NaN/Inf in the output where the reference is finite (NaN is what unwritten elements hold)."""
        if not self.float_output:
            return None
        if self.bad_count:
            first = [int(i) for i in np.unravel_index(self.first_bad, self.shape)] if self.shape else []
            return (f"{self.bad_count} of {self.offset} elements are NaN or Inf where the reference is finite "
                    f"(first at index {first}); unwritten output elements read as NaN")
        if self.special_mismatch:
            return "its NaN/Inf values differ from the reference's where the reference is not finite"
        return None


def check_inputs_unchanged(sent: Sequence[np.ndarray], after: Sequence[np.ndarray]) -> None:
    if len(after) != len(sent):
        raise CheckFailed(f"kernel child returned {len(after)} inputs after the run, {len(sent)} were sent")
    for index, (before, now) in enumerate(zip(sent, after, strict=True)):
        if before.shape != now.shape or before.dtype != now.dtype:
            raise CheckFailed(f"kernel modified its input {index}: it was {before.dtype}{list(before.shape)} "
                              f"and is now {now.dtype}{list(now.shape)}")
        if not _equal_in_slices(before, now):
            changed = int(np.count_nonzero(~((before == now) | (np.isnan(before) & np.isnan(now)))
                                           if before.dtype.kind in "fc" else before != now))
            raise CheckFailed(f"kernel modified its input {index} (shape {list(before.shape)}): {changed} of "
                              f"{before.size} elements changed; inputs must be read-only")


_EQUAL_SLICE_ELEMENTS = 1 << 20


def _equal_in_slices(before: np.ndarray, now: np.ndarray) -> bool:
    """array_equal(equal_nan) a slice at a time: on a whole array it makes masked copies of both."""
    flat_before, flat_now = before.reshape(-1), now.reshape(-1)
    equal_nan = before.dtype.kind in "fc"
    return all(np.array_equal(flat_before[start:start + _EQUAL_SLICE_ELEMENTS],
                              flat_now[start:start + _EQUAL_SLICE_ELEMENTS], equal_nan=equal_nan)
               for start in range(0, flat_before.size, _EQUAL_SLICE_ELEMENTS))


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
    comparison = OutputComparison(np.shape(reference))
    comparison.add(output, reference)
    return comparison.non_finite_problem()


