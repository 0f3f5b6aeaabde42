"""Our failures are ours: retried a bounded number of times, never recorded as a kernel result."""

from __future__ import annotations

import os
import signal
import threading
import time

from benchmark.evaluation import ErrorKind, Limits, evaluate
from tests.evaluation.conftest import ADD_REFERENCE, FAST_LIMITS, NUMPY_ADD_KERNEL, children_of_this_process

# Correct, but slow enough (a second or so of pure Python) for the test to kill its process mid-run.
SLOW_CORRECT_KERNEL = '''
import numpy as np

def kernel(a, b):
    total = 0
    for i in range(4_000_000):
        total += i
    return a + b
'''


def kill_kernel_children(times: int, stop: threading.Event) -> threading.Thread:
    """Kill the next `times` kernel children this process starts, once each is running."""

    def hunt() -> None:
        killed: set[int] = set()
        while len(killed) < times and not stop.is_set():
            for pid in children_of_this_process("kernel"):
                if pid not in killed:
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
    hunter = kill_kernel_children(1, stop)
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
    hunter = kill_kernel_children(2, stop)
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
