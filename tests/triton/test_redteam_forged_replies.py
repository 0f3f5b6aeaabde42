"""Red-team checks of what the kernel child's replies may claim, through the real sandboxed interpreter path
(evaluate_triton, every guard on). A Triton kernel's module reaches the kernel role through torch's own
attributes (torch.sys.modules), so the role's reply is the kernel's to write: the trusted reference child
must judge every output the definition has, whatever the reply lists."""

from __future__ import annotations

from engine.evaluator.result import ErrorKind
from engine.platforms.triton import catalog
from engine.platforms.triton.flashinfer import (
    definition_to_dict,
    solution_from_kernel,
    solution_to_dict,
    workload_to_dict,
)
from engine.platforms.triton.pipeline import evaluate_triton
from tests.triton import kernels

_FORGED_REPLY = kernels.HEADER + '''
roles = torch.sys.modules["engine.platforms.triton.roles"]
real_run = roles.TritonKernelRole.run


def forged(self, header, arrays):
    reply, data = real_run(self, header, arrays)
    return {{"ok": True, "dtypes": {dtypes}}}, {{k: v for k, v in data.items() if k in {keep}}}


roles.TritonKernelRole.run = forged


def run(hidden_states, weight):
    return torch.zeros_like(hidden_states)
'''


def _evaluate(source: str):
    definition = catalog.definition("rmsnorm_h128")
    solution = solution_from_kernel(source, name="t", definition=definition.name, author="test")
    return evaluate_triton(solution_to_dict(solution), definition_to_dict(definition),
                           workload_to_dict(catalog.workload("rmsnorm_h128_b7")))


def test_a_kernel_whose_reply_lists_no_outputs_is_incorrect_not_correct():
    result = _evaluate(_FORGED_REPLY.format(dtypes="[]", keep="()"))
    assert not result.correct and result.error_kind is ErrorKind.INCORRECT, (result.status, result.error_message)
    assert "output" in result.error_message and result.attempts == 1


def test_a_kernel_whose_reply_names_no_dtype_is_incorrect_not_a_broken_reference():
    result = _evaluate(_FORGED_REPLY.format(dtypes='["no_such_dtype"]', keep='("out0",)'))
    assert result.error_kind is ErrorKind.INCORRECT, (result.error_kind, result.error_message)
    assert "no_such_dtype" in result.error_message and result.attempts == 1


_HUGE_REPLY = kernels.HEADER + '''
import numpy

roles = torch.sys.modules["engine.platforms.triton.roles"]
roles.TritonKernelRole.run = lambda self, header, arrays: (
    {"ok": True, "dtypes": ["bfloat16"]}, {"out0": numpy.zeros(16 * 1024 * 1024, dtype=numpy.int16)})


def run(hidden_states, weight):
    return torch.zeros_like(hidden_states)
'''


def test_a_kernel_reply_far_larger_than_the_outputs_is_refused_before_the_parent_reads_it():
    # The parent would otherwise read up to max_message_bytes (2 GiB) from every kernel child.
    result = _evaluate(_HUGE_REPLY)
    assert result.error_kind is ErrorKind.RESOURCE_LIMIT, (result.error_kind, result.error_message)
    assert "too large" in result.error_message


_HUGE_COMPILE_REPLY = kernels.HEADER + '''
import numpy

roles = torch.sys.modules["engine.platforms.triton.roles"]
roles.TritonKernelRole.compile = lambda self, header, arrays: ({"ok": True}, {"x": numpy.zeros(80 * 1024**2, numpy.uint8)})


def run(hidden_states, weight):
    return torch.zeros_like(hidden_states)
'''


def test_any_other_kernel_reply_is_refused_past_64_mib():
    from engine.platforms.triton.pipeline import compile_triton

    definition = catalog.definition("rmsnorm_h128")
    solution = solution_from_kernel(_HUGE_COMPILE_REPLY, name="t", definition=definition.name, author="test")
    result = compile_triton(solution_to_dict(solution), definition_to_dict(definition),
                            workload_to_dict(catalog.workload("rmsnorm_h128_b7")))
    assert result.error_kind is ErrorKind.RESOURCE_LIMIT, (result.error_kind, result.error_message)
    assert "too large" in result.error_message


def test_a_forged_compile_reply_missing_its_fields_is_refused_as_the_kernels_runtime_error():
    from engine.platforms.triton.pipeline import compile_triton

    source = _HUGE_COMPILE_REPLY.replace('{"x": numpy.zeros(80 * 1024**2, numpy.uint8)}', "{}")
    definition = catalog.definition("rmsnorm_h128")
    solution = solution_from_kernel(source, name="t", definition=definition.name, author="test")
    result = compile_triton(solution_to_dict(solution), definition_to_dict(definition),
                            workload_to_dict(catalog.workload("rmsnorm_h128_b7")))
    # A reply is read only if it answers what was asked (engine/platforms/triton/replies.py, issue 35): one
    # without its target and kernels is the kernel's doing, reported once, not a result with holes.
    assert result.error_kind is ErrorKind.RUNTIME_ERROR and not result.compiled, result.error_message
    assert "missing" in result.error_message and "target" in result.error_message and result.attempts == 1


_ENDS_ITS_PROCESS = kernels.HEADER + '''

def run(hidden_states, weight):
    torch.sys.modules["os"]._exit(3)
'''


def test_a_kernel_that_ends_its_own_process_is_its_runtime_error_and_buys_no_retry():
    result = _evaluate(_ENDS_ITS_PROCESS)
    assert result.error_kind is ErrorKind.RUNTIME_ERROR, (result.error_kind, result.error_message)
    assert "ended its evaluation process (exit status 3)" in result.error_message
    assert result.attempts == 1
