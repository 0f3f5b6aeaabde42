"""The correctness criteria, defined once: relative L2 at 2e-5, finite values, precision."""

from __future__ import annotations

import numpy as np
import pytest

from engine.evaluator import RELATIVE_L2_TOLERANCE
from engine.evaluator.checks import (
    CheckFailed,
    OutputComparison,
    non_finite_mismatch,
    reference_precision,
    relative_l2,
)
from engine.platforms.nki.frames import TraceDtypes, check_trace_precision


def test_the_tolerance_is_nkibenchs_fp32_value() -> None:
    assert RELATIVE_L2_TOLERANCE == 2e-5


def test_zeros_score_one_against_any_nonzero_reference() -> None:
    reference = np.random.default_rng(0).normal(size=(8, 8))
    assert relative_l2(np.zeros_like(reference), reference) == pytest.approx(1.0)


def test_an_all_zero_reference_accepts_only_zeros() -> None:
    zeros = np.zeros((4, 4))
    assert relative_l2(zeros, zeros) == 0.0
    assert relative_l2(zeros + 1e-20, zeros) > 1.0


def test_nan_where_the_reference_is_finite_is_reported_with_its_index() -> None:
    reference = np.ones((4, 4), dtype=np.float32)
    output = reference.copy()
    output[2, 3] = np.nan
    assert "first at index [2, 3]" in non_finite_mismatch(output, reference)
    assert relative_l2(output, reference) == float("inf")


def test_matching_non_finite_values_are_not_an_error() -> None:
    reference = np.array([1.0, np.inf, -np.inf], dtype=np.float32)
    assert non_finite_mismatch(reference.copy(), reference) is None
    assert relative_l2(reference.copy(), reference) == 0.0


def trace_with(dtype_names: list[str], rows: list[int]) -> TraceDtypes:
    n = len(rows)
    return TraceDtypes(engine=np.full(n, 1), dtype=np.array(rows), opcode=np.zeros(n, dtype=int),
                       line=np.arange(n) + 10, dtype_names=dtype_names, op_names=["tensor_tensor"])


def test_an_fp32_trace_passes_an_fp32_reference() -> None:
    check_trace_precision(trace_with(["float32", "int32"], [0, 1, 0]), reference_precision([np.zeros(2, np.float32)]))


def test_a_bf16_instruction_fails_an_fp32_reference_naming_its_line() -> None:
    with pytest.raises(CheckFailed) as caught:
        check_trace_precision(trace_with(["float32", "bfloat16"], [0, 0, 1]),
                              reference_precision([np.zeros(2, np.float32)]))
    assert caught.value.line == 12 and "bfloat16" in str(caught.value)


def test_a_bf16_reference_allows_bf16_instructions() -> None:
    check_trace_precision(trace_with(["bfloat16"], [0]), (7, "bfloat16"))


def test_comparing_a_slice_holds_one_float64_copy_besides_the_difference_and_gives_the_float64_error() -> None:
    # The parent compares every seed's outputs slice by slice (issue 38: part of an evaluation's cost): the output
    # is widened inside the subtraction, not copied, so a 2 Mi-element fp32 slice costs the parent about two
    # float64 arrays (the reference's and the difference), where widening both costs three and a quarter.
    import tracemalloc

    rng = np.random.default_rng(0)
    n = 1 << 21
    out = rng.normal(size=n).astype(np.float32)
    ref = (out + 1e-6 * rng.normal(size=n)).astype(np.float32)
    comparison = OutputComparison(ref.shape)
    tracemalloc.start()
    try:
        comparison.add(out, ref)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2.5 * 8 * n, f"{peak / (8 * n):.2f} float64 copies of the slice"
    wide_out, wide_ref = out.astype(np.float64), ref.astype(np.float64)
    exact = np.sqrt(np.dot(wide_out - wide_ref, wide_out - wide_ref)) / np.sqrt(np.dot(wide_ref, wide_ref))
    assert comparison.relative_l2() == exact
