"""Cgroups per evaluation child: a bound on the physical memory it and everything it starts may hold, and,
where a child may run many threads (cuda, neuron), on the CPUs it may use at once.

`RLIMIT_AS` (child.py) bounds address space, which is the right bound for numpy on the CPU but not for a
CUDA or Neuron process, whose driver reserves terabytes of virtual memory it never touches: those children
get a huge address-space limit (triton.pipeline.cuda_placement, neuron/backend.py), so without a cgroup
nothing stopped one from filling the host's memory and disturbing every other evaluation. A cgroup counts
what is resident (and the child's tmpfs pages), whatever the address space. Likewise RLIMIT_CPU bounds a
child's CPU time, not its rate: a child allowed 512 threads (the driver's, the compiler's) could take every
core of the host for a while, slowing the evaluations that time kernels beside it. Its `cpu` group caps it at
`Limits.cpus` cores (CFS bandwidth: quota per period). Children held to one process need no such group.

The group is made under this process's own cgroup (`<own group>/accelopt/<pid>-<n>`): cgroup v1's `memory`
(and `cpu`) hierarchy where it is mounted, else v2 where this process's group delegates the controller (one
group then holds both). The child joins it before it execs anything (`joining`: a shell that writes itself
into each group's `cgroup.procs` and execs the sandbox), so every process the child starts is in it too. Its limit files stay
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


def _own_group(version: int, controller: str) -> str | None:
    """This process's group path in the `controller` hierarchy (v1) or the unified one (v2)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if (version == 1 and controller in controllers.split(",")) or (version == 2 and controllers == ""):
                return path
    return None


def _mounts(controller: str) -> dict[int, str]:
    """Mount points: 1 for the v1 `controller` hierarchy, 2 for the unified one."""
    found: dict[int, str] = {}
    with open("/proc/self/mounts") as f:
        for line in f:
            _, target, fstype, options, *_ = line.split()
            if fstype == "cgroup" and controller in options.split(","):
                found.setdefault(1, target)
            elif fstype == "cgroup2":
                found.setdefault(2, target)
    return found


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _prepare(version: int, mount: str, controller: str) -> _Hierarchy | None:
    own = _own_group(version, controller)
    if own is None:
        return None
    parent = os.path.join(mount, own.lstrip("/"))
    base = os.path.join(parent, "accelopt")
    try:
        if version == 2:
            # The controller must be delegated to our group's children, then from `accelopt` to its own.
            with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                if controller not in f.read().split():
                    _write(os.path.join(parent, "cgroup.subtree_control"), f"+{controller}")
        os.makedirs(base, exist_ok=True)
        if version == 2:
            _write(os.path.join(base, "cgroup.subtree_control"), f"+{controller}")
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
def hierarchy(controller: str = "memory") -> _Hierarchy | None:
    """Where children's `controller` groups go, or None when this host lets us make none (checked once per
    process and controller)."""
    try:
        mounts = _mounts(controller)
    except OSError:
        return None
    for version in (1, 2):
        if version in mounts:
            found = _prepare(version, mounts[version], controller)
            if found is not None:
                return found
    return None


# CFS bandwidth period: a bounded child may run `cpus` times this per period (the kernel's default period).
CPU_PERIOD_MICROSECONDS = 100_000


def _make_group(controller: str, name: str) -> tuple[str, int] | None:
    """mkdir the group `name` for `controller`: (path, version), or None where no hierarchy is writable."""
    found = hierarchy(controller)
    if found is None:
        return None
    try:
        os.mkdir(os.path.join(found.base, name))
    except FileNotFoundError:  # our base was removed under us (a host clean-up): make it again, once
        hierarchy.cache_clear()
        found = hierarchy(controller)
        if found is None:
            return None
        os.mkdir(os.path.join(found.base, name))
    except FileExistsError:  # v2: the memory controller's call made this same group
        pass
    return os.path.join(found.base, name), found.version


class ChildCgroup:
    """One child's cgroups: memory (always, where the host allows) and cpu (where `cpus` is given). Made
    with their limits, joined by the child (`joining`), removed after it. On v2 one group holds both."""

    def __init__(self, path: str, version: int, limit_bytes: int) -> None:
        self.path = path  # the memory group: every process of the child is in it
        self.version = version
        self.limit_bytes = limit_bytes
        self.cpu_path: str | None = None  # v1: a group in the cpu hierarchy; v2: `path` itself

    @classmethod
    def create(cls, limit_bytes: int, owner_uid: int | None = None, cpus: float | None = None) -> ChildCgroup | None:
        """New groups limited to `limit_bytes` resident and (if given) `cpus` cores, their `cgroup.procs`
        writable by `owner_uid`; None where this host has no writable memory cgroup. Without a writable cpu
        hierarchy the child gets its memory group only."""
        name = f"{os.getpid()}-{next(_counter)}"
        made = _make_group("memory", name)
        if made is None:
            return None
        group = cls(made[0], made[1], limit_bytes)
        try:
            if group.version == 1:
                _write(os.path.join(group.path, "memory.limit_in_bytes"), str(limit_bytes))
                # With swap accounting, swap counts too (it must not exceed memory + swap's own limit).
                with contextlib.suppress(OSError):
                    _write(os.path.join(group.path, "memory.memsw.limit_in_bytes"), str(limit_bytes))
            else:
                _write(os.path.join(group.path, "memory.max"), str(limit_bytes))
                with contextlib.suppress(OSError):
                    _write(os.path.join(group.path, "memory.swap.max"), "0")
            if cpus is not None:
                group._bound_cpus(name, cpus)
            if owner_uid is not None:
                for path in group._paths():
                    os.chown(os.path.join(path, "cgroup.procs"), owner_uid, -1)
        except OSError:
            group.remove()
            raise
        return group

    def _bound_cpus(self, name: str, cpus: float) -> None:
        made = _make_group("cpu", name)
        if made is None:
            return
        path, version = made
        quota = max(1000, round(cpus * CPU_PERIOD_MICROSECONDS))  # the kernel's smallest quota is 1 ms
        try:
            if version == 1:
                _write(os.path.join(path, "cpu.cfs_period_us"), str(CPU_PERIOD_MICROSECONDS))
                _write(os.path.join(path, "cpu.cfs_quota_us"), str(quota))
            else:
                _write(os.path.join(path, "cpu.max"), f"{quota} {CPU_PERIOD_MICROSECONDS}")
        except OSError:  # no CFS bandwidth control here: the memory bound still holds (make sandbox says so)
            if path != self.path:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            return
        self.cpu_path = path

    def _paths(self) -> list[str]:
        return list(dict.fromkeys(p for p in (self.path, self.cpu_path) if p is not None))

    def joining(self, argv: Sequence[str]) -> list[str]:
        """`argv` started by a shell that first moves itself into each group (`echo 0`: the writer itself),
        so nothing the child runs is ever outside them. The groups' paths are the shell's first arguments."""
        paths = self._paths()
        moves = " && ".join(f'echo 0 > "${i}/cgroup.procs"' for i in range(len(paths)))
        return ["/bin/sh", "-c", f'{moves} && shift {len(paths) - 1} && exec "$@"', *paths, *argv]

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
        """Remove the groups once their processes are gone (a killed child's may take a moment to exit)."""
        for path in self._paths():
            for _ in range(50):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
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
        ours = f"/accelopt/{os.path.basename(group_path)}"
        with open(f"/proc/{pid}/cgroup") as f:
            if not any(line.rstrip("\n").endswith(ours) for line in f):
                return
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(pidfd)
