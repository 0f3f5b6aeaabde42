"""Which user an evaluation child runs as, and the process settings it fixes on itself at start-up.

A child started by a root parent drops to an unprivileged user (`ACCELOPT_SANDBOX_USER`, default
`accelopt-sandbox`): no supplementary groups, that user's group, no capabilities. As root, Linux ignores
RLIMIT_NPROC and every file is readable (`/proc/<parent>/environ`, `var/secret_key`, the database); as
that user the limits hold and file permissions apply. A parent that is not root starts its children as
itself, as before.

If the user is missing, the sandbox refuses to run (`SandboxUnavailable`, an infrastructure error) rather
than run kernels as root, unless `ACCELOPT_SANDBOX_ALLOW_ROOT=1` says so explicitly.
`python -m benchmark.evaluation.sandbox_setup` (run by `make run` and `make test`) creates the user.
"""

from __future__ import annotations

import os
import pwd
import sys
from dataclasses import dataclass

USER_VARIABLE = "ACCELOPT_SANDBOX_USER"
ALLOW_ROOT_VARIABLE = "ACCELOPT_SANDBOX_ALLOW_ROOT"
DEFAULT_USER = "accelopt-sandbox"
SETUP_COMMAND = "python -m benchmark.evaluation.sandbox_setup"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}

# linux/prctl.h
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38


class SandboxUnavailable(OSError):
    """The sandbox cannot start a child as configured. Ours to fix, never the kernel's fault."""


@dataclass(frozen=True)
class SandboxUser:
    name: str
    uid: int
    gid: int


def sandbox_user_name() -> str:
    return os.environ.get(USER_VARIABLE, "").strip() or DEFAULT_USER


def root_allowed() -> bool:
    """`ACCELOPT_SANDBOX_ALLOW_ROOT`: 1/true/yes/on runs children as root; unset or 0/false/no/off does not."""
    value = os.environ.get(ALLOW_ROOT_VARIABLE, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SandboxUnavailable(f"{ALLOW_ROOT_VARIABLE} must be one of 1/0, true/false, yes/no, on/off; got "
                             f"{os.environ[ALLOW_ROOT_VARIABLE]!r}")


def lookup_sandbox_user(name: str) -> SandboxUser | None:
    """The user's ids, or None when no such user exists. A user with uid or gid 0 is refused."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise SandboxUnavailable(f"the sandbox user {name!r} ({USER_VARIABLE}) has uid {entry.pw_uid} and gid "
                                 f"{entry.pw_gid}; it must be an unprivileged user, not root or in group 0")
    return SandboxUser(name, entry.pw_uid, entry.pw_gid)


def child_user() -> SandboxUser | None:
    """The user a new child must run as, or None to start it as this process's user.

    Raises SandboxUnavailable when this process is root and the sandbox user does not exist.
    """
    if os.geteuid() != 0 or root_allowed():
        return None
    name = sandbox_user_name()
    user = lookup_sandbox_user(name)
    if user is None:
        raise SandboxUnavailable(
            f"this process runs as root, so evaluation children must run as the unprivileged user {name!r} "
            f"({USER_VARIABLE}), which does not exist on this host. Fix: run `make sandbox` in the checkout "
            f"(or `{SETUP_COMMAND}` as root), which runs `useradd --system --no-create-home --shell "
            f"/usr/sbin/nologin {name}` and lets that user read the Python installation; or set "
            f"{ALLOW_ROOT_VARIABLE}=1 to run untrusted kernels as root (development only)")
    return user


def lock_down_this_process() -> None:
    """Called first thing in every child, before any untrusted code (Linux only; elsewhere a no-op).

    no_new_privs: nothing this process or its descendants exec can gain privileges (setuid binaries,
    file capabilities). Not dumpable: other processes of the sandbox user, such as another evaluation's
    kernel, cannot ptrace this one or read its memory through /proc (the reference child holds the
    expected outputs). Both survive fork; no_new_privs also survives exec.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    for option in (_PR_SET_NO_NEW_PRIVS, _PR_SET_DUMPABLE):
        value = 1 if option == _PR_SET_NO_NEW_PRIVS else 0
        # A kernel too old for an option refuses it with EINVAL; the other layers still hold.
        libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0))
