"""Run-time guards inside an evaluation child, installed after our own imports and before untrusted code.

Two layers on top of the OS limits (sandbox.py) and the static check (static_check.py):

* the kernel's module gets its own builtins: no open/exec/eval/compile/globals, an `__import__` that only
  admits the kernel import allow-list, a getattr that refuses private and dunder names (and those that
  lead to sys/os), and no setattr/delattr;
* an audit hook (PEP 578, cannot be removed once added) refuses, for the whole process, opening files
  outside the Python installation and our own code, any write, directory listing, process creation,
  sockets, ctypes and frame introspection.

Neither is a security boundary (CPython has no such thing), and nothing depends on them: they turn the
obvious escapes into an early, precise `rejected`. The boundary is the OS: the child's namespaces, its own
uid, its limits and its scrubbed environment (isolation.py, sandbox.py), tested with both guards off.
"""

from __future__ import annotations

import builtins
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.evaluator.static_check import _import_allowed, attribute_forbidden

_REMOVED_BUILTINS = ("open", "exec", "eval", "compile", "globals", "locals", "vars", "input", "breakpoint",
                     "help", "exit", "quit", "memoryview")

# Audit events refused outright after the guard is installed.
_DENIED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg",
    "subprocess.Popen", "pty.spawn", "os.chdir", "os.remove", "os.rename",
    "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.symlink", "os.link", "os.truncate", "os.startfile",
    "os.putenv", "os.unsetenv", "shutil.copyfile", "shutil.rmtree", "mmap.__new__",
    "sys._current_frames", "sys.setprofile", "sys.settrace", "sys.addaudithook", "resource.setrlimit",
    "resource.prlimit", "glob.glob", "urllib.Request", "ftplib.connect", "http.client.connect",
    "webbrowser.open",
})
_DENIED_PREFIXES = ("socket.", "ctypes.", "_ctypes.", "winreg.", "syslog.")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class GuardViolation(PermissionError):
    """Raised inside the child when untrusted code tries something the sandbox refuses."""


def _guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if level or not _import_allowed(name):
        raise ImportError(f"import of {name!r} is not allowed in a kernel (only numpy, math and the NKI namespaces)")
    return builtins.__import__(name, globals, locals, fromlist, level)


def _guarded_getattr(obj: Any, name: str, *default: Any) -> Any:
    if not isinstance(name, str) or attribute_forbidden(name):
        raise GuardViolation(f"getattr of attribute {name!r} is not allowed in a kernel")
    return getattr(obj, name, *default)


def kernel_builtins() -> dict[str, Any]:
    """The builtins namespace handed to the kernel's module."""
    namespace = dict(vars(builtins))
    for name in _REMOVED_BUILTINS:
        namespace.pop(name, None)
    namespace["__import__"] = _guarded_import
    namespace["getattr"] = _guarded_getattr
    namespace.pop("setattr")
    namespace.pop("delattr")
    return namespace


@dataclass(frozen=True)
class GuardAllowances:
    """What a backend's own SDK does in the kernel's process that the guard would otherwise refuse, declared by
    the backend (the neuron backend: neuronxcc compiles, writes its NEFF and trace, and starts the compiler and
    neuron-bench). Only these Python-level guards loosen, and only this far; the OS sandbox is unchanged."""

    read_roots: tuple[str, ...] = ()  # further directories the process may read (the SDK's packages, tools)
    write_roots: tuple[str, ...] = ()  # directories it may write, create, rename and remove in
    # Programs it may start: by file name (neuronx-cc, neuron-bench, ...), or by path (only that file).
    executables: tuple[str, ...] = ()
    native_code: bool = False  # ctypes, mmap and environment changes (the SDK's runtime bindings)


# os.chmod: tempfile chmods a directory its cleanup could not remove, and retries (seen on an H200).
_WRITE_EVENTS = frozenset({"os.mkdir", "os.remove", "os.rename", "os.rmdir", "os.chdir", "os.truncate", "os.chmod",
                           "shutil.copyfile", "shutil.rmtree", "glob.glob"})
_NATIVE_EVENTS = frozenset({"mmap.__new__", "os.putenv", "os.unsetenv"})
# Where an event carries a dir_fd: shutil.rmtree (tempfile.TemporaryDirectory's cleanup, around every build
# Triton runs) removes names relative to a directory it opened, so a name is judged by that directory's path.
_DIR_FD_ARGUMENT = {"os.remove": 1, "os.rmdir": 1, "os.mkdir": 2, "os.chmod": 2, "shutil.rmtree": 1}


