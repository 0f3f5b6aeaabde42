"""Issue 35 for Triton: every field of a kernel child's reply is checked against what was asked
(engine/platforms/triton/replies.py). The kernel's module reaches its role through torch's own attributes, so a
reply is the kernel's to write: a failure kind that would make its failure ours, fields and arrays nobody asked
for, and timing numbers that are not its samples' are refused. Each test fails on the code before the checks."""

from __future__ import annotations

import statistics
import time

import pytest

from engine.evaluator.result import ErrorKind
from engine.evaluator.sandbox.process import ChildError
from engine.platforms.triton import catalog, pipeline
from engine.platforms.triton.flashinfer import (
    definition_to_dict,
    solution_from_kernel,
    solution_to_dict,
    workload_to_dict,
)
from engine.platforms.triton.pipeline import evaluate_triton
from tests.triton import kernels

_PATCHES_ITS_RUN = kernels.CORRECT + '''
roles = torch.sys.modules["engine.platforms.triton.roles"]
honest_run = roles.TritonKernelRole.run


def forged(self, header, arrays):
    reply, data = honest_run(self, header, arrays)
    {edit}
    return reply, data


roles.TritonKernelRole.run = forged
'''


def _evaluate(source: str):
    definition = catalog.definition("rmsnorm_h128")
    solution = solution_from_kernel(source, name="t", definition=definition.name, author="test")
    return evaluate_triton(solution_to_dict(solution), definition_to_dict(definition),
                           workload_to_dict(catalog.workload("rmsnorm_h128_b7")))


def test_a_kernel_that_reports_its_failure_as_a_broken_reference_gets_its_runtime_error_once():
    """`reference_error` is ours (retried, never a verdict); only the reference child may say it."""
    result = _evaluate(_PATCHES_ITS_RUN.format(
        edit='reply, data = {"ok": False, "kind": "reference_error", "message": "the reference is broken"}, {}'))
    assert result.error_kind is ErrorKind.RUNTIME_ERROR and result.attempts == 1, (result.error_kind,
                                                                                 result.error_message)
    assert "reference_error" in result.error_message and result.is_kernel_result


def test_an_array_the_parent_did_not_ask_for_is_refused_before_it_is_read():
    result = _evaluate(_PATCHES_ITS_RUN.format(
        edit='data["padding"] = torch.sys.modules["numpy"].zeros(1024, dtype="uint8")'))
    assert not result.correct and result.error_kind is ErrorKind.RUNTIME_ERROR, result.error_message
    assert "padding" in result.error_message and result.attempts == 1


def test_a_field_the_parent_did_not_ask_for_is_refused():
    result = _evaluate(_PATCHES_ITS_RUN.format(edit='reply["latency_ms"] = 0.001'))
    assert not result.correct and result.error_kind is ErrorKind.RUNTIME_ERROR, result.error_message
    assert "latency_ms" in result.error_message


def test_an_output_the_definition_does_not_declare_is_refused_before_it_is_read():
    """rmsnorm has one output: a second one, listed with its dtype, is an array nobody asked for (it used to be
    read, then judged `incorrect` by the reference)."""
    result = _evaluate(_PATCHES_ITS_RUN.format(
        edit='reply["dtypes"].append(reply["dtypes"][0]); data["out1"] = data["out0"]'))
    assert not result.correct and result.error_kind is ErrorKind.RUNTIME_ERROR, result.error_message
    assert "at most 1 dtype names" in result.error_message and result.attempts == 1


def test_an_output_larger_than_the_definition_declares_is_refused_before_it_is_read():
    """The reply's budget is the declared outputs' bytes: an output four times its declared size (within the old
    budget of eight times) is refused, not read."""
    result = _evaluate(_PATCHES_ITS_RUN.format(
        edit='data["out0"] = torch.sys.modules["numpy"].concatenate([data["out0"]] * 4)'))
    assert not result.correct and result.error_kind is ErrorKind.RUNTIME_ERROR, result.error_message
    assert "array 'out0' of" in result.error_message and "the definition declares" in result.error_message


# -- the cuda backend's timing, through pipeline._measure and a child that replies what it is given ------------


class _Child:
    """Stands for the kernel child: replies `reply`, refused as ChildProcess.receive refuses it."""

    def __init__(self, reply: dict) -> None:
        self.reply = reply

    def restart_clock(self) -> None:
        pass

    def request(self, request: dict, arrays=None, max_reply_bytes=None, check=None):
        time.sleep(min(float(self.reply.get("child_wall_s", 0)), 0.05) + 0.005)  # as long as it says, within reason
        problem = check(self.reply, []) if check is not None else None
        if problem:
            raise ChildError("infrastructure_error", f"the kernel's reply is malformed: {problem}", started=True)
        return self.reply, {}


def _measured(samples: list[float], **stated) -> dict:
    timing = {"median_ms": statistics.median(samples), "spread": 0.0, "reps": len(samples), "stable": True,
              "wall_s": sum(samples) / 1e3 * 1.05, "flush_ms": 0.01, "min_ms": min(samples), "max_ms": max(samples)}
    timing.update(stated)
    return {"ok": True, "timing": timing, "samples_ms": samples, "child_wall_s": timing["wall_s"],
            "environment": {"gpu": "NVIDIA H200", "sm_count": 132}}


def _measure(reply: dict):
    definition = catalog.definition("rmsnorm_h128")
    context = {"backend": "cuda", "backend_version": "triton-cuda-1", "platform": "h200", "project_version": "0",
               "kernel_name": "t", "seeds": (1, 2, 3)}
    correct = {"compiled": True, "runnable": True, "correct": True, "relative_l2_errors": ((0.0,),)}
    try:
        return pipeline._measure(_Child(reply), context, correct, {"flops": 0.0, "bytes": 0.0},
                                 {"definition": definition_to_dict(definition)})
    except pipeline._Stop as stop:
        return stop.result


def test_the_honest_timing_is_priced_at_its_samples_median():
    result = _measure(_measured([1.0] * 20))
    assert result.correct and result.latency_ms == pytest.approx(1.0), result.error_message


def test_a_median_lower_than_the_samples_is_refused_not_priced():
    """On the cuda backend a refused reply is retried (bounded) and stores no latency; the correctness it was
    asked after stands (a retry never changes a verdict)."""
    result = _measure(_measured([1.0] * 20, median_ms=0.5))
    assert result.latency_ms is None and result.status == "failed", result.latency_ms
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and "median_ms" in result.error_message


def test_a_host_time_longer_than_the_parent_saw_the_request_take_is_held_for_review():
    reply = _measured([1.0] * 20)
    reply["child_wall_s"] = 3600.0
    result = _measure(reply)
    assert result.error_kind is ErrorKind.SUSPICIOUS and "held for review" in result.error_message
    assert "child_wall_s" in result.error_message


def test_environment_fields_the_child_does_not_report_are_refused():
    reply = _measured([1.0] * 20)
    reply["environment"]["verified_by"] = "the kernel"
    result = _measure(reply)
    assert result.latency_ms is None and "environment" in result.error_message
