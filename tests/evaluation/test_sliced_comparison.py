"""The parent compares outputs with expected values slice by slice; the verdict is the whole array's."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from engine.evaluator import ErrorKind, evaluate
from engine.evaluator import reference_pipeline as pipeline
from engine.evaluator.checks import OutputComparison, relative_l2
from tests.evaluation.conftest import ADD_REFERENCE, FAST_LIMITS


def compare_in_slices(output: np.ndarray, reference: np.ndarray, size: int) -> OutputComparison:
    comparison = OutputComparison(reference.shape)
    flat_out, flat_ref = output.reshape(-1), reference.reshape(-1)
    for start in range(0, flat_ref.size, size):
        comparison.add(flat_out[start:start + size], flat_ref[start:start + size])
    return comparison


def test_the_error_over_slices_is_the_error_over_the_whole_array() -> None:
    rng = np.random.default_rng(1)
    reference = rng.normal(size=(6, 7)).astype(np.float32)
    output = reference + rng.normal(scale=1e-3, size=reference.shape).astype(np.float32)
    reference[2, 3] = np.nan  # not counted, as in the whole-array error
    output[2, 3] = np.nan
    sliced = compare_in_slices(output, reference, 5)
    assert sliced.relative_l2() == pytest.approx(relative_l2(output, reference), rel=1e-12)
    assert sliced.non_finite_problem() is None


def test_a_nan_in_a_late_slice_is_reported_at_its_index_in_the_whole_array() -> None:
    reference = np.ones((4, 5), dtype=np.float32)
    output = reference.copy()
    output[3, 1] = np.nan
    problem = compare_in_slices(output, reference, 3).non_finite_problem()
    assert problem is not None and "1 of 20 elements" in problem and "[3, 1]" in problem


WRONG_LAST_ELEMENT_KERNEL = textwrap.dedent('''
    import numpy as np

    def kernel(a, b):
        out = a + b
        out[-1, -1] += 1000.0
        return out
''')


def test_an_evaluation_finds_an_error_past_the_first_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "COMPARE_SLICE_ELEMENTS", 4096)  # 128 x 512 outputs: 16 slices
    result = evaluate(WRONG_LAST_ELEMENT_KERNEL, ADD_REFERENCE, backend="null", limits=FAST_LIMITS)
    assert result.error_kind is ErrorKind.INCORRECT
    assert "output 0 differs from the reference" in result.error_message
    assert result.relative_l2_errors[0][0] > 1e-3
