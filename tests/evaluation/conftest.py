"""Tiny references and kernels for the evaluation tests (a 128x512 add; silu)."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.evaluator import Limits
from engine.evaluator.sandbox.user import ALLOW_ROOT_VARIABLE

ADD_REFERENCE = textwrap.dedent('''
    import numpy as np

    M, N = 128, 512

    def get_inputs():
        a = np.random.normal(size=(M, N)).astype(np.float32)
        b = np.random.normal(size=(M, N)).astype(np.float32)
        return [a, b]

    def forward(a, b):
        return a + b

    def transform_to_nki_inputs(inputs):
        return inputs

    def transform_nki_outputs(k_res, ref):
        if not isinstance(k_res, tuple):
            k_res = (k_res,)
        refs = ref if isinstance(ref, tuple) else (ref,)
        return [np.reshape(v, r.shape) for v, r in zip(k_res, refs)]
''')

# A kernel for the null backend: plain numpy on the arrays it is given.
NUMPY_ADD_KERNEL = textwrap.dedent('''
    import numpy as np

    def kernel(a, b):
        return a + b
''')

# Short limits so a runaway kernel costs seconds, not minutes.
FAST_LIMITS = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=1024**3)


def simulator_available() -> bool:
    try:
        from engine.platforms.nki.simulator import install, simulate  # noqa: F401
    except ImportError:
        return False
    return True


needs_simulator = pytest.mark.skipif(not simulator_available(), reason="engine.platforms.nki.simulator.simulate not available yet")


def children_of_this_process(role: str) -> list[int]:
    """Evaluation children of this test process running `role` (read from /proc): the processes this one
    started, which are the children's bwrap (its argv holds the child's) or, under the opt-out, the
    children themselves."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                args = cmdline.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"engine.evaluator.child" in args and role.encode() in args:
            found.append(int(entry))
    return found


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (host pids)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(parents.get(current, []))
    return found


def interpreter_started(launcher: int) -> bool:
    """Whether the child's Python runs at or under `launcher` (its bwrap, or the child itself under the
    opt-out): the sandbox is set up, so killing the launcher now takes the child with it (a bwrap killed
    while it sets its child up may leave that child behind)."""
    for pid in descendants(launcher):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().startswith("python"):
                    return True
        except OSError:
            continue
    return False


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


running_as_root = os.geteuid() == 0
needs_root = pytest.mark.skipif(not running_as_root, reason="only a root parent gives each child a uid of its own")


@pytest.fixture(autouse=True)
def _no_root_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests check the sandbox as deployed: a developer's ACCELOPT_SANDBOX_ALLOW_ROOT=1 must not weaken it."""
    monkeypatch.delenv(ALLOW_ROOT_VARIABLE, raising=False)


@pytest.fixture
def child_writable_dir() -> Iterator[Path]:
    """A host directory children run under the opt-out may write to (tests with the file guard off report
    through it; an isolated child cannot see it). Removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="accelopt-test-report-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
