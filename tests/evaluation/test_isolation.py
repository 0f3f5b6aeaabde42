"""The OS isolation of evaluation children (issue 18), tested with every Python guard switched off.

Each attack kernel runs through the real evaluation path (`evaluate`) with the static check, the kernel's
restricted builtins and the audit hook all off, as if an attacker had found a way past them: only the
namespaces, the uid of its own and the limits are left. A kernel reports what it saw by raising
`RuntimeError("REPORT {json}")`, which comes back as the result's error message.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.evaluator import ErrorKind, Limits, evaluate
from engine.evaluator.sandbox import isolation
from engine.evaluator.sandbox.setup import var_dir
from engine.evaluator.sandbox.user import ALLOW_ROOT_VARIABLE, UIDS_VARIABLE, uid_range
from tests.evaluation.conftest import (
    ADD_REFERENCE,
    FAST_LIMITS,
    children_of_this_process,
    descendants,
    needs_root,
    process_alive,
    running_as_root,
)

# The static check, the kernel's restricted builtins and the audit hook all off: only the OS is left.
OS_LEVEL_ONLY = {"static": False, "imports": False, "audit": False}
SLOW_LIMITS = Limits(wall_seconds=90, cpu_seconds=90, memory_bytes=1024**3)


def run(kernel: str, reference: str = ADD_REFERENCE, limits: Limits = FAST_LIMITS, guards=OS_LEVEL_ONLY):
    return evaluate(textwrap.dedent(kernel), reference, backend="null", limits=limits, _guards=guards)


def report_of(result) -> dict:
    """The kernel's REPORT (see the module docstring)."""
    assert result.error_kind is ErrorKind.RUNTIME_ERROR and "REPORT " in result.error_message, (
        result.error_kind, result.error_message, result.error_detail)
    return json.loads(result.error_message.split("REPORT ", 1)[1])


