"""The correctness criteria, defined once: relative L2 at 2e-5, finite values, precision."""

from __future__ import annotations

import numpy as np
import pytest

from engine.evaluator import RELATIVE_L2_TOLERANCE
from engine.evaluator.checks import (
    CheckFailed,
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
