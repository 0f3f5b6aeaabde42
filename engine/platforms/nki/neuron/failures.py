"""What a failure of the Neuron SDK means for the kernel: the failure taxonomy (docs/evaluation.md section 5)
for the neuron backend.

The SDK documents no exception classes for `nki.baremetal`, so the mapping reads what it can rely on:

1. the Neuron Runtime's status names (the `NRT_STATUS` enumeration of nrt_status.h, Neuron Runtime API
   docs), which the runtime's errors carry in their text;
2. the stage: `nki.baremetal` is asked to save the NEFF, so a failure that left no NEFF happened while
   compiling (tracing the kernel's Python or in neuronx-cc), one that left a NEFF happened on the device;
3. whether the device node is still there.

| what happened | kind | retried |
| --- | --- | --- |
| failed before a NEFF existed (NKI rule, neuronx-cc error `NCC_...`) | compile_error | no |
| NRT_TIMEOUT: the execution passed NEURON_RT_EXEC_TIMEOUT (a hang) | timeout | no |
| the child passed its wall-clock limit (a hang the runtime did not end) | timeout | no |
| NRT_EXEC_OOB, NRT_EXEC_BAD_INPUT, NRT_EXEC_COMPLETED_WITH_(NUM_)ERR, NRT_INVALID, NRT_FAILURE, any other error after the NEFF | runtime_error | no |
| the device node went away; NRT_HW_ERROR, NRT_EXEC_HW_ERR_*, NRT_EXEC_UNIT_UNRECOVERABLE, NRT_UNINITIALIZED, NRT_CLOSED, NRT_EXEC_NC_BUSY, NRT_LOAD_NOT_ENOUGH_NC, NRT_RESOURCE | infrastructure_error (a lost or unusable device) | yes, on another NeuronCore |

A hardware error is never held against a kernel even when a kernel might have provoked it: the worst a
kernel gains is being retried and then reported as an infrastructure error, which is never ranked.
"""

from __future__ import annotations

import os
import re

from engine.evaluator.result import ErrorKind

DEVICE_TIMEOUT = ("NRT_TIMEOUT",)
DEVICE_LOST = ("NRT_HW_ERROR", "NRT_EXEC_HW_ERR_", "NRT_EXEC_UNIT_UNRECOVERABLE", "NRT_UNINITIALIZED",
               "NRT_CLOSED", "NRT_EXEC_NC_BUSY", "NRT_LOAD_NOT_ENOUGH_NC", "NRT_RESOURCE",
               "NRT_NETWORK_PROXY_FAILURE")
KERNEL_FAULTS = ("NRT_EXEC_OOB", "NRT_EXEC_BAD_INPUT", "NRT_EXEC_COMPLETED_WITH_NUM_ERR",
                 "NRT_EXEC_COMPLETED_WITH_ERR", "NRT_EXEC_SW_NQ_OVERFLOW", "NRT_INVALID", "NRT_FAILURE")

_STATUS = re.compile(r"NRT_[A-Z0-9_]+")


class NeuronFailure(Exception):
    """An SDK failure, classified; raised with the SDK exception's traceback, so the kernel's line is kept."""

    kind = ErrorKind.RUNTIME_ERROR


class NeuronCompileError(NeuronFailure):
    kind = ErrorKind.COMPILE_ERROR


class NeuronRuntimeError(NeuronFailure):
    kind = ErrorKind.RUNTIME_ERROR


class NeuronDeviceTimeout(NeuronFailure):
    kind = ErrorKind.TIMEOUT


class NeuronDeviceLost(NeuronFailure):
    kind = ErrorKind.INFRASTRUCTURE_ERROR


_BY_KIND: dict[ErrorKind, type[NeuronFailure]] = {
    cls.kind: cls for cls in (NeuronCompileError, NeuronRuntimeError, NeuronDeviceTimeout, NeuronDeviceLost)}


def runtime_status(message: str) -> str | None:
    """The first Neuron Runtime status name in an error's text."""
    match = _STATUS.search(message)
    return match.group(0) if match else None


def classify_failure(message: str, *, neff_written: bool, device_nodes: tuple[str, ...]) -> ErrorKind:
    """The kind of an SDK failure, from its text, the stage it reached and the device nodes' presence."""
    status = runtime_status(message) or ""
    if any(status.startswith(s) for s in DEVICE_LOST) or any(not os.path.exists(n) for n in device_nodes):
        return ErrorKind.INFRASTRUCTURE_ERROR
    if status in DEVICE_TIMEOUT:
        return ErrorKind.TIMEOUT
    if status or neff_written:
        return ErrorKind.RUNTIME_ERROR
    return ErrorKind.COMPILE_ERROR


# Starts the message of every failure that sets its NeuronCore aside (cores.py) for the retry.
DEVICE_LOST_MARK = "the NeuronCore became unusable"

_PREFIX = {
    ErrorKind.INFRASTRUCTURE_ERROR: f"{DEVICE_LOST_MARK} (retried on another core): ",
    ErrorKind.TIMEOUT: "the kernel did not finish on the device within NEURON_RT_EXEC_TIMEOUT: ",
    ErrorKind.RUNTIME_ERROR: "the kernel failed on the device: ",
    ErrorKind.COMPILE_ERROR: "the kernel did not compile: ",
}


def classified(exc: BaseException, *, neff_written: bool, device_nodes: tuple[str, ...]) -> NeuronFailure:
    """`exc` as the NeuronFailure of its kind, carrying exc's traceback (the kernel's frames and line)."""
    text = f"{type(exc).__name__}: {exc}"
    kind = classify_failure(text, neff_written=neff_written, device_nodes=device_nodes)
    failure = _BY_KIND[kind](_PREFIX[kind] + text)
    line = getattr(exc, "line", None)  # the simulator-style errors name the kernel line themselves
    if isinstance(line, int) and line > 0:
        failure.line = line  # type: ignore[attr-defined]
    return failure.with_traceback(exc.__traceback__)
