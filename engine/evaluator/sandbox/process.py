"""The sandboxed child process: its own namespaces (network, PID, IPC, mount, user; isolation.py), a uid of
its own when the parent is root (sandbox/user.py), OS limits, a scrubbed environment, a private empty /tmp,
and pipes (never files) to talk through.

`ChildProcess.request()` sends one message and waits for the reply until the child's wall deadline; at the
deadline, or when the child is closed, the whole process group is killed with SIGKILL. The group is led
by bubblewrap; its death takes the child's PID namespace, and so everything the child started, with it.
One case escapes that: a bwrap killed while it sets its child up (before the child's parent-death signal is
armed) leaves the child in a session of its own, or waiting forever for the dead bwrap. So a waiting parent
also watches the leader (its exit is the child's death), and a kill also kills every process in the
child's memory cgroup (cgroups.py), where there is one.
An evaluation stopped from another thread (a cancelled run's, `Cancellation`) has its children's groups
killed the same way; the evaluating thread then finds them dead and starts no new one.
Under the opt-out (`ACCELOPT_SANDBOX_ALLOW_ROOT=1`) the child is started directly, in a private host
directory, and the process group is what contains it.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from engine.evaluator import protocol
from engine.evaluator.sandbox import cgroups, isolation, seccomp
from engine.evaluator.sandbox.isolation import PROJECT_ROOT
from engine.evaluator.sandbox.user import SETUP_COMMAND, UidLease, lease_uid

# How often a waiting parent checks that the child's sandbox leader still runs, and how long it waits for a
# killed leader to be reaped.
_LEADER_CHECK_SECONDS = 0.5
_REAP_SECONDS = 10.0
_LEADER_EXIT_SECONDS = 1.0  # a leader whose child died reaps it and exits within milliseconds
# The request and reply pipes hold this much (Linux's default is 64 KiB, the unprivileged maximum 1 MiB): a
# full-size seed's arrays cross in 16 times fewer reads and wake-ups (silu full: about 23,000 at 64 KiB).
PIPE_BYTES = 1 << 20

# The whole environment a child sees. Nothing else from the parent's environment passes: no API keys, no
# DATABASE_URL, no secret key, no proxy settings.
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


@dataclass(frozen=True)
class Limits:
    """Per-child limits. Defaults suit the mini shapes; full-size cases need more memory and time."""

    wall_seconds: float = 120.0  # whole evaluation, per child
    cpu_seconds: int = 120
    memory_bytes: int = 4 * 1024**3  # RLIMIT_AS: address space, so numpy's allocations count
    # Physical memory of the child and all it starts (a memory cgroup, cgroups.py); None: memory_bytes. Set
    # apart where the address space must be huge (a CUDA or Neuron driver reserves terabytes it never touches).
    resident_bytes: int | None = None
    # Cores the child and all it starts may use at once (its cpu cgroup, cgroups.py); None: no such group,
    # for children held to one process (`processes`), which cannot use more than one.
    cpus: float | None = None
    open_files: int = 64
    file_bytes: int = 1024**2  # RLIMIT_FSIZE: a child has nothing to write
    processes: int = 1  # RLIMIT_NPROC: no fork (ignored by Linux for root: hence a uid of its own)
    scratch_bytes: int = 64 * 1024**2  # size of the child's private /tmp (memory: a tmpfs)
    max_message_bytes: int = 2 * 1024**3  # largest reply the parent will read from a child
    infrastructure_retries: int = 2  # extra attempts after an infrastructure failure

    def resident_limit(self) -> int:
        return self.resident_bytes if self.resident_bytes is not None else self.memory_bytes

    def child_config(self) -> dict[str, int]:
        return {k: int(v) for k, v in asdict(self).items()
                if k in ("cpu_seconds", "memory_bytes", "open_files", "file_bytes", "processes")}


class ChildError(Exception):
    """The child could not answer. `kind` is "timeout", "resource_limit" or "infrastructure_error"."""

    def __init__(self, kind: str, message: str, diagnostics: str = "", exit_status: int | None = None, *,
                 started: bool = False, ours: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.diagnostics = diagnostics
        # Set when the child, once started, ended its process itself (an exit status, not a signal): whose
        # doing that is depends on what ran in it (pipeline.child_failed).
        self.exit_status = exit_status
        # The parent's own evidence: `started`, the child's first frame (protocol.HELLO_HEADER, written by our
        # code before any request was read) arrived, so the sandbox did start; `ours`, the parent itself
        # killed the child (a cancelled evaluation) before this failure was seen.
        self.started = started
        self.ours = ours


class EvaluationCancelled(ChildError):
    """A child was to start for an evaluation already cancelled (`Cancellation`)."""

    def __init__(self, role: str) -> None:
        super().__init__("infrastructure_error", f"the evaluation was cancelled before its {role} started")


# Refuses a reply by its header and array listing before any array is read: a message, or None to read it.
ReplyCheck = Callable[[dict[str, Any], list[tuple[str, np.dtype, tuple[int, ...]]]], "str | None"]

_current = threading.local()  # the Cancellation of the evaluation this thread runs, if any


class Cancellation:
    """Stops one evaluation from another thread: `cancel()` kills the sandbox children it has started and
    refuses new ones. The evaluating thread makes it current with `active()`; every ChildProcess started
    in that thread while it is current registers with it (LocalExecutor: a cancelled future's evaluation)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._children: set[ChildProcess] = set()
        self.cancelled = False

    @contextlib.contextmanager
    def active(self) -> Iterator[Cancellation]:
        previous = getattr(_current, "cancellation", None)
        _current.cancellation = self
        try:
            yield self
        finally:
            _current.cancellation = previous

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            children = list(self._children)
        for child in children:
            child.interrupt()

    def _register(self, child: ChildProcess) -> bool:
        """False (nothing registered) once cancelled: the caller closes the child it just started."""
        with self._lock:
            if not self.cancelled:
                self._children.add(child)
            return not self.cancelled

    def _forget(self, child: ChildProcess) -> None:
        with self._lock:
            self._children.discard(child)


def _widen_pipe(fd: int) -> None:
    """Let the pipe hold PIPE_BYTES. Where the host refuses (its pipe-max-size is lower, or this user's pipe
    memory is spent), the pipe keeps its size: slower for large arrays, never wrong."""
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: a Python without F_SETPIPE_SZ
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)


