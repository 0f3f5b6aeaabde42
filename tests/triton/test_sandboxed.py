"""The Triton kernels' path through the evaluation sandbox (two isolated children, the shared failure taxonomy),
on the CPU interpreter backend."""

from __future__ import annotations

from engine.evaluator.result import ErrorKind
from engine.platforms.triton import catalog
from engine.platforms.triton.flashinfer import (
    definition_to_dict,
    solution_from_kernel,
    solution_to_dict,
    workload_to_dict,
)
from engine.platforms.triton.pipeline import CORRECTNESS_ONLY, evaluate_triton
from tests.triton import kernels


def _evaluate(source: str):
    definition = catalog.definition("rmsnorm_h128")
    solution = solution_from_kernel(source, name="t", definition=definition.name, author="test")
    return evaluate_triton(solution_to_dict(solution), definition_to_dict(definition),
                           workload_to_dict(catalog.workload("rmsnorm_h128_b7")), platform="h200", seeds=(4, 5, 6))


def test_a_correct_kernel_passes_the_sandbox_with_no_latency_and_its_provenance():
    result = _evaluate(kernels.CORRECT)
    assert result.ok and result.correct, result.error_message
    assert result.latency_ms is None and result.profile == {"note": CORRECTNESS_ONLY}
    assert (result.backend, result.backend_version, result.platform) == ("triton-interpreter", "triton-interpreter-2", "h200")
    assert result.seeds == (4, 5, 6) and len(result.relative_l2_errors) == 3


def test_in_the_sandbox_a_kernel_modifying_its_inputs_and_one_importing_os_fail_with_their_kinds():
    modified = _evaluate(kernels.MODIFIES_INPUT)
    assert modified.error_kind is ErrorKind.MODIFIED_INPUT and "'hidden_states'" in modified.error_message
    escaping = _evaluate("import os\n" + kernels.CORRECT)
    assert escaping.error_kind is ErrorKind.REJECTED and "import of 'os' is not allowed" in escaping.error_message
