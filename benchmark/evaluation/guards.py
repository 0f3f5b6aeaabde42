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
from typing import Any

from benchmark.evaluation.static_check import _import_allowed, attribute_forbidden

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


def install_audit_guard(read_roots: Iterable[str]) -> None:
    """Refuse file, process, network and introspection events for the rest of this process's life."""
    roots = tuple(os.path.realpath(r).rstrip(os.sep) + os.sep for r in read_roots if r)

    def readable(path: str) -> bool:
        real = os.path.realpath(path)
        return any(real.startswith(root) for root in roots)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if isinstance(path, int):
                raise GuardViolation(f"opening file descriptor {path} is not allowed in the evaluation sandbox")
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            path_text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
            if writing or not readable(path_text):
                raise GuardViolation(f"opening {path_text!r} is not allowed in the evaluation sandbox")
        elif event in ("os.listdir", "os.scandir"):
            # The import system lists the directories on sys.path; nothing else may.
            path = args[0] if args and args[0] is not None else "."
            if isinstance(path, int) or not readable(os.fsdecode(path)):
                raise GuardViolation(f"listing {path!r} is not allowed in the evaluation sandbox")
        elif event in _DENIED_EVENTS or event.startswith(_DENIED_PREFIXES):
            raise GuardViolation(f"{event} is not allowed in the evaluation sandbox")

    sys.addaudithook(hook)
