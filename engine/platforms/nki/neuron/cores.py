"""The NeuronCore pool: every evaluation attempt on the neuron backend holds one NeuronCore for itself.

A core is held through an exclusive `flock` on `<lock dir>/core-<N>.lock`, so every process on the host
(web processes' executors, run workers, `manage.py hardware_check`) shares one pool and two attempts never
get the same core; the kernel releases the lock when the holder dies. The attempt's kernel child is then
pinned to that core with `NEURON_RT_VISIBLE_CORES=<N>` (the Neuron runtime's documented way to give each
process its own cores; it also refuses a core another process has reserved). Cores are handed out lowest
first, so a second attempt running at the same time always gets a different, higher core.

A core on which an attempt failed with an infrastructure error (a lost device, a runtime that would not
start) is set aside for `QUARANTINE_S` with a mark file, and the retry goes to another core.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

QUARANTINE_S = 300.0
_POLL_S = 0.2


class NoCoreFree(Exception):
    """Every NeuronCore of the pool stayed busy (or set aside) for the whole wait."""


@dataclass
class CoreLease:
    core: int
    lock_dir: str
    _fd: int | None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def quarantine(self, seconds: float = QUARANTINE_S) -> None:
        """Keep this core out of the pool for `seconds` (every process reads the mark)."""
        mark = _quarantine_path(self.lock_dir, self.core)
        with open(mark, "w") as handle:
            handle.write(f"{time.time() + seconds:.3f}\n")

    def __enter__(self) -> CoreLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock_path(lock_dir: str, core: int) -> str:
    return os.path.join(lock_dir, f"core-{core}.lock")


def _quarantine_path(lock_dir: str, core: int) -> str:
    return os.path.join(lock_dir, f"core-{core}.quarantine")


def quarantined(lock_dir: str, core: int, now: float | None = None) -> bool:
    try:
        with open(_quarantine_path(lock_dir, core)) as handle:
            until = float(handle.read().strip() or 0)
    except (OSError, ValueError):
        return False
    return until > (time.time() if now is None else now)


def _try_lock(lock_dir: str, core: int) -> int | None:
    fd = os.open(_lock_path(lock_dir, core), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def lease_core(cores: Sequence[int], lock_dir: str, wait_s: float) -> CoreLease:
    """The lowest free NeuronCore of `cores`, held until `release`; waits up to `wait_s` for one."""
    if not cores:
        raise NoCoreFree("the NeuronCore pool is empty")
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    deadline = time.monotonic() + wait_s
    while True:
        for core in sorted(cores):
            if quarantined(lock_dir, core):
                continue
            fd = _try_lock(lock_dir, core)
            if fd is not None:
                return CoreLease(core, lock_dir, fd)
        if time.monotonic() >= deadline:
            set_aside = [c for c in cores if quarantined(lock_dir, c)]
            note = f" ({len(set_aside)} set aside after infrastructure errors: {set_aside})" if set_aside else ""
            raise NoCoreFree(f"all {len(cores)} NeuronCores stayed busy for {wait_s:g} s{note}")
        time.sleep(_POLL_S)
