"""Evaluation children run below the server's priority, so on a small host a busy evaluation cannot keep
/healthz and pages waiting (measurements/soak.py). Both the process's niceness and its scheduler autogroup's
(bwrap gives the child a session, so an autogroup, of its own) are raised; the server's are untouched."""

from __future__ import annotations

import os
import time

import pytest

from engine.evaluator.child import CHILD_NICENESS
from engine.evaluator.sandbox.process import ChildProcess, Limits

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="children get uids of their own only under root")


def _interpreter_of(uid: int) -> int | None:
    """The pid of the Python interpreter running as `uid` (bwrap and its pid 1 run as it too)."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(fields["Uid"].split()[0]) == uid and fields["Name"].strip().startswith("python"):
            return int(entry)
    return None


def _niceness(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])  # field 19: nice


def _autogroup(pid: int) -> str:
    with open(f"/proc/{pid}/autogroup") as f:
        return f.read().strip()


def test_an_evaluation_child_runs_below_the_servers_priority() -> None:
    has_autogroup = os.path.exists("/proc/self/autogroup")
    server_before = _autogroup(os.getpid()) if has_autogroup else ""
    niceness_before = os.nice(0)
    child = ChildProcess("reference", {}, Limits(wall_seconds=30))
    try:
        deadline = time.monotonic() + 10
        while (pid := _interpreter_of(child.lease.uid)) is None or _niceness(pid) == niceness_before:
            assert time.monotonic() < deadline, "the child never started, or never lowered its priority"
            time.sleep(0.02)
        assert _niceness(pid) == min(19, niceness_before + CHILD_NICENESS)  # below the server's, wherever it is
        # Empty where the scheduler groups this process by cgroup rather than by autogroup (as in many CI
        # containers): there server and child share one group, and niceness alone counts.
        server_group = _autogroup(os.getpid()) if has_autogroup else ""
        if server_group:
            child_group = _autogroup(pid)
            assert child_group.endswith(f"nice {CHILD_NICENESS}")
            assert child_group.split()[0] != server_group.split()[0]
            assert server_group == server_before  # the server's group kept its own niceness, whatever it is
        assert os.nice(0) == niceness_before
    finally:
        child.close()
