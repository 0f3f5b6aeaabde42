"""Each way a Triton kernel can fail comes out as its own status, on the CPU interpreter (small workloads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.platforms.triton import catalog
from engine.platforms.triton.flashinfer import solution_from_kernel
from engine.platforms.triton.local import evaluate_case
from tests.triton import kernels


def _evaluate(source: str, tmp_path: Path, seeds: tuple[int, ...] = (0, 1)):
    definition = catalog.definition("rmsnorm_h128")
    workload = catalog.workload("rmsnorm_h128_b7")
    solution = solution_from_kernel(source, name="t", definition=definition.name, author="test")
    return evaluate_case(definition, workload, solution, workdir=tmp_path, seeds=seeds)


def test_a_correct_kernel_is_correct_and_reports_no_latency_without_a_gpu(tmp_path):
    result = _evaluate(kernels.CORRECT, tmp_path)
    assert result.status == "correct", result.message
    assert result.latency_ms is None and result.message == "correctness only: no GPU"
    assert result.max_abs_error is not None and result.max_abs_error < 0.1  # bf16 rounding: one ulp


def test_a_wrong_result_is_incorrect_with_the_tolerance_in_the_message(tmp_path):
    result = _evaluate(kernels.WRONG, tmp_path)
    assert result.status == "incorrect"
    assert "outside atol=0.01, rtol=0.01" in result.message and "seed 0" in result.message


def test_an_unmasked_load_past_the_end_is_out_of_bounds(tmp_path):
    result = _evaluate(kernels.OUT_OF_BOUNDS_READ, tmp_path, seeds=(0,))
    assert result.status == "out_of_bounds"
    assert "outside the input buffers" in result.message


def test_an_unmasked_store_past_the_end_is_out_of_bounds(tmp_path):
    result = _evaluate(kernels.OUT_OF_BOUNDS_WRITE, tmp_path, seeds=(0,))
    assert result.status == "out_of_bounds"
    assert "wrote outside the buffer of output output" in result.message


def test_a_kernel_that_never_writes_its_output_is_incorrect(tmp_path):
    result = _evaluate(kernels.NEVER_WRITES, tmp_path, seeds=(0,))
    assert result.status == "incorrect"
    assert "never written stays NaN" in result.message


def test_a_kernel_that_modifies_its_inputs_has_its_own_failure_kind(tmp_path):
    result = _evaluate(kernels.MODIFIES_INPUT, tmp_path, seeds=(0,))
    assert result.status == "modified_input"
    assert "'hidden_states'" in result.message


def test_a_kernel_that_raises_is_a_runtime_error_and_a_syntax_error_a_compile_error(tmp_path):
    assert _evaluate(kernels.RAISES, tmp_path / "a", seeds=(0,)).status == "runtime_error"
    broken = _evaluate(kernels.CORRECT.replace("def run(", "def run(:"), tmp_path / "b", seeds=(0,))
    assert broken.status == "compile_error" and "SyntaxError" in broken.message


@pytest.mark.parametrize("name", catalog.SMALL_WORKLOADS)
def test_our_sample_solutions_are_correct_on_the_small_workloads(name, tmp_path):
    workload = catalog.workload(name)
    definition = catalog.definition(workload.definition)
    result = evaluate_case(definition, workload, catalog.solution(definition.name), workdir=tmp_path, seeds=(3,))
    assert result.status == "correct", result.message


def test_a_kernel_that_caches_its_answer_across_calls_fails_on_the_next_seed(tmp_path):
    result = _evaluate(kernels.CACHES_ANSWERS, tmp_path, seeds=(0, 1))
    assert result.status == "incorrect" and result.message.startswith("seed 1:")
