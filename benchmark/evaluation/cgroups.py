"""A memory cgroup per evaluation child: a bound on the physical memory it and everything it starts may hold.

`RLIMIT_AS` (child.py) bounds address space, which is the right bound for numpy on the CPU but not for a
CUDA or Neuron process, whose driver reserves terabytes of virtual memory it never touches: those children
get a huge address-space limit (triton_pipeline.cuda_placement, neuron/backend.py), so without a cgroup
nothing stopped one from filling the host's memory and disturbing every other evaluation. A cgroup counts
what is resident (and the child's tmpfs pages), whatever the address space.

The group is made under this process's own memory cgroup (`<own group>/accelopt/<pid>-<n>`): cgroup v1's
`memory` hierarchy where it is mounted, else v2 where this process's group delegates the `memory`
controller. The child joins it before it execs anything (`joining`: a shell that writes itself into
`cgroup.procs` and execs the sandbox), so every process the child starts is in it too. Its limit files stay
root's; only `cgroup.procs` is given to the child's uid, which can move its own processes into that group
and nowhere else. Where no hierarchy is writable (an unprivileged parent without delegation), `create`
returns None and the children run with their rlimits only (docs/evaluation.md says so).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass

_counter = itertools.count()


@dataclass(frozen=True)
class _Hierarchy:
    base: str  # <mount><own group>/accelopt: where the children's groups are made
    version: int  # 1 or 2


def _own_group(version: int) -> str | None:
    """This process's group path in the memory hierarchy (v1) or the unified one (v2)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if (version == 1 and "memory" in controllers.split(",")) or (version == 2 and controllers == ""):
                return path
    return None


def _mounts() -> dict[int, str]:
    """Mount points: 1 for the v1 `memory` hierarchy, 2 for the unified one."""
    found: dict[int, str] = {}
    with open("/proc/self/mounts") as f:
        for line in f:
            _, target, fstype, options, *_ = line.split()
            if fstype == "cgroup" and "memory" in options.split(","):
                found.setdefault(1, target)
            elif fstype == "cgroup2":
                found.setdefault(2, target)
    return found


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _prepare(version: int, mount: str) -> _Hierarchy | None:
    own = _own_group(version)
    if own is None:
        return None
    parent = os.path.join(mount, own.lstrip("/"))
    base = os.path.join(parent, "accelopt")
    try:
        if version == 2:
            # The controller must be delegated to our group's children, then from `accelopt` to its own.
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                if "memory" not in f.read().split():
                    _write(os.path.join(parent, "cgroup.subtree_control"), "+memory")
        os.makedirs(base, exist_ok=True)
        if version == 2:
            _write(os.path.join(base, "cgroup.subtree_control"), "+memory")
    except OSError:
        return None
    _remove_stale(base)
    return _Hierarchy(base, version)


def _remove_stale(base: str) -> None:
    """Groups left by a parent that died (named by its pid): removed when empty."""
    for name in os.listdir(base):
        pid = name.split("-", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(base, name))


@functools.cache
def hierarchy() -> _Hierarchy | None:
    """Where children's groups go, or None when this host lets us make none (checked once per process)."""
    try:
        mounts = _mounts()
    except OSError:
        return None
    for version in (1, 2):
        if version in mounts:
            found = _prepare(version, mounts[version])
            if found is not None:
                return found
    return None


class MemoryGroup:
    """One child's memory cgroup: made with its limit, joined by the child (`joining`), removed after it."""

    def __init__(self, path: str, version: int, limit_bytes: int) -> None:
        self.path = path
        self.version = version
        self.limit_bytes = limit_bytes

    @classmethod
    def create(cls, limit_bytes: int, owner_uid: int | None = None) -> MemoryGroup | None:
        """A new group limited to `limit_bytes` resident, its `cgroup.procs` writable by `owner_uid`;
        None where this host has no writable memory cgroup."""
        found = hierarchy()
        if found is None:
            return None
        path = os.path.join(found.base, f"{os.getpid()}-{next(_counter)}")
        try:
            os.mkdir(path)
        except FileNotFoundError:  # our base was removed under us (a host clean-up): make it again, once
            hierarchy.cache_clear()
            found = hierarchy()
            if found is None:
                return None
            path = os.path.join(found.base, os.path.basename(path))
            os.mkdir(path)
        group = cls(path, found.version, limit_bytes)
        try:
            if found.version == 1:
                _write(os.path.join(path, "memory.limit_in_bytes"), str(limit_bytes))
                # With swap accounting, swap counts too (it must not exceed memory + swap's own limit).
                with contextlib.suppress(OSError):
                    _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(limit_bytes))
            else:
                _write(os.path.join(path, "memory.max"), str(limit_bytes))
                with contextlib.suppress(OSError):
                    _write(os.path.join(path, "memory.swap.max"), "0")
            if owner_uid is not None:
                os.chown(os.path.join(path, "cgroup.procs"), owner_uid, -1)
        except OSError:
            group.remove()
            raise
        return group

    def joining(self, argv: Sequence[str]) -> list[str]:
        """`argv` started by a shell that first moves itself into this group (`echo 0`: the writer itself),
        so nothing the child runs is ever outside it. The group's path is the shell's $0."""
        return ["/bin/sh", "-c", 'echo 0 > "$0/cgroup.procs" && exec "$@"', self.path, *argv]

    def kill_members(self) -> None:
        """SIGKILL every process in the group, whatever its session or PID namespace: a bwrap killed while
        it set up its child leaves that child outside the process group the parent kills, and out of reach
        of its parent-death signal, but never outside this group."""
        with contextlib.suppress(OSError):
            if self.version == 2 and os.path.exists(os.path.join(self.path, "cgroup.kill")):
                _write(os.path.join(self.path, "cgroup.kill"), "1")
                return
        for _ in range(10):  # a member may fork once more between a read and its kill
            try:
                with open(os.path.join(self.path, "cgroup.procs")) as f:
                    members = [int(line) for line in f if line.strip()]
            except OSError:
                return
            if not members:
                return
            for pid in members:
                _kill_if_member(pid, self.path)

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this group for exceeding its limit."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(self.path, name)) as f:
                counters = dict(line.split() for line in f if len(line.split()) == 2)
        except OSError:
            return False
        return int(counters.get("oom_kill", "0")) > 0

    def remove(self) -> None:
        """Remove the group once its processes are gone (a killed child's may take a moment to exit)."""
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def _kill_if_member(pid: int, group_path: str) -> None:
    """SIGKILL `pid` if it is (still) in the group. The pidfd pins the process, so a pid that exited and was
    reused between reading the group's list and this kill is recognized (it is in no group of ours) and
    left alone."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            relative = group_path.split("/accelopt/", 1)[-1]
            if not any(line.rstrip("\n").endswith(f"/accelopt/{relative}") for line in f):
                return
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)
