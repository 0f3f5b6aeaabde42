"""Which user an evaluation child runs as, the explicit opt-out, and the settings a child fixes on itself.

A root parent gives every child a uid of its own for as long as the child lives, leased from the range
`ACCELOPT_SANDBOX_UIDS` (default 1879048192-1879049215; no passwd entry is needed or wanted). Two children
running at the same time, of the same evaluation or of two evaluations in different processes, never share
a uid: a lease is an exclusive `flock` on `/run/accelopt-sandbox/uid-<N>.lock`, held by the parent while
the child runs and released by the kernel if the parent dies. The child also gets that number as its gid
and no supplementary groups. A parent that is not root cannot switch uids; its children run as its own uid
(each in its own namespaces; see isolation.py).

`ACCELOPT_SANDBOX_ALLOW_ROOT=1` is the explicit opt-out for development hosts: children then run as the
parent's user, without the OS isolation (no namespaces, no uid of their own).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import secrets
import sys
import threading
from dataclasses import dataclass, field

ALLOW_ROOT_VARIABLE = "ACCELOPT_SANDBOX_ALLOW_ROOT"
UIDS_VARIABLE = "ACCELOPT_SANDBOX_UIDS"
# 0x70000000 and up: above the ranges useradd and systemd hand out to users, dynamic users and containers,
# below 2^31 (uids some tools still read as signed).
DEFAULT_UIDS = (1_879_048_192, 1_879_049_215)
LOCK_DIRECTORY = "/run/accelopt-sandbox"
SETUP_COMMAND = "python -m engine.evaluator.sandbox.setup"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

# linux/prctl.h
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38


class SandboxUnavailable(OSError):
    """The sandbox cannot start a child as configured. Ours to fix, never the kernel's fault."""


def root_allowed() -> bool:
    """`ACCELOPT_SANDBOX_ALLOW_ROOT`: 1/true/yes/on drops the OS isolation; unset or 0/false/no/off keeps it."""
    value = os.environ.get(ALLOW_ROOT_VARIABLE, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SandboxUnavailable(f"{ALLOW_ROOT_VARIABLE} must be one of 1/0, true/false, yes/no, on/off; got "
                             f"{os.environ[ALLOW_ROOT_VARIABLE]!r}")


def uid_range() -> range:
    """The uids children of a root parent are leased from (`ACCELOPT_SANDBOX_UIDS`, "FIRST-LAST")."""
    text = os.environ.get(UIDS_VARIABLE, "").strip()
    if not text:
        return range(DEFAULT_UIDS[0], DEFAULT_UIDS[1] + 1)
    try:
        first, last = (int(part) for part in text.split("-"))
    except ValueError:
        raise SandboxUnavailable(f"{UIDS_VARIABLE} must be FIRST-LAST (two uids), got {text!r}") from None
    if not 1000 <= first <= last < 2**31 - 1 or first <= 65534 <= last:
        raise SandboxUnavailable(f"{UIDS_VARIABLE}={text!r}: the range must lie within 1000..2147483646 and leave "
                                 "out 65534 (nobody)")
    return range(first, last + 1)


@dataclass
class UidLease:
    """One uid held for one child. `release()` after the child is reaped; idempotent."""

    uid: int
    _fd: int | None = field(default=None, repr=False)

    @property
    def gid(self) -> int:
        return self.uid

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the flock


_lease_lock = threading.Lock()


def lease_uid(directory: str = LOCK_DIRECTORY) -> UidLease:
    """A uid no other child on this host holds. Raises SandboxUnavailable when every uid is taken.

    flock conflicts between two opens of the same file even within one process, so threads of one parent
    and different parents are kept apart alike. The scan starts at a random place so a uid that was just
    released is unlikely to be handed out again at once.
    """
    uids = uid_range()
    with _lease_lock:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        start = secrets.randbelow(len(uids))
        for offset in range(len(uids)):
            uid = uids[(start + offset) % len(uids)]
            fd = os.open(os.path.join(directory, f"uid-{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return UidLease(uid, fd)
    raise SandboxUnavailable(f"all {len(uids)} sandbox uids ({UIDS_VARIABLE}={uids.start}-{uids.stop - 1}) are held "
                             "by running evaluation children; widen the range or run fewer evaluations at once")


def lock_down_this_process() -> None:
    """Called first thing in every child, before any untrusted code (Linux only; elsewhere a no-op).

    no_new_privs: nothing this process or its descendants exec can gain privileges (setuid binaries,
    file capabilities); bubblewrap sets it too, this covers the opt-out. Not dumpable: no other process of
    the same uid can ptrace this one or read its memory through /proc (under the opt-out, the kernel child
    and the reference child, which holds the expected outputs, share a uid). Both survive fork.
    """
    if not sys.platform.startswith("linux"):
        return

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    for option in (_PR_SET_NO_NEW_PRIVS, _PR_SET_DUMPABLE):
        value = 1 if option == _PR_SET_NO_NEW_PRIVS else 0
        # A kernel too old for an option refuses it with EINVAL; the other layers still hold.
        libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0))
