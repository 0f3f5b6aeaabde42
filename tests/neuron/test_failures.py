"""SDK and device failures on the neuron backend, mapped onto the failure taxonomy (docs/evaluation.md, 5).

The device double fails as its kernel tells it (NEURON_DOUBLE), with the Neuron Runtime status names the
runtime's errors carry; the tests check the kind, the line, whether it was retried and where.
"""

from __future__ import annotations

import os

import pytest

from engine.evaluator import ErrorKind, Limits, evaluate
from engine.platforms.nki.neuron import cores
from engine.platforms.nki.neuron.failures import classify_failure
from tests.evaluation.conftest import ADD_REFERENCE
from tests.neuron.conftest import LIMITS, add_kernel, line_of


def _kinds(calls):
    return [c["call"] for c in calls]


def test_a_kernel_that_breaks_an_nki_rule_is_a_compile_error_at_its_line(neuron_host) -> None:
    broken = "big = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.sbuf)"
    kernel = add_kernel(body=broken + "\n            nl.store(out, value=nl.add(nl.load(a), nl.load(b)))")
    result = evaluate(kernel, ADD_REFERENCE, backend="neuron", limits=LIMITS)
    assert result.error_kind is ErrorKind.COMPILE_ERROR and not result.compiled
    assert result.error_message.startswith("NeuronCompileError: the kernel did not compile: NKICompileError")
    assert "partition dimension 256" in result.error_message
    assert result.error_line == line_of(kernel, broken)
    assert result.attempts == 1
    # It failed while compiling the first seed: no NEFF, no timing, no profile.
    assert _kinds(neuron_host.calls()) == ["baremetal"]
    assert not (neuron_host.attempts()[0] / "kernel.neff").exists()


@pytest.mark.parametrize(("status", "kind"), [
    ("NRT_EXEC_OOB", ErrorKind.RUNTIME_ERROR),
    ("NRT_EXEC_COMPLETED_WITH_NUM_ERR", ErrorKind.RUNTIME_ERROR),
    ("NRT_TIMEOUT", ErrorKind.TIMEOUT),
])
def test_a_failure_on_the_device_is_the_kernels_and_not_retried(neuron_host, status, kind) -> None:
    result = evaluate(add_kernel({"fail": {"at": "run", "status": status}}), ADD_REFERENCE, backend="neuron",
                      limits=LIMITS)
    assert result.error_kind is kind and result.is_kernel_result
    assert status in result.error_message
    assert result.compiled and not result.runnable and result.attempts == 1
    assert (neuron_host.attempts()[0] / "kernel.neff").exists()  # it compiled; the device refused it


def test_a_device_that_hangs_is_a_timeout_at_the_wall_clock(neuron_host) -> None:
    limits = Limits(wall_seconds=12, cpu_seconds=12, memory_bytes=2 * 1024**3)
    result = evaluate(add_kernel({"fail": {"at": "run", "hang": True}}), ADD_REFERENCE, backend="neuron",
                      limits=limits)
    assert result.error_kind is ErrorKind.TIMEOUT
    assert "did not finish within the wall-clock limit" in result.error_message
    assert result.attempts == 1


def test_a_failure_while_timing_is_mapped_the_same_way(neuron_host) -> None:
    result = evaluate(add_kernel({"fail": {"at": "measure", "status": "NRT_TIMEOUT"}}), ADD_REFERENCE,
                      backend="neuron", limits=LIMITS)
    assert result.error_kind is ErrorKind.TIMEOUT and result.correct  # correct on every seed, then it hung
    assert result.latency_ms is None


def test_a_lost_device_is_ours_and_retried_on_another_core(neuron_host) -> None:
    # NeuronCore 0 reports an uncorrectable hardware error; core 1 is healthy.
    kernel = add_kernel({"fail": {"at": "run", "status": "NRT_EXEC_HW_ERR_NC_UE", "on_cores": ["0"]}})
    result = evaluate(kernel, ADD_REFERENCE, backend="neuron", limits=LIMITS)
    assert result.ok and result.correct, result.error_message
    assert result.attempts == 2
    first, second = neuron_host.attempts()
    assert {c["NEURON_RT_VISIBLE_CORES"] for c in neuron_host.calls(first)} == {"0"}
    assert {c["NEURON_RT_VISIBLE_CORES"] for c in neuron_host.calls(second) if "NEURON_RT_VISIBLE_CORES" in c} == {"1"}
    assert cores.quarantined(str(neuron_host.locks), 0) and not cores.quarantined(str(neuron_host.locks), 1)


def test_a_device_lost_on_every_core_is_reported_as_ours(neuron_host) -> None:
    kernel = add_kernel({"fail": {"at": "run", "status": "NRT_EXEC_HW_ERR_HBM_UE"}})
    result = evaluate(kernel, ADD_REFERENCE, backend="neuron",
                      limits=Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=2 * 1024**3, infrastructure_retries=1))
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and not result.is_kernel_result
    assert "the NeuronCore became unusable" in result.error_message and "NRT_EXEC_HW_ERR_HBM_UE" in result.error_message
    assert result.attempts == 2 and not result.correct and result.latency_ms is None