def child_environment(private_dir: str, extras: isolation.SandboxExtras | None = None) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": PROJECT_ROOT,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "HOME": private_dir,
        "TMPDIR": private_dir,
    }
    env.update({name: "1" for name in _THREAD_VARS})
    if extras is not None:  # a backend's declared additions (SandboxExtras), nothing from our own environment
        env.update(dict(extras.environment))
        env["PYTHONPATH"] = os.pathsep.join([*extras.python_path, PROJECT_ROOT])
    return env


def _kill_children_of(leader: int) -> bool:
    """SIGKILL the processes `leader` started (bubblewrap's init); whether there were any. Pinned by
    pidfds, so a pid that exited and was reused meanwhile is left alone (its parent is no longer ours)."""
    try:
        with open(f"/proc/{leader}/task/{leader}/children") as f:
            children = [int(pid) for pid in f.read().split()]
    except OSError:
        return False
    for pid in children:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == leader:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(pidfd)
    return bool(children)


class _StderrTail(threading.Thread):
    """Keeps the last bytes the child wrote to stderr (kernel prints, Python crash reports).

    It reads the pipe's descriptor itself and can be stopped: a buffered reader would hold its lock through
    a blocking read, and closing it would then wait for as long as any process still held the pipe.
    """

    def __init__(self, fd: int, keep: int = 64 * 1024) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.chunks: collections.deque[bytes] = collections.deque()
        self.size = 0
        self.keep = keep
        self._stopped = threading.Event()

    def run(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.fd, selectors.EVENT_READ)
            while not self._stopped.is_set():
                if not selector.select(0.1):
                    continue
                try:
                    chunk = os.read(self.fd, 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                self.chunks.append(chunk)
                self.size += len(chunk)
                while self.size > self.keep and len(self.chunks) > 1:
                    self.size -= len(self.chunks.popleft())

    def stop(self) -> None:
        """Stop reading (within a tenth of a second), whether or not the pipe is still open."""
        self._stopped.set()
        self.join(1.0)

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")[-self.keep:]


class ChildProcess:
    """One sandboxed `engine.evaluator.child` process with a given role."""

    def __init__(self, role: str, config: dict[str, Any], limits: Limits,
                 extras: isolation.SandboxExtras | None = None, name: str = "") -> None:
        """`role`: a generic role ("kernel") or a platform's own ("module:Class", engine.evaluator.child);
        `name`: how messages call the child (default: the role); `extras`: what the backend shares with this
        child beyond the sandbox (isolation.SandboxExtras)."""
        self.role = name or role
        self.limits = limits
        self.deadline = time.monotonic() + limits.wall_seconds
        self.isolated = isolation.isolation_required()
        self.lease: UidLease | None = None  # the uid this child runs as, when the parent is root
        self.private_dir: str | None = None  # a host directory, only under the opt-out
        self.cgroup: cgroups.ChildCgroup | None = None  # None where the host lets us make no cgroup
        self.killed_by_us = False
        self._cpu_seconds_used = 0.0
        self._reap_lock = threading.Lock()  # interrupt() never signals a group whose leader was reaped
        self._cancellation: Cancellation | None = getattr(_current, "cancellation", None)
        if self._cancellation is not None and self._cancellation.cancelled:
            raise EvaluationCancelled(self.role)
        self._started = False  # the child's hello frame arrived (protocol.HELLO_HEADER)
        full_config = dict(config, limits=limits.child_config())
        # -s: no user site; -B: no .pyc writes; -P: the cwd is not on sys.path.
        argv = [sys.executable, "-s", "-B", "-P", "-m", "engine.evaluator.child", role, json.dumps(full_config)]
        filter_fd = None  # the seccomp filter's BPF, for bubblewrap to read (seccomp.py)
        try:
            if self.isolated:
                if os.geteuid() == 0:
                    self.lease = lease_uid()
                isolation.ensure_available(self.lease)
                try:
                    filter_fd = seccomp.filter_fd()
                except seccomp.SeccompUnavailable as exc:
                    raise isolation.SandboxUnavailable(f"the sandbox's seccomp filter cannot be built: {exc}. "
                                                       f"Fix: {isolation.INSTALL_HINT}") from None
                argv = isolation.command(argv, limits.scratch_bytes, extras, filter_fd)
                cwd, home = "/", isolation.SCRATCH
            else:
                self.private_dir = tempfile.mkdtemp(prefix=f"accelopt-{self.role}-")
                os.chmod(self.private_dir, 0o700)
                cwd = home = self.private_dir
            self.cgroup = cgroups.ChildCgroup.create(limits.resident_limit(), self.lease.uid if self.lease else None,
                                                     cpus=limits.cpus)
            if self.cgroup is not None:
                argv = self.cgroup.joining(argv)
            # No ids to change, no preexec_fn: CPython starts it with vfork(), never fork() (isolation.run_as).
            self.proc = subprocess.Popen(
                isolation.run_as(self.lease, argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=cwd, env=child_environment(home, extras), start_new_session=True,
                close_fds=True, pass_fds=(filter_fd,) if filter_fd is not None else (),
            )
        except BaseException:  # a uid that cannot run `unshare` is found by ensure_available's probe
            self._release()
            raise
        finally:
            if filter_fd is not None:
                os.close(filter_fd)  # the child has its own copy
        self.pgid = self.proc.pid  # start_new_session: the child (or its bwrap) leads its own session and group
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            os.set_blocking(stream.fileno(), False)
        for stream in (self.proc.stdin, self.proc.stdout):
            _widen_pipe(stream.fileno())
        self.stderr = _StderrTail(self.proc.stderr.fileno())
        self.stderr.start()
        if self._cancellation is not None and not self._cancellation._register(self):
            self.close()  # cancelled while it started
            raise EvaluationCancelled(role)

    def _release(self) -> None:
        """Give back what the child held on the host: its uid, or (opt-out) its directory."""
        if self.private_dir is not None:
            shutil.rmtree(self.private_dir, ignore_errors=True)
            self.private_dir = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.lease is not None:
            self.lease.release()

    def restart_clock(self) -> None:
        """Give a child that waited for others (the profiler) its full wall time for its own work."""
        self.deadline = time.monotonic() + self.limits.wall_seconds

    # -- messaging --------------------------------------------------------------------------------

    def request(self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None, *,
                max_reply_bytes: int | None = None,
                check: ReplyCheck | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Send one message, return the reply. A reply over `max_reply_bytes` (default: the limit), or one
        `check` refuses, is refused before it is read, so a child cannot make the parent allocate without bound."""
        self.send(header, arrays)
        return self.receive(max_reply_bytes=max_reply_bytes, check=check)

    def send(self, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
        """The request half: a caller may drop its arrays before `receive` so both never coexist."""
        head, views = protocol.frame_parts(header, arrays)
        self._send(memoryview(head))
        for view in views:
            self._send(view)

    def receive(self, *, max_reply_bytes: int | None = None,
                check: ReplyCheck | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """One reply. `check(header, layout)` may refuse it by its header and array listing, before any array
        is read (a message naming what is wrong, or None)."""
        self._await_hello()
        head_len, payload_len = protocol.unpack_frame_header(self._receive(protocol.FRAME_HEADER_SIZE))
        limit = min(max_reply_bytes or self.limits.max_message_bytes, self.limits.max_message_bytes)
        try:
            protocol.check_frame_sizes(head_len, payload_len, limit)
        except protocol.ProtocolError as exc:
            self.kill()
            raise ChildError("resource_limit", f"the {self.role}'s reply is too large: {exc}", started=True) from None
        try:
            header, layout = protocol.parse_header(self._receive(head_len), payload_len)
        except protocol.ProtocolError as exc:
            problem: str | None = str(exc)
        else:
            try:
                problem = check(header, layout) if check is not None else None
            except Exception as exc:  # noqa: BLE001 - values of types the check did not expect (a list as a kind)
                problem = f"a header the check cannot read ({type(exc).__name__}: {exc})"
        if problem:
            self.kill()
            raise ChildError("infrastructure_error", f"the {self.role}'s reply is malformed: {problem}",
                             started=True) from None
        arrays = protocol.read_arrays(layout, self._receive_into)
        return header, arrays

    def _await_hello(self) -> None:
        """Read the child's first frame once. Only our code writes it, so anything else there is ours to fix."""
        if self._started:
            return
        hello = protocol.hello_frame()
        if self._receive(len(hello)) != hello:
            self.kill()
            raise ChildError("infrastructure_error", f"the {self.role} child did not start with its hello frame")
        self._started = True

    def _hello_in_pipe(self) -> bool:
        """Whether the child got as far as its hello (read now, without waiting, if it is still in the pipe)."""
        if not self._started:
            hello = protocol.hello_frame()
            with contextlib.suppress(OSError):
                self._started = os.read(self.proc.stdout.fileno(), len(hello)) == hello
        return self._started

    def _send(self, view: memoryview) -> None:
        fd = self.proc.stdin.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_WRITE)
            while view:
                self._wait_until_ready(selector, "while receiving its request")
                try:
                    written = os.write(fd, view[:1 << 20])
                except BlockingIOError:
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    raise self._died("while receiving its request") from None
                view = view[written:]

    def _receive(self, size: int) -> bytes:
        buffer = bytearray(size)
        self._receive_into(memoryview(buffer))
        return bytes(buffer)

    def _receive_into(self, view: memoryview) -> None:
        """Fill `view` from the child's pipe before the deadline (straight into the caller's buffer)."""
        fd = self.proc.stdout.fileno()
        filled = 0
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while filled < view.nbytes:
                self._wait_until_ready(selector, "before answering")
                try:
                    count = os.readv(fd, [view[filled:]])
                except BlockingIOError:
                    continue
                if not count:
                    raise self._died("before answering")
                filled += count

    def _wait_until_ready(self, selector: selectors.BaseSelector, when: str) -> None:
        """Wait for the pipe. Two things end the wait early: the deadline, and the sandbox's leader exiting.
        A leader gone means the child is gone, or stuck where it can never answer: a bwrap killed while it
        set its child up leaves that child waiting for it forever, holding the pipes open."""
        while True:
            remaining = self._remaining()
            if selector.select(min(remaining, _LEADER_CHECK_SECONDS)):
                return
            if remaining <= _LEADER_CHECK_SECONDS:
                self._on_deadline()
            if self._leader_exited():
                raise self._died(when)

    def _leader_exited(self) -> bool:
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def _remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def _on_deadline(self) -> None:
        self.kill()
        raise ChildError("timeout", f"the {self.role} did not finish within the wall-clock limit of "
                                    f"{self.limits.wall_seconds:g} s; its process group was killed")

    def _died(self, when: str) -> ChildError:
        ours = self.killed_by_us  # before the kill below: a cancellation's interrupt() killed it
        code = self._wait_exit(2.0)
        started = self._hello_in_pipe()
        self.kill()
        self.stderr.join(1.0)
        tail = self.stderr.text()
        signalled = -code if code is not None and code < 0 else None
        if self.cgroup is not None and self.cgroup.oom_killed():
            return ChildError("resource_limit", f"the {self.role} ran out of its physical memory limit of "
                                                f"{self.limits.resident_limit() // 1024**2} MiB (its memory "
                                                "cgroup; the kernel killed it)", tail)
        if signalled == signal.SIGXCPU or (signalled == signal.SIGKILL and self._cpu_exhausted()):
            return ChildError("timeout", f"the {self.role} used its CPU-time limit of {self.limits.cpu_seconds} s",
                              tail)
        if "MemoryError" in tail or "Cannot allocate memory" in tail or "bad_alloc" in tail:
            return ChildError("resource_limit", f"the {self.role} ran out of its memory limit of "
                                                f"{self.limits.memory_bytes // 1024**2} MiB", tail)
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        hint = ""
        if self.isolated and not started and tail.lstrip().startswith(("bwrap:", "unshare:")):
            hint = (f"; its OS sandbox failed to start ({tail.strip().splitlines()[0]}): run `make sandbox` (or "
                    f"`{SETUP_COMMAND}`) as root")
        elif self.lease is not None and not started and "Permission denied" in tail:
            hint = (f"; uid {self.lease.uid} may be unable to read the Python installation or the project: run "
                    f"`make sandbox` (or `{SETUP_COMMAND}`) as root")
        exited = code if code is not None and code >= 0 and not hint else None
        return ChildError("infrastructure_error", f"the {self.role} evaluation process {how} {when}{hint}", tail,
                          exit_status=exited, started=started and not hint, ours=ours)

    def _cpu_exhausted(self) -> bool:
        # SIGKILL at the hard CPU limit looks like any other SIGKILL; the reaped child's rusage tells.
        return self._cpu_seconds_used >= self.limits.cpu_seconds - 0.5

    def _wait_exit(self, timeout: float) -> int | None:
        """Wait for the child to exit without reaping it (its pid keeps the group id reserved)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return self._unwrapped(self.proc.returncode)
            if info is not None:
                return self._unwrapped(info.si_status if info.si_code == os.CLD_EXITED else -info.si_status)
            time.sleep(0.01)
        return None

    def _unwrapped(self, code: int | None) -> int | None:
        """bwrap reports a child killed by signal N as exit status 128 + N: the child's fate, as Popen says it."""
        if self.isolated and code is not None and code > 128:
            return -(code - 128)
        return code

    # -- shutdown ---------------------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL the whole process group and everything in the child's memory cgroup, then reap the leader.

        The sandbox's pid 1 (the leader's one child, bubblewrap's init) dies first, alone: its death ends its
        PID namespace, and the leader reaps it and exits. Killed with the rest, it often saw the child die
        first and reported that to the leader, which then exited without reaping it: a zombie handed to the
        host's pid 1, which in a container may never reap it (one close in four, measured)."""
        if self.proc.returncode is None:
            self.killed_by_us = True
            if _kill_children_of(self.proc.pid):
                self._reap(_LEADER_EXIT_SECONDS)
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGKILL)
        if (group := self.cgroup) is not None:  # what escaped the group (see _wait_until_ready)
            group.kill_members()
        self._reap()

    def interrupt(self) -> None:
        """SIGKILL the whole group from another thread (a cancelled evaluation); the thread that owns the
        child then finds it dead and reaps it. Never once the leader is reaped: its pid may be reused."""
        with self._reap_lock:
            if self.proc.returncode is None:
                self.killed_by_us = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pgid, signal.SIGKILL)
        if (group := self.cgroup) is not None:  # read once: the owning thread may be releasing it
            group.kill_members()

    def _reap(self, seconds: float = _REAP_SECONDS) -> None:
        """Reap the killed leader; after `seconds` leave it unreaped (its pid stays ours) rather than wait
        forever on a process the kernel cannot kill."""
        with self._reap_lock:
            if self.proc.returncode is not None:
                return
            end, pause = time.monotonic() + seconds, 0.0005
            while True:
                try:
                    pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
                except ChildProcessError:
                    self.proc.wait()
                    return
                if pid:
                    self._cpu_seconds_used = usage.ru_utime + usage.ru_stime
                    self.proc.returncode = os.waitstatus_to_exitcode(status)
                    return
                if time.monotonic() > end:
                    return
                time.sleep(pause)
                pause = min(2 * pause, 0.05)

    def close(self) -> None:
        """Kill the child's whole group (forked leftovers die too) and remove its directory.

        No polite exit first: a child holds nothing worth flushing, and interpreter shutdown with numpy
        loaded costs a tenth of a second per child.
        """
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.stderr.stop()
        if not self.stderr.is_alive():  # never close a descriptor a live thread may still read
            self.proc.stderr.close()
        self._release()
        if self._cancellation is not None:
            self._cancellation._forget(self)

    def diagnostics(self) -> str:
        return self.stderr.text()

    def __enter__(self) -> ChildProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