def processes_of_uid(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid and process_alive(int(entry)):
                    found.append(int(entry))
            except OSError:
                continue
    return found


# -- who the child is --------------------------------------------------------------------------------

# The reference hands its own uid to the kernel as a third input, so the kernel can compare.
UID_REFERENCE = ADD_REFERENCE.replace("    return [a, b]\n", "    import os\n"
                                      "    return [a, b, np.array([os.getuid()], dtype=np.int64)]\n")
UID_REFERENCE = UID_REFERENCE.replace("def forward(a, b):", "def forward(a, b, uid):")


@needs_root
def test_each_child_runs_as_a_uid_of_its_own_without_groups_capabilities_or_new_privileges() -> None:
    result = run('''
        import json, os
        import numpy as np

        def kernel(a, b, reference_uid):
            with open("/proc/self/status") as f:
                status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            raise RuntimeError("REPORT " + json.dumps({
                "uids": os.getresuid(), "gids": os.getresgid(), "groups": os.getgroups(),
                "caps": [int(status[k], 16) for k in ("CapEff", "CapPrm", "CapInh", "CapAmb")],
                "no_new_privs": status["NoNewPrivs"].strip(), "reference_uid": int(reference_uid[0])}))
    ''', reference=UID_REFERENCE)
    seen = report_of(result)
    uid = seen["uids"][0]
    assert uid in uid_range(), f"uid {uid} is not one of {UIDS_VARIABLE}"
    assert seen["uids"] == [uid] * 3 and seen["gids"] == [uid] * 3 and seen["groups"] == []
    assert seen["caps"] == [0, 0, 0, 0] and seen["no_new_privs"] == "1"
    # The reference child of the same evaluation holds another uid: no child shares one with another.
    assert seen["reference_uid"] in uid_range() and seen["reference_uid"] != uid


def test_a_fork_bomb_is_stopped_by_the_process_limit() -> None:
    # Bounded, and each child exits at once, so a broken limit costs a few dozen short processes.
    result = run('''
        import os
        import numpy as np

        def kernel(a, b):
            for _ in range(64):
                if os.fork() == 0:
                    os._exit(0)
            return a + b
    ''')
    assert result.error_kind is ErrorKind.RUNTIME_ERROR
    assert "BlockingIOError" in result.error_message


# -- another evaluation running at the same time -----------------------------------------------------

# Correct, slow (a few seconds of pure Python over three seeds), and run with every guard on: the victim
# is an ordinary evaluation.
SLOW_VICTIM = '''
import numpy as np

def kernel(a, b):
    total = 0
    for i in range(15_000_000):
        total += i
    return a + b
'''

# Safe if the isolation ever broke: it signals only the victim evaluation's processes (never this test
# process, never a pid it merely sees), and it tries kill(-1), which would reach every process its uid may
# signal, only once it has seen that it is alone in a PID namespace. Unisolated as root, either would kill
# every process on the host.
NEIGHBOUR_ATTACK = '''
    import json, os, signal
    import numpy as np

    VICTIM, HOST = {victim}, {host}

    def kernel(a, b):
        me = os.getpid()
        visible = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        outcome = {{}}
        for pid in sorted(set(VICTIM) | set(HOST) | set(visible) - {{me, 1}}):
            for what in ("environ", "cmdline", "mem"):
                try:
                    with open(f"/proc/{{pid}}/{{what}}", "rb") as f:
                        f.read(16)
                    outcome[f"read {{pid}} {{what}}"] = "ok"
                except OSError as exc:
                    outcome[f"read {{pid}} {{what}}"] = type(exc).__name__
        for pid in VICTIM:  # only these: unisolated, the visible ones would be every process on the host
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                    outcome[f"signal {{pid}} {{int(sig)}}"] = "ok"
                except OSError as exc:
                    outcome[f"signal {{pid}} {{int(sig)}}"] = type(exc).__name__
        if visible == sorted({{1, me}}):  # every process this uid may signal, but init and itself
            try:
                os.kill(-1, signal.SIGKILL)
                outcome["kill -1"] = "ok"
            except OSError as exc:
                outcome["kill -1"] = type(exc).__name__
        raise RuntimeError("REPORT " + json.dumps({{"me": me, "visible": visible, "outcome": outcome}}))
'''


def test_a_kernel_can_neither_see_nor_signal_nor_read_an_evaluation_running_next_to_it() -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        victim = pool.submit(evaluate, SLOW_VICTIM, ADD_REFERENCE, backend="null", limits=SLOW_LIMITS)
        deadline = time.monotonic() + 60
        while not children_of_this_process("kernel") and time.monotonic() < deadline:
            time.sleep(0.05)
        (launcher,) = children_of_this_process("kernel")
        time.sleep(0.3)  # its bwrap has started the child by now
        # The attacker is told the victim's host pids (its bwrap, init and kernel child), to signal and read,
        # and this test's, to read.
        targets = sorted(descendants(launcher))
        attack = run(NEIGHBOUR_ATTACK.format(victim=targets, host=[os.getpid()]))
        victim_still_running = process_alive(launcher)
        result = victim.result()
    seen = report_of(attack)
    assert victim_still_running, "the victim finished before the attack; make SLOW_VICTIM slower"
    assert seen["visible"] == sorted({1, seen["me"]}), f"the attacker sees processes {seen['visible']}"
    assert [what for what, how in seen["outcome"].items() if how == "ok"] == []
    assert seen["outcome"]["kill -1"] == "ProcessLookupError"  # no process it may signal but init and itself
    for pid in targets:
        assert seen["outcome"][f"read {pid} environ"] == "FileNotFoundError"
        assert seen["outcome"][f"signal {pid} {int(signal.SIGKILL)}"] == "ProcessLookupError"
    assert seen["outcome"][f"read {os.getpid()} environ"] == "FileNotFoundError"
    # The neighbour's result is unchanged: correct at the first attempt.
    assert result.correct, result.error_message
    assert result.attempts == 1


FILE_MARKER_KERNEL = '''
    import json, os, time
    import numpy as np

    ME, OTHER = {me!r}, {other!r}

    def kernel(a, b):
        with open(f"/tmp/marker-{{ME}}", "w") as f:
            f.write(ME)
        # Where else could it leave a file? Asked, not tried, so a broken sandbox cannot litter the host.
        wrote = {{directory: "ok" for directory in (os.getcwd(), os.environ.get("HOME", "/tmp"), "/dev/shm", "/dev",
                                                   "/", {project!r}, {prefix!r}, "/var/tmp", "/run")
                 if os.access(directory, os.W_OK)}}
        started, saw_other, saw_own = time.time(), [], False
        while time.time() - started < 4.0:  # long enough to overlap with the other evaluation
            for directory in ("/tmp", "/dev/shm", "/var/tmp", {project!r}, "/"):
                try:
                    names = os.listdir(directory)
                except OSError:
                    continue
                saw_own = saw_own or f"marker-{{ME}}" in names
                if f"marker-{{OTHER}}" in names:
                    saw_other.append(directory)
            time.sleep(0.1)
        raise RuntimeError("REPORT " + json.dumps({{"wrote": wrote, "saw_other": saw_other, "saw_own": saw_own,
                                                   "window": [started, time.time()]}}))
'''


def test_files_one_evaluation_writes_are_invisible_to_another_running_at_the_same_time() -> None:
    token = os.urandom(4).hex()
    kernels = [FILE_MARKER_KERNEL.format(me=f"{token}-{me}", other=f"{token}-{other}", project=isolation.PROJECT_ROOT,
                                         prefix=os.path.realpath(sys.base_prefix))
               for me, other in (("a", "b"), ("b", "a"))]
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = [report_of(r) for r in pool.map(run, kernels)]
    (a_start, a_end), (b_start, b_end) = reports[0]["window"], reports[1]["window"]
    assert a_start < b_end and b_start < a_end, "the two evaluations did not run at the same time"
    for seen in reports:
        assert seen["saw_own"], seen
        assert seen["saw_other"] == [], f"an evaluation saw the other's file in {seen['saw_other']}"
        # Only the private /tmp (also the working directory and HOME) is writable.
        # (A checkout under the host's /tmp has its root inside the private /tmp: writable there, and private.)
        assert {d for d in seen["wrote"] if not d.startswith("/tmp/")} == {"/tmp"}, seen["wrote"]
    assert not [name for name in os.listdir("/tmp") if token in name], "a marker reached the host's /tmp"


def test_nothing_a_kernel_leaves_in_tmp_reaches_the_next_evaluation() -> None:
    token = os.urandom(4).hex()
    first = run(f'''
        import json, os
        import numpy as np

        def kernel(a, b):
            for path in ("/tmp/leftover-{token}", os.path.expanduser("~/leftover-{token}"), "leftover-{token}"):
                with open(path, "w") as f:
                    f.write("poison")
            os.makedirs("/tmp/dir-{token}", exist_ok=True)
            raise RuntimeError("REPORT " + json.dumps({{"uid": os.getuid(), "tmp": sorted(os.listdir("/tmp"))}}))
    ''')
    seen = report_of(first)
    assert f"leftover-{token}" in seen["tmp"] and f"dir-{token}" in seen["tmp"]
    second = run('''
        import json, os
        import numpy as np

        def kernel(a, b):
            raise RuntimeError("REPORT " + json.dumps({"tmp": os.listdir("/tmp"), "cwd": os.getcwd(),
                                                       "cwd_files": os.listdir(".")}))
    ''')
    report = report_of(second)
    # A checkout under the host's /tmp shows up as the read-only mount points of our own code, nothing else.
    skeleton = isolation.scratch_skeleton()
    assert set(report["tmp"]) - skeleton == set() and report["cwd"] == "/tmp"
    assert set(report["cwd_files"]) - skeleton == set()
    assert not [name for name in os.listdir("/tmp") if token in name], "the leftover reached the host's /tmp"
    if running_as_root:  # and the first child itself is gone: no process of its uid is left
        deadline = time.monotonic() + 3
        while processes_of_uid(seen["uid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_of_uid(seen["uid"]) == []


# -- the network ---------------------------------------------------------------------------------------


def test_a_kernel_cannot_reach_a_server_on_the_hosts_loopback_or_an_abstract_socket() -> None:
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    abstract_name = f"\0accelopt-test-{os.urandom(4).hex()}"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(abstract_name)
    unix.listen(8)
    accepted: list[str] = []

    def serve(server: socket.socket, name: str) -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            accepted.append(name)
            connection.close()

    stop = threading.Event()
    servers = [threading.Thread(target=serve, args=(s, n), daemon=True) for s, n in ((tcp, "tcp"), (unix, "unix"))]
    for thread in servers:
        thread.start()
    port = tcp.getsockname()[1]
    try:
        result = run(f'''
            import json, socket
            import numpy as np

            def kernel(a, b):
                outcome = {{}}
                for name, family, address in (("tcp", socket.AF_INET, ("127.0.0.1", {port})),
                                              ("tcp6", socket.AF_INET6, ("::1", {port})),
                                              ("unix", socket.AF_UNIX, {abstract_name!r})):
                    try:
                        s = socket.socket(family, socket.SOCK_STREAM)
                        s.settimeout(3)
                        s.connect(address)
                        outcome[name] = "connected"
                    except OSError as exc:
                        outcome[name] = exc.strerror or type(exc).__name__
                try:
                    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    u.sendto(b"x", ("127.0.0.1", {port}))
                    outcome["udp"] = "sent"
                except OSError as exc:
                    outcome["udp"] = exc.strerror
                outcome["interfaces"] = [name for _, name in socket.if_nameindex()]
                raise RuntimeError("REPORT " + json.dumps(outcome))
        ''')
    finally:
        stop.set()
        for thread in servers:
            thread.join(2)
        tcp.close()
        unix.close()
    seen = report_of(result)
    assert accepted == []
    assert seen["tcp"] == "Network is unreachable" and seen["udp"] == "Network is unreachable", seen
    assert seen["tcp6"] in ("Network is unreachable", "Cannot assign requested address"), seen
    assert seen["unix"] == "Connection refused", seen  # abstract sockets belong to the network namespace
    assert seen["interfaces"] == ["lo"]  # and it is down: 127.0.0.1 is unreachable


# -- the host's files ----------------------------------------------------------------------------------


def test_a_kernel_sees_neither_the_projects_database_and_secret_key_nor_any_other_host_file() -> None:
    # A world-readable secret in the host's /tmp: file permissions would not stop a reader, the mount does.
    planted = Path(tempfile.mkdtemp(prefix="accelopt-test-secret-"))
    os.chmod(planted, 0o755)
    secret = planted / "secret.txt"
    secret.write_text("secret")
    os.chmod(secret, 0o644)
    paths = [str(var_dir() / "secret_key"), str(var_dir() / "accelopt.sqlite3"), str(var_dir()), str(secret),
             "/root/.bashrc", "/etc/passwd", "/home", "/run", "/sys/class/net", f"/proc/{os.getpid()}/environ",
             os.path.join(isolation.PROJECT_ROOT, "manage.py")]
    try:
        result = run(f'''
            import json, os
            import numpy as np

            def kernel(a, b):
                outcome = {{}}
                for path in {paths!r}:
                    try:
                        with open(path, "rb") as f:
                            f.read(1)
                        outcome[path] = "read"
                    except OSError as exc:
                        outcome[path] = type(exc).__name__
                listing = {{p: sorted(os.listdir(p)) for p in ("/", "/root", {isolation.PROJECT_ROOT!r})}}
                raise RuntimeError("REPORT " + json.dumps({{"outcome": outcome, "listing": listing}}))
        ''')
    finally:
        secret.unlink()
        planted.rmdir()
    seen = report_of(result)
    assert set(seen["outcome"].values()) == {"FileNotFoundError"}, seen["outcome"]
    # The root holds the system directories and the first component of each bound path, nothing else.
    allowed = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp"}
    allowed |= {p.split("/")[1] for p in isolation.visible_paths()}
    assert set(seen["listing"]["/"]) <= allowed and "home" not in seen["listing"]["/"], seen["listing"]
    assert seen["listing"]["/root"] in ([], [".pyenv"]), seen["listing"]  # only a path to the interpreter
    assert seen["listing"][isolation.PROJECT_ROOT] == sorted(
        os.path.relpath(p, isolation.PROJECT_ROOT).split("/")[0] for p in isolation.visible_paths()
        if p.startswith(isolation.PROJECT_ROOT + "/"))  # the package (and the venv, if it lives there)
    assert "var" not in seen["listing"][isolation.PROJECT_ROOT]


# -- refusing to run without isolation -----------------------------------------------------------------


@pytest.fixture
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Forget this process's earlier successful probe, for this test and after it."""
    monkeypatch.setattr(isolation, "_checked", False)
    yield
    isolation.reset()


def fake_unshare(directory: Path, stderr: str) -> str:
    """An `unshare` that fails the way the real one does on a host without user namespaces."""
    os.chmod(directory, 0o755)  # the leased uid runs it
    path = directory / "unshare"
    path.write_text(f"#!/bin/sh\necho {stderr!r} >&2\nexit 1\n")
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return str(path)


def test_without_user_namespaces_evaluation_refuses_with_what_to_enable(monkeypatch, fresh_probe) -> None:
    directory = Path(tempfile.mkdtemp(prefix="accelopt-test-unshare-"))
    try:
        unshare = fake_unshare(directory, "unshare: unshare failed: Operation not permitted")
        monkeypatch.setattr(isolation, "tools", lambda: {"bwrap": "/usr/bin/bwrap", "unshare": unshare})
        result = run("import numpy as np\n\ndef kernel(a, b):\n    return a + b\n", guards=None)
    finally:
        for entry in directory.iterdir():
            entry.unlink()
        directory.rmdir()
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and not result.is_kernel_result
    message = result.error_message
    assert "Operation not permitted" in message and "unprivileged user namespaces" in message
    assert "kernel.unprivileged_userns_clone=1" in message and "make sandbox" in message
    assert f"{ALLOW_ROOT_VARIABLE}=1" in message and "without OS isolation" in message


def test_without_bubblewrap_evaluation_refuses_and_says_what_to_install(monkeypatch, fresh_probe) -> None:
    monkeypatch.setattr(isolation, "tools", lambda: {"bwrap": None, "unshare": "/usr/bin/unshare"})
    result = run("import numpy as np\n\ndef kernel(a, b):\n    return a + b\n", guards=None)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and not result.is_kernel_result
    message = result.error_message
    assert "`bwrap` is not installed" in message and "apt-get install -y bubblewrap" in message
    assert "make sandbox" in message and f"{ALLOW_ROOT_VARIABLE}=1" in message


def test_the_explicit_opt_out_runs_children_without_isolation(monkeypatch) -> None:
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "1")
    monkeypatch.setattr(isolation, "tools", lambda: {"bwrap": None, "unshare": None})  # never consulted
    result = run('''
        import json, os
        import numpy as np

        def kernel(a, b):
            raise RuntimeError("REPORT " + json.dumps({"uid": os.getuid(),
                                                       "pids": [p for p in os.listdir("/proc") if p.isdigit()]}))
    ''')
    seen = report_of(result)
    assert seen["uid"] == os.getuid()
    assert str(os.getpid()) in seen["pids"]  # it sees the host's processes, this one included


def test_an_opt_out_value_that_cannot_be_read_is_an_infrastructure_error_naming_it(monkeypatch) -> None:
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "maybe")
    result = run("import numpy as np\n\ndef kernel(a, b):\n    return a + b\n")
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR
    assert ALLOW_ROOT_VARIABLE in result.error_message and "'maybe'" in result.error_message


@needs_root
def test_the_var_directory_is_closed_to_other_users() -> None:
    # Defence in depth (children cannot see it at all): the setup step takes "other" access away.
    assert not os.stat(var_dir()).st_mode & 0o007, f"run `make sandbox`: {var_dir()} is open to other users"
