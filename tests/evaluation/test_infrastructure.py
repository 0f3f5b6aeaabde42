"""Our failures are ours: retried a bounded number of times, never recorded as a kernel result."""

from __future__ import annotations

import os
import signal
import threading
import time

from engine.evaluator import ErrorKind, Limits, evaluate
from tests.evaluation.conftest import (
    ADD_REFERENCE,
    FAST_LIMITS,
    NUMPY_ADD_KERNEL,
    children_of_this_process,
    interpreter_started,
)

# Correct, but slow enough (a second or so of pure Python) for the test to kill its process mid-run.
SLOW_CORRECT_KERNEL = '''
import numpy as np

def kernel(a, b):
    total = 0
    for i in range(4_000_000):
        total += i
    return a + b
'''


def kill_children(times: int, stop: threading.Event, role: str = "reference") -> threading.Thread:
    """Kill the next `times` children of `role` this process starts, once each is running. (A kernel child's
    death by signal is the kernel's own runtime_error where only the kernel runs in it, issue 35; a reference
    child's is not, so these tests kill that one.)"""

    def hunt() -> None:
        killed: set[int] = set()
        while len(killed) < times and not stop.is_set():
            for pid in children_of_this_process(role):
                if pid not in killed and interpreter_started(pid):
                    time.sleep(0.3)  # let it get into the kernel
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    killed.add(pid)
            time.sleep(0.02)

    thread = threading.Thread(target=hunt, daemon=True)
    thread.start()
    return thread


def test_a_worker_killed_mid_evaluation_is_retried_and_the_kernel_judged_on_its_merits() -> None:
    stop = threading.Event()
    hunter = kill_children(1, stop)
    try:
        result = evaluate(SLOW_CORRECT_KERNEL, ADD_REFERENCE, backend="null", limits=FAST_LIMITS)
    finally:
        stop.set()
        hunter.join(5)
    assert result.correct, result.error_message
    assert result.attempts == 2


def test_a_worker_that_keeps_dying_is_an_infrastructure_error_never_a_kernel_result() -> None:
    stop = threading.Event()
    limits = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=1024**3, infrastructure_retries=1)
    hunter = kill_children(2, stop)
    try:
        result = evaluate(SLOW_CORRECT_KERNEL, ADD_REFERENCE, backend="null", limits=limits)
    finally:
        stop.set()
        hunter.join(5)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR
    assert result.attempts == 2
    assert not result.is_kernel_result
    assert not result.correct and result.latency_ms is None  # nothing that could be ranked
    assert "killed by signal 9" in result.error_message


def test_a_missing_hardware_backend_is_ours_and_not_retried() -> None:
    result = evaluate(NUMPY_ADD_KERNEL, ADD_REFERENCE, backend="neuron", limits=FAST_LIMITS)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR
    assert result.error_message.startswith("neuron backend not available on this host: no Neuron device")
    assert result.attempts == 1
    assert not result.is_kernel_result


def test_no_evaluation_child_outlives_its_evaluation() -> None:
    evaluate(NUMPY_ADD_KERNEL, ADD_REFERENCE, backend="null", limits=FAST_LIMITS)
    assert children_of_this_process("kernel") == [] and children_of_this_process("reference") == []


# With the guards off (as if a kernel had found a way past them), the kernel's own code claims the
# infrastructure's trouble: by raising the backends' exception, or by writing a forged failure reply
# straight into its protocol stream.
CLAIMS_BY_RAISING = '''
import numpy as np
from engine.evaluator.backend_base import BackendUnavailable

def kernel(a, b):
    raise BackendUnavailable("the device fell over, please try again", retry=True)
'''

CLAIMS_BY_FORGING = '''
import gc, io, os
import numpy as np
from engine.evaluator import protocol

def kernel(a, b):
    stream = next(o for o in gc.get_objects() if isinstance(o, io.BufferedWriter) and not o.closed
                  and o.fileno() > 2)  # the protocol's stream (fd 1 goes to stderr)
    head, views = protocol.frame_parts({"ok": False, "kind": "infrastructure_error", "retry": True,
                                        "message": "the device fell over, please try again"}, None)
    stream.write(head)
    for view in views:
        stream.write(view)
    stream.flush()
    os._exit(0)
'''
GUARDS_OFF = {"static": False, "imports": False, "audit": False}


def test_a_kernel_raising_the_backends_unavailable_error_is_its_own_runtime_error() -> None:
    result = evaluate(CLAIMS_BY_RAISING, ADD_REFERENCE, backend="null", limits=FAST_LIMITS, _guards=GUARDS_OFF)
    assert result.error_kind is ErrorKind.RUNTIME_ERROR
    assert "the device fell over" in result.error_message and result.error_line == 6
    assert result.attempts == 1


def test_an_infrastructure_failure_forged_by_the_kernel_buys_it_no_retry() -> None:
    result = evaluate(CLAIMS_BY_FORGING, ADD_REFERENCE, backend="null", limits=FAST_LIMITS, _guards=GUARDS_OFF)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR  # the claim stands, but is not acted on
    assert "the device fell over" in result.error_message
    assert result.attempts == 1


def test_a_kernel_that_ends_its_own_process_is_its_runtime_error_not_retried() -> None:
    result = evaluate('''
import os
import numpy as np

def kernel(a, b):
    os._exit(3)
''', ADD_REFERENCE, backend="null", limits=FAST_LIMITS, _guards=GUARDS_OFF)
    assert result.error_kind is ErrorKind.RUNTIME_ERROR
    assert "ended its evaluation process (exit status 3)" in result.error_message
    assert result.attempts == 1 and result.is_kernel_result