def test_a_missing_neuron_profile_stops_before_the_device_is_used(neuron_host, monkeypatch) -> None:
    monkeypatch.setenv("ACCELOPT_NEURON_PROFILE", str(neuron_host.base / "no-such-neuron-profile"))
    result = evaluate(add_kernel(), ADD_REFERENCE, backend="neuron", limits=LIMITS)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and result.attempts == 1
    assert "neuron-profile not found at" in result.error_message and "aws-neuronx-tools" in result.error_message
    assert neuron_host.attempts() == []  # no core leased, nothing compiled


def test_a_neuron_profile_that_fails_is_ours_and_retried_on_the_same_terms(neuron_host, monkeypatch) -> None:
    profiler = neuron_host.base / "neuron-profile"
    profiler.write_text("#!/bin/sh\necho 'cannot read the trace' >&2\nexit 3\n")
    os.chmod(profiler, 0o755)
    monkeypatch.setenv("ACCELOPT_NEURON_PROFILE", str(profiler))
    limits = Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=2 * 1024**3, infrastructure_retries=1)
    result = evaluate(add_kernel(), ADD_REFERENCE, backend="neuron", limits=limits)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and not result.is_kernel_result
    assert result.error_message == ("the profiler failed: neuron-profile exited with status 3: cannot read the "
                                    "trace")
    assert result.correct and result.attempts == 2
    # Not the NeuronCore's fault: it is not set aside.
    assert not cores.quarantined(str(neuron_host.locks), 0)


def test_the_sdk_refused_by_the_sandbox_is_ours_not_the_kernels(neuron_host) -> None:
    # The SDK (not the kernel) starts a program outside ACCELOPT_NEURON_EXECUTABLES: a setup to fix, not a
    # kernel to reject.
    result = evaluate(add_kernel({"start": "sh"}), ADD_REFERENCE, backend="neuron", limits=LIMITS)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and result.attempts == 1
    assert result.error_message.startswith("the evaluation sandbox refused the Neuron SDK itself")
    assert "subprocess.Popen is not allowed" in result.error_message


def test_no_neuron_device_is_ours_and_not_retried(neuron_host) -> None:
    (neuron_host.dev / "neuron0").unlink()
    result = evaluate(add_kernel(), ADD_REFERENCE, backend="neuron", limits=LIMITS)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and result.attempts == 1
    assert result.error_message.startswith("neuron backend not available on this host: no Neuron device")


@pytest.mark.parametrize(("message", "neff", "kind"), [
    ("NKICompileError: partition dimension 256 exceeds 128", False, ErrorKind.COMPILE_ERROR),
    ("RuntimeError: [NCC_EBVF030] too many instructions", False, ErrorKind.COMPILE_ERROR),
    ("RuntimeError: execution failed", True, ErrorKind.RUNTIME_ERROR),
    ("RuntimeError: nrt_execute status 1006 (NRT_EXEC_OOB)", False, ErrorKind.RUNTIME_ERROR),
    ("RuntimeError: NRT_INVALID: input tensor size mismatch", True, ErrorKind.RUNTIME_ERROR),
    ("RuntimeError: nrt_execute: NRT_TIMEOUT", True, ErrorKind.TIMEOUT),
    ("RuntimeError: NRT_HW_ERROR", True, ErrorKind.INFRASTRUCTURE_ERROR),
    ("RuntimeError: NRT_EXEC_HW_ERR_DMA_ABORT", True, ErrorKind.INFRASTRUCTURE_ERROR),
    ("RuntimeError: NRT_UNINITIALIZED", False, ErrorKind.INFRASTRUCTURE_ERROR),
    ("RuntimeError: NRT_EXEC_NC_BUSY", True, ErrorKind.INFRASTRUCTURE_ERROR),
    ("RuntimeError: NRT_LOAD_NOT_ENOUGH_NC", True, ErrorKind.INFRASTRUCTURE_ERROR),
])
def test_the_failure_mapping(message, neff, kind, tmp_path) -> None:
    node = tmp_path / "neuron0"
    node.write_bytes(b"")
    assert classify_failure(message, neff_written=neff, device_nodes=(str(node),)) is kind


def test_a_device_node_that_went_away_is_a_lost_device(tmp_path) -> None:
    gone = str(tmp_path / "neuron0")
    assert classify_failure("RuntimeError: something failed", neff_written=True,
                            device_nodes=(gone,)) is ErrorKind.INFRASTRUCTURE_ERROR


def test_the_backend_knows_the_kernels_file_name_as_the_child_compiles_it() -> None:
    from engine.evaluator import child
    from engine.platforms.nki.neuron import backend

    assert backend.KERNEL_FILENAME == child.KERNEL_FILENAME