def _fd_path(fd: int) -> str | None:
    """The path of an open file descriptor (a directory shutil.rmtree opened), or None."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except (OSError, ValueError):
        return None


def _event_path(path: Any, dir_fd: Any = None) -> str | None:
    """The path an event names: an open descriptor's own path, or a name relative to `dir_fd`'s directory."""
    if isinstance(path, int):
        return _fd_path(path)
    if not isinstance(path, (str, bytes, os.PathLike)):
        return None
    text = os.fsdecode(path)
    if isinstance(dir_fd, int) and not os.path.isabs(text):
        base = _fd_path(dir_fd)
        return None if base is None else os.path.join(base, text)
    return text


def install_audit_guard(read_roots: Iterable[str], allowances: GuardAllowances | None = None) -> None:
    """Refuse file, process, network and introspection events for the rest of this process's life (less what
    a backend's `allowances` name)."""
    allowed = allowances or GuardAllowances()
    roots = tuple(os.path.realpath(r).rstrip(os.sep) + os.sep for r in (*read_roots, *allowed.read_roots) if r)
    write_roots = tuple(os.path.realpath(r).rstrip(os.sep) + os.sep for r in allowed.write_roots if r)
    # An executable named by its path is admitted only at that path (Triton's bundled ptxas); a bare name
    # wherever it is found (neuronx-cc on PATH).
    programs = {os.path.realpath(p) for p in allowed.executables if os.sep in p}
    names = {p for p in allowed.executables if os.sep not in p}

    def readable(path: str) -> bool:
        real = os.path.realpath(path) + os.sep  # a root itself too (tempfile opens its directory first)
        return any(real.startswith(root) for root in roots + write_roots)

    def writable(path: Any, dir_fd: Any = None) -> bool:
        target = _event_path(path, dir_fd) if write_roots else None
        if target is None:
            return False
        real = os.path.realpath(target)
        return any((real + os.sep).startswith(root) for root in write_roots)

    def plantable(path: str, directory: bool = False) -> bool:
        """Whether this process could have put a program at `path` (or, for a directory, into it): under a
        write root, and writable here (a file, its directory, or the nearest existing ancestor of a path not
        there yet). A read-only bind inside a write root (the project or venv of a clone under /tmp, which
        the sandbox binds over its private /tmp) is not; the child's own scratch is."""
        if not writable(path):
            return False
        real = os.path.realpath(path)
        if os.path.lexists(real):
            probes = [real] if directory else [real, os.path.dirname(real)]
        else:
            while not os.path.lexists(real) and real != os.path.dirname(real):
                real = os.path.dirname(real)
            probes = [real]
        return any(os.access(p, os.W_OK) for p in probes)

    def may_start(program: Any, env: Any = None, cwd: Any = None, *, bare_in_cwd: bool = False) -> bool:
        """An admitted program, and never one the process could have written: a write root admits chmod, so
        a `gcc` planted there (or a PATH leading there) would otherwise pass as the host's."""
        if not isinstance(program, (str, bytes, os.PathLike)):
            return False
        name = os.fsdecode(program)
        if os.path.basename(name) not in names and os.path.realpath(name) not in programs:
            return False
        # Relative names from the directory the program starts in (Popen's cwd, else ours).
        base = os.fsdecode(cwd) if isinstance(cwd, (str, bytes, os.PathLike)) else os.getcwd()
        if os.sep in name:
            return not plantable(os.path.join(base, name))
        if bare_in_cwd and plantable(os.path.join(base, name)):  # os.execv("gcc") starts ./gcc
            return False
        # A bare name is searched on the PATH it starts with (Popen's env, else ours): no directory there
        # may be one the process writes in, so that none can come first. Only an env that answers the same
        # twice (Popen asks it again after us): a plain dict or os.environ, not an object of the kernel's.
        if env is not None and type(env) not in (dict, type(os.environ)):
            return False
        return not any(plantable(os.path.join(base, d), directory=True) for d in os.get_exec_path(env))

    def allowance(event: str, args: tuple[Any, ...]) -> bool:
        """True when the backend's allowances admit this event (checked before the refusals)."""
        if event == "os.rename":  # (src, dst, src_dir_fd, dst_dir_fd)
            padded = (*args, None, None, None, None)
            return writable(padded[0], padded[2]) and writable(padded[1], padded[3])
        if event in _WRITE_EVENTS:
            index = _DIR_FD_ARGUMENT.get(event)
            return bool(args) and writable(args[0], args[index] if index is not None and len(args) > index else None)
        if event == "subprocess.Popen":  # (executable, args, cwd, env): without an executable, argv[0]
            program = args[0] if args and args[0] else None
            if program is None and len(args) > 1 and args[1]:
                argv = args[1]
                program = argv.split()[0] if isinstance(argv, (str, bytes)) else next(iter(argv), None)
            padded = (*args, None, None, None, None)
            return may_start(program, env=padded[3], cwd=padded[2])
        if event in ("os.posix_spawn", "os.exec"):
            # os.execv and os.posix_spawn take a bare name from the working directory, posix_spawnp from PATH
            return bool(args) and may_start(args[0], bare_in_cwd=True)
        if allowed.native_code and (event in _NATIVE_EVENTS or event.startswith(("ctypes.", "_ctypes."))):
            return True
        return False

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if allowances is not None and event != "open" and allowance(event, args):
            return
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if isinstance(path, int):
                if allowed.executables:  # the pipes of a program the SDK started (subprocess wraps their fds)
                    return
                raise GuardViolation(f"opening file descriptor {path} is not allowed in the evaluation sandbox")
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            path_text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
            if writing and writable(path_text):
                return
            if path_text == os.devnull and allowed.executables:  # subprocess.DEVNULL (Triton's gcc build)
                return
            if writing or not readable(path_text):
                raise GuardViolation(f"opening {path_text!r} is not allowed in the evaluation sandbox")
        elif event in ("os.listdir", "os.scandir"):
            # The import system lists the directories on sys.path; nothing else may.
            # A descriptor (shutil.rmtree's os.scandir(fd)) by the directory it is open on.
            path = args[0] if args and args[0] is not None else "."
            target = _event_path(path)
            if target is None or not readable(target):
                raise GuardViolation(f"listing {path!r} is not allowed in the evaluation sandbox")
        elif event in _DENIED_EVENTS or event.startswith(_DENIED_PREFIXES):
            raise GuardViolation(f"{event} is not allowed in the evaluation sandbox")

    sys.addaudithook(hook)
