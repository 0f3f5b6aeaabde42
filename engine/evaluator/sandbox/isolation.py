"""OS isolation of evaluation children: namespaces from util-linux `unshare` and bubblewrap.

Every child (unless `ACCELOPT_SANDBOX_ALLOW_ROOT=1`) is started as

    [setpriv --reuid=U --regid=U --clear-groups --   (as the leased uid U; a root parent only)]
    unshare --user --map-current-user --net --
    bwrap --unshare-user --unshare-ipc --unshare-pid --unshare-uts --unshare-cgroup-try
          --die-with-parent --new-session --disable-userns --hostname sandbox
          --ro-bind /usr /usr  (and /bin, /lib, /lib64, ... as the host has them: links or read-only binds)
          --ro-bind-try /etc/ld.so.cache /etc/ld.so.cache
          --ro-bind PREFIX PREFIX          (the Python installation and the venv, each at its own path)
          --ro-bind PROJECT/benchmark PROJECT/benchmark
          --proc /proc --dev /dev --remount-ro /dev
          --size BYTES --tmpfs /tmp --chdir /tmp --remount-ro /
          -- python -s -B -P -m engine.evaluator.child ROLE CONFIG

`unshare` makes the network namespace (only a loopback device, left down: bubblewrap would bring it
up), bubblewrap the rest. What the child sees is a read-only root of its own: /usr and the library
links, the interpreter, the venv, our package, a fresh /proc of its own PID namespace (it sees two
processes: bubblewrap's init and itself), a minimal /dev and an empty /tmp that dies with it. Not
visible: the rest of the checkout (var/ with the database and secret key), /root, /home, /etc, /run,
/sys, other processes, other evaluations' files. Nothing in it is writable but /tmp. It talks to the
parent only over the stdin/stdout pipes it inherits.

Kernels without unprivileged user namespaces, or a host without bwrap, get no weaker fallback: the child
is refused with SandboxUnavailable (an infrastructure error) saying what to install or enable.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.evaluator.sandbox.user import (
    ALLOW_ROOT_VARIABLE,
    SETUP_COMMAND,
    SandboxUnavailable,
    UidLease,
    root_allowed,
)

# The project root (the directory holding the `benchmark` package); only the package is made visible.
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PACKAGE_DIR = os.path.join(PROJECT_ROOT, "engine")
HOSTNAME = "sandbox"
SCRATCH = "/tmp"

# Where the libraries and programs live; each is a link (merged /usr) or a directory, depending on the host.
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

OPT_OUT_HINT = (f"or set {ALLOW_ROOT_VARIABLE}=1 to run kernels without OS isolation (development hosts only: "
                "kernels then run as this process's user and can see its files, processes and network)")
INSTALL_HINT = ("run `make sandbox` as root (it installs bubblewrap with `apt-get install -y bubblewrap` and "
                "checks that an isolated child starts), or install the `bubblewrap` and `util-linux` packages "
                "yourself")
NAMESPACE_HINT = (
    "the evaluation sandbox needs unprivileged user namespaces (with network, PID, IPC and mount namespaces "
    "inside them). Enable them: `sysctl -w kernel.unprivileged_userns_clone=1` (Debian kernels before 6.x), "
    "`sysctl -w user.max_user_namespaces=15000` where it is 0, `sysctl -w "
    "kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 23.10+); in a container, allow unshare/clone "
    "(Docker: `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`, or --privileged). "
    "Then check with `make sandbox`")


@dataclass(frozen=True)
class SandboxExtras:
    """What a backend shares with its children beyond the sandbox above, declared by the backend (the neuron
    backend: its device nodes and the profiler's files; docs/evaluation.md section 2). Nothing else changes:
    the namespaces, the uid, the read-only root and the limits stay as they are.

    Paths are (host path, path in the child). Under the opt-out there is no mount namespace, so the binds
    do nothing and the child uses the host paths; only `environment` and `python_path` apply."""

    devices: tuple[tuple[str, str], ...] = ()  # device nodes, bound with device access (--dev-bind)
    read_only: tuple[tuple[str, str], ...] = ()  # e.g. the SDK's tools, sysfs entries of the devices
    read_write: tuple[tuple[str, str], ...] = ()  # one directory per evaluation for the profiler's files
    environment: tuple[tuple[str, str], ...] = ()  # added to the child's scrubbed environment
    python_path: tuple[str, ...] = ()  # put before PYTHONPATH, bound read-only at the same path


def extra_bind_arguments(extras: SandboxExtras | None, bound: Sequence[str]) -> tuple[list[str], list[str]]:
    """bwrap options for `extras`: the device binds (before /dev is made read-only) and the others."""
    if extras is None:
        return [], []
    devices: list[str] = []
    for host, inside in extras.devices:
        devices += ["--dev-bind", host, inside]
    others: list[str] = []
    for path in extras.python_path:
        if not _is_under(path, bound):
            others += ["--ro-bind", path, path]
    for host, inside in extras.read_only:
        others += ["--ro-bind", host, inside]
    for host, inside in extras.read_write:
        others += ["--bind", host, inside]
    return devices, others


def var_dir() -> Path:
    """The project's runtime directory (database, secret key), resolved the way accelopt_site/settings.py does."""
    return Path(os.environ.get("ACCELOPT_VAR_DIR", "").strip() or Path(PROJECT_ROOT) / "var").resolve()


def isolation_required() -> bool:
    """False only under the explicit opt-out."""
    return not root_allowed()


def tools() -> dict[str, str | None]:
    return {"bwrap": shutil.which("bwrap"), "unshare": shutil.which("unshare")}


@functools.lru_cache(maxsize=4)
def _bwrap_options(bwrap: str) -> frozenset[str]:
    """The options this bwrap knows (0.8 has --disable-userns and --size; older ones do not)."""
    try:
        text = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(word for word in text.split() if word.startswith("--"))


def _interpreter_dirs() -> list[str]:
    """The Python installation and the venv, plus the directory of every link on the way to the interpreter."""
    paths = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    current = os.path.abspath(sys.executable)
    for _ in range(40):
        paths.append(os.path.dirname(current))
        if not os.path.islink(current):
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    paths.append(os.path.dirname(os.path.realpath(sys.executable)))
    return paths


def _outermost(paths: Sequence[str]) -> list[str]:
    """Existing directories, nested ones dropped (a bind of the outer one shows them already)."""
    kept: list[str] = []
    for path in sorted({os.path.abspath(p) for p in paths if p and os.path.isdir(p)}, key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def visible_paths() -> list[str]:
    """Host directories the child sees, read-only, each at its own path."""
    candidates = ["/usr", *_interpreter_dirs(), PACKAGE_DIR]
    return [p for p in _outermost(candidates) if p != "/"]


def scratch_skeleton() -> set[str]:
    """Names in the child's empty /tmp that are only the mount points of read-only binds (a project or
    venv under the host's /tmp): directories holding our code, never anything a child wrote."""
    prefix = SCRATCH.rstrip("/") + "/"
    return {p[len(prefix):].split("/")[0] for p in visible_paths() if p.startswith(prefix)}


def _is_under(path: str, parents: Sequence[str]) -> bool:
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in parents)


def bwrap_arguments(bwrap: str, scratch_bytes: int, extras: SandboxExtras | None = None,
                    seccomp_fd: int | None = None) -> list[str]:
    """bwrap and its options up to (not including) the command. `seccomp_fd`: a descriptor the child inherits
    holding the filter's BPF (seccomp.filter_fd), applied to the command alone, after the sandbox is made."""
    known = _bwrap_options(bwrap)
    args = [bwrap, "--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--hostname", HOSTNAME]
    if "--disable-userns" in known:  # no nested namespaces (and no capabilities in them) for the kernel
        args.append("--disable-userns")
    # The private /tmp first: binds made after it land on top of it, so a project or venv that lives
    # under the host's /tmp (a fresh clone in /tmp, say) stays visible instead of being hidden by it.
    if "--size" in known:
        args += ["--size", str(int(scratch_bytes))]
    args += ["--tmpfs", SCRATCH]
    binds = visible_paths()
    for name in _SYSTEM_DIRS:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name) and not _is_under(name, binds):
            args += ["--ro-bind", name, name]
    for path in binds:
        args += ["--ro-bind", path, path]
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    # Defence in depth: should the runtime directory ever lie under a bound path, an empty mount hides it.
    hidden = str(var_dir())
    if _is_under(hidden, binds) and os.path.isdir(hidden):
        args += ["--tmpfs", hidden, "--remount-ro", hidden]
    device_binds, extra_binds = extra_bind_arguments(extras, binds)
    # bubblewrap's init (pid 1) shares the child's uid and runs outside its seccomp filter: its memory is
    # masked (issue 35; ptrace and process_vm_* are the filter's). One thread, so one task entry.
    args += ["--proc", "/proc", *[a for path in _PID1_MEMORY for a in ("--ro-bind", os.devnull, path)]]
    args += ["--dev", "/dev", *device_binds, "--remount-ro", "/dev"]
    args += [*extra_binds, "--chdir", SCRATCH, "--remount-ro", "/"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return args


_PID1_MEMORY = ("/proc/1/mem", "/proc/1/task/1/mem")


def command(argv: Sequence[str], scratch_bytes: int, extras: SandboxExtras | None = None,
            seccomp_fd: int | None = None) -> list[str]:
    """`argv` wrapped in its namespaces (and the seccomp filter held by `seccomp_fd`, which the caller passes
    to the child). Raises SandboxUnavailable when bwrap or unshare is missing."""
    found = tools()
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise SandboxUnavailable(
            f"evaluation children run in OS namespaces, but {' and '.join(f'`{m}`' for m in missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed on this host. Fix: {INSTALL_HINT}; "
            f"{OPT_OUT_HINT}")
    # The network namespace is unshare's: bwrap's --unshare-net would bring the loopback device up.
    return [found["unshare"], "--user", "--map-current-user", "--net", "--",
            *bwrap_arguments(found["bwrap"], scratch_bytes, extras, seccomp_fd), "--", *argv]


def run_as(lease: UidLease | None, argv: Sequence[str]) -> list[str]:
    """`argv` started as the lease's uid by util-linux's `setpriv`, after the exec.

    Why not Popen's user/group arguments: with them CPython must fork() (vfork cannot change ids), and
    fork() in the threaded server runs every pthread_atfork handler, among them OpenBLAS's, which joins
    its worker threads while this thread holds the GIL. A worker finishing a job for another thread can
    miss that handshake and never exit, and the thread that job belongs to then waits for the GIL: the
    whole server deadlocks (docs/architecture.md, "Starting children"). Without ids to change, Popen
    uses vfork(): no atfork handler runs and only CPython's C code runs before the exec.
    setpriv changes real, effective and saved ids and drops supplementary groups, so there is no way
    back to root and the kernel clears every capability (`make sandbox` checks this).
    """
    if lease is None:
        return list(argv)
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin")
    if setpriv is None:
        raise SandboxUnavailable(f"`setpriv` (util-linux) is not installed; it starts children as their own "
                                 f"uid. Fix: {INSTALL_HINT}")
    return [setpriv, f"--reuid={lease.uid}", f"--regid={lease.gid}", "--clear-groups", "--", *argv]


_PROBE_CODE = "import os, sys; sys.stdout.write(f'{os.getuid()} {os.getpid()}')"

_checked_lock = threading.Lock()
_checked = False


def probe(lease: UidLease | None, scratch_bytes: int = 16 * 1024**2, timeout: float = 60.0) -> None:
    """Start the interpreter in the sandbox exactly as a child is started; SandboxUnavailable if it fails."""
    argv = run_as(lease, command([sys.executable, "-s", "-B", "-P", "-S", "-c", _PROBE_CODE], scratch_bytes))
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    except PermissionError as exc:
        raise SandboxUnavailable(f"could not start `unshare` as uid {lease.uid if lease else os.getuid()} "
                                 f"({exc.strerror}). Fix: {INSTALL_HINT}; {OPT_OUT_HINT}") from None
    except subprocess.TimeoutExpired:
        raise SandboxUnavailable(f"an isolated evaluation child did not start within {timeout:g} s") from None
    expected_uid = lease.uid if lease is not None else os.getuid()
    if done.returncode == 0 and done.stdout.split() == [str(expected_uid), "2"]:
        return
    error = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}")[-2000:]
    if "ermission denied" in error and ("python" in error or "Can't find source path" in error
                                        or "execvp" in error):
        fix = (f"the sandbox uid cannot reach the Python installation or the project; run `make sandbox` (or "
               f"`{SETUP_COMMAND}`) as root, which lets other users traverse the directories on the way")
    elif done.returncode == 0:
        fix = f"the child ran but did not get its own uid and PID namespace (it said {done.stdout.strip()!r})"
    else:
        fix = NAMESPACE_HINT
    raise SandboxUnavailable(f"could not start an isolated evaluation child: {error}. {fix}; {OPT_OUT_HINT}")


def ensure_available(lease: UidLease | None) -> None:
    """Probe once per process (a fraction of a second); a failure is probed again next time."""
    global _checked
    if _checked:
        return
    with _checked_lock:
        if not _checked:
            probe(lease)
            _checked = True


def reset() -> None:
    """Forget an earlier successful probe (tests, and `make sandbox` after it changed the host)."""
    global _checked
    with _checked_lock:
        _checked = False
