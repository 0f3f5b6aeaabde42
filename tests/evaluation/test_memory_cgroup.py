"""Each evaluation child is held to a physical-memory bound (a memory cgroup, cgroups.py) whatever its
address-space limit: the bound a CUDA or Neuron child, whose address space cannot be limited, relies on."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from engine.evaluator import ErrorKind, Limits, evaluate
from engine.evaluator.sandbox import cgroups
from engine.evaluator.sandbox.user import ALLOW_ROOT_VARIABLE
from tests.evaluation.conftest import ADD_REFERENCE, process_alive

pytestmark = pytest.mark.skipif(cgroups.hierarchy() is None,
                                reason="this host lets the tests make no memory cgroup (needs root or delegation)")

OS_LEVEL_ONLY = {"static": False, "imports": False, "audit": False}

# Touches 768 MiB page by page: far inside a 4 GiB address space, over a 256 MiB resident bound.
TOUCHING_KERNEL = textwrap.dedent('''
    import numpy as np

    def kernel(a, b):
        hoard = np.ones((768, 1024, 1024), dtype=np.uint8)
        return a + b + float(hoard[::4096].sum() * 0)
''')


def run(kernel: str, limits: Limits):
    return evaluate(kernel, ADD_REFERENCE, backend="null", _guards=OS_LEVEL_ONLY, limits=limits)


def test_a_kernel_over_its_resident_bound_is_stopped_though_its_address_space_allows_it() -> None:
    result = run(TOUCHING_KERNEL, Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=4 * 1024**3,
                                         resident_bytes=256 * 1024**2))
    assert result.error_kind is ErrorKind.RESOURCE_LIMIT, result.error_message
    assert "physical memory limit of 256 MiB" in result.error_message


def test_the_same_kernel_within_its_resident_bound_is_correct() -> None:
    result = run(TOUCHING_KERNEL, Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=4 * 1024**3,
                                         resident_bytes=2 * 1024**3))
    assert result.correct, result.error_message


def test_no_group_is_left_behind_after_evaluations() -> None:
    base = cgroups.hierarchy().base
    mine = lambda: {n for n in os.listdir(base) if n.startswith(f"{os.getpid()}-")}  # noqa: E731
    before = mine()
    run(TOUCHING_KERNEL, Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=4 * 1024**3,
                                resident_bytes=256 * 1024**2))
    assert mine() == before


# Under the opt-out there is no PID namespace: the process group is all that holds the child's processes, and a
# descendant that starts a session of its own leaves it, holding the child's pipes open, as a bwrap killed
# while it set its child up leaves that child. The child's memory cgroup still holds it.
ESCAPING_KERNEL = textwrap.dedent('''
    import os, sys, time
    import numpy as np

    def kernel(a, b):
        pid = os.fork()
        if pid == 0:
            os.setsid()
            time.sleep(600)
            os._exit(0)
        print(f"ESCAPED {pid}", file=sys.stderr, flush=True)
        os._exit(3)
''')


def test_a_process_that_left_the_childs_group_holding_its_pipes_neither_stalls_nor_outlives_the_evaluation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "1")
    result = run(ESCAPING_KERNEL, Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=1024**3))
    # Its parent's exit is seen at once, though the pipes stay open: the kernel's own doing, not a timeout.
    assert result.error_kind is ErrorKind.RUNTIME_ERROR, (result.error_kind, result.error_message)
    assert "exit status 3" in result.error_message
    escaped = int(result.error_detail.split("ESCAPED ", 1)[1].split()[0])
    assert not process_alive(escaped), "the escaped process outlived its evaluation"


# Four processes spinning for 1.5 s of wall time, then the CPU time they used per second of it: the cores
# they got at once. (A child allowed to run many, as cuda and neuron children are.)
SPINNING_KERNEL = textwrap.dedent('''
    import json, os, time
    import numpy as np

    def kernel(a, b):
        before, start = os.times(), time.time()
        end = start + 1.5
        spinners = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                while time.time() < end:
                    pass
                os._exit(0)
            spinners.append(pid)
        while time.time() < end:
            pass
        for pid in spinners:
            os.waitpid(pid, 0)
        used = os.times()
        cpu = sum(getattr(used, f) - getattr(before, f) for f in ("user", "system", "children_user", "children_system"))
        raise RuntimeError("REPORT " + json.dumps({"cores": cpu / (time.time() - start)}))
''')


def cores_used(cpus: float | None) -> float:
    result = run(SPINNING_KERNEL, Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=1024**3, processes=8,
                                         cpus=cpus))
    assert result.error_kind is ErrorKind.RUNTIME_ERROR and "REPORT " in result.error_message, result.error_message
    return json.loads(result.error_message.split("REPORT ", 1)[1])["cores"]


@pytest.mark.skipif(cgroups.hierarchy("cpu") is None, reason="this host lets the tests make no cpu cgroup")
def test_a_child_allowed_many_processes_uses_no_more_cores_than_its_cpu_bound() -> None:
    # A quarter of a core: far below what four spinners get unbounded on any host with a core to spare
    # (two cores, one busy elsewhere: 1.0; idle: 2.0).
    assert cores_used(0.25) < 0.35
    assert cores_used(None) > 0.5
