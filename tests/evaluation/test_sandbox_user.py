"""A root parent runs its evaluation children as the unprivileged sandbox user, so the OS holds with every
Python guard switched off: file permissions keep root's files closed and RLIMIT_NPROC stops forks."""

from __future__ import annotations

import os
import textwrap

import pytest

from benchmark.evaluation import ErrorKind, evaluate
from benchmark.evaluation.sandbox_setup import var_dir
from benchmark.evaluation.sandbox_user import (
    ALLOW_ROOT_VARIABLE,
    USER_VARIABLE,
    lookup_sandbox_user,
    sandbox_user_name,
)
from tests.evaluation.conftest import ADD_REFERENCE, FAST_LIMITS, needs_root

# The static check, the kernel's restricted builtins and the audit hook all off: only the OS is left.
OS_LEVEL_ONLY = {"static": False, "imports": False, "audit": False}


def run(kernel: str):
    return evaluate(textwrap.dedent(kernel), ADD_REFERENCE, backend="null", limits=FAST_LIMITS, _guards=OS_LEVEL_ONLY)


def kernel_reading(path_expression: str) -> str:
    return f'''
        import os
        import numpy as np

        def kernel(a, b):
            with open({path_expression}, "rb") as f:
                f.read()
            return a + b
    '''


@needs_root
def test_a_root_parent_runs_its_children_as_the_sandbox_user_without_groups_capabilities_or_new_privileges() -> None:
    user = lookup_sandbox_user(sandbox_user_name())
    assert user is not None, f"the sandbox user {sandbox_user_name()!r} does not exist: run `make sandbox`"
    result = run(f'''
        import os
        import numpy as np

        def kernel(a, b):
            with open("/proc/self/status") as f:
                status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
            seen = (os.getresuid(), os.getresgid(), os.getgroups(), int(status["CapEff"], 16),
                    int(status["CapPrm"], 16), status["NoNewPrivs"].strip())
            wanted = (({user.uid},) * 3, ({user.gid},) * 3, [], 0, 0, "1")
            if seen != wanted:
                raise RuntimeError(f"child credentials {{seen}}, wanted {{wanted}}")
            return a + b
    ''')
    assert result.correct, result.error_message


@needs_root
def test_a_kernel_cannot_read_the_parents_environment_even_with_every_python_guard_off() -> None:
    result = run(kernel_reading('f"/proc/{os.getppid()}/environ"'))
    assert result.error_kind is ErrorKind.RUNTIME_ERROR
    assert "PermissionError" in result.error_message and "/environ" in result.error_message


@needs_root
@pytest.mark.parametrize("name", ["secret_key", "accelopt.sqlite3"])
def test_a_kernel_cannot_read_the_projects_secret_key_or_database_even_with_every_python_guard_off(name) -> None:
    path = var_dir() / name
    if not path.exists():
        pytest.skip(f"{path} does not exist on this host")
    result = run(kernel_reading(repr(str(path))))
    assert result.error_kind is ErrorKind.RUNTIME_ERROR
    assert "PermissionError" in result.error_message and name in result.error_message


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


def test_a_child_cannot_read_another_childs_memory_or_environment() -> None:
    # The reference child, a process of the same user, holds the expected outputs. Every reference child
    # on the host is tried (other evaluations may be running); at least this evaluation's one exists.
    result = run('''
        import os
        import time
        import numpy as np

        def kernel(a, b):
            tried = []
            for entry in os.listdir("/proc"):
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        args = f.read().split(b"\\0")
                except OSError:
                    continue
                if b"benchmark.evaluation.child" in args and b"reference" in args:
                    for name in ("mem", "environ"):
                        # Opening is the access check. A child of another evaluation that is still starting
                        # up (before its first act makes it non-dumpable) holds no expected outputs yet, so
                        # only a child that stays readable after that start-up window is a leak.
                        for attempt in range(2):
                            try:
                                open(f"/proc/{entry}/{name}", "rb").close()
                            except OSError:
                                break
                            if attempt == 0:
                                time.sleep(3.0)
                        else:
                            raise RuntimeError(f"opened /proc/{entry}/{name} of a reference child")
                    tried.append(entry)
            if not tried:
                raise RuntimeError("found no reference child")
            return a + b
    ''')
    assert result.correct, result.error_message


@needs_root
def test_a_missing_sandbox_user_is_an_infrastructure_error_that_says_how_to_fix_it(monkeypatch) -> None:
    monkeypatch.setenv(USER_VARIABLE, "accelopt-no-such-user")
    result = run("import numpy as np\n\ndef kernel(a, b):\n    return a + b\n")
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and not result.is_kernel_result
    message = result.error_message
    assert "'accelopt-no-such-user'" in message and "does not exist" in message
    assert "make sandbox" in message
    assert "useradd --system --no-create-home --shell /usr/sbin/nologin accelopt-no-such-user" in message
    assert f"{ALLOW_ROOT_VARIABLE}=1" in message


@needs_root
def test_the_explicit_opt_out_runs_children_as_root(monkeypatch) -> None:
    monkeypatch.setenv(USER_VARIABLE, "accelopt-no-such-user")
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "1")
    result = run('''
        import os
        import numpy as np

        def kernel(a, b):
            if os.getuid() != 0:
                raise RuntimeError(f"child uid {os.getuid()}")
            return a + b
    ''')
    assert result.correct, result.error_message


@needs_root
def test_an_opt_out_value_that_cannot_be_read_is_an_infrastructure_error_naming_it(monkeypatch) -> None:
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "maybe")
    result = run("import numpy as np\n\ndef kernel(a, b):\n    return a + b\n")
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR
    assert ALLOW_ROOT_VARIABLE in result.error_message and "'maybe'" in result.error_message


@needs_root
def test_the_sandbox_user_has_no_access_to_the_var_directory() -> None:
    # The setup step takes "other" access away from var/ (the database is created world-readable).
    assert not os.stat(var_dir()).st_mode & 0o007, f"run `make sandbox`: {var_dir()} is open to other users"
