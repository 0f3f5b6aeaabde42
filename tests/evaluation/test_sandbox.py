"""The sandbox holds on its own: each run-time layer is tested with the layers above it switched off."""

from __future__ import annotations

import os
import textwrap
import time

from engine.evaluator import ErrorKind, EvaluationRequest, Limits, LocalExecutor, evaluate
from engine.evaluator.sandbox import isolation
from engine.evaluator.sandbox.user import ALLOW_ROOT_VARIABLE
from tests.evaluation.conftest import (
    ADD_REFERENCE,
    FAST_LIMITS,
    NUMPY_ADD_KERNEL,
    process_alive,
    running_as_root,
)

# Which layers stay on: the pipeline runs all of them; these switch the upper ones off.
NO_STATIC = {"static": False}
NO_STATIC_NO_IMPORTS = {"static": False, "imports": False}
OS_LEVEL_ONLY = {"static": False, "imports": False, "audit": False}


def run(kernel: str, guards: dict[str, bool] | None = None, **kwargs):
    kwargs.setdefault("limits", FAST_LIMITS)
    return evaluate(textwrap.dedent(kernel), ADD_REFERENCE, backend="null", _guards=guards, **kwargs)


def kernel_reporting(expression: str) -> str:
    """A kernel that is correct only if `expression` (evaluated in the child) is falsy."""
    return textwrap.dedent(f'''
        import os
        import numpy as np

        def kernel(a, b):
            if {expression}:
                return a - b
            return a + b
    ''')


def test_a_kernel_sees_none_of_the_parents_secrets(monkeypatch) -> None:
    secrets = {"OPENAI_API_KEY": "sk-test-secret", "DATABASE_URL": "postgres://u:p@db/x",
               "ACCELOPT_SECRET_KEY": "django-secret", "AWS_SECRET_ACCESS_KEY": "aws-secret"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    leaked = " or ".join(f"{value!r} in repr(dict(os.environ))" for value in secrets.values())
    result = run(kernel_reporting(leaked), guards=OS_LEVEL_ONLY)
    assert result.correct, result.error_message
    # and the environment is exactly the short list we give it
    result = run(kernel_reporting("set(os.environ) - {'PATH', 'LANG', 'PYTHONPATH', 'PYTHONDONTWRITEBYTECODE', "
                                  "'PYTHONNOUSERSITE', 'HOME', 'TMPDIR', 'OMP_NUM_THREADS', "
                                  "'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'NUMEXPR_NUM_THREADS', 'LC_CTYPE', "
                                  "'PWD'}"),  # PWD: bwrap's, the child's own /tmp
                 guards=OS_LEVEL_ONLY)
    assert result.correct, result.error_message


def test_a_kernel_cannot_read_the_parents_environment_through_proc() -> None:
    result = run('''
        import os
        import numpy as np

        def kernel(a, b):
            data = np.fromfile(f"/proc/{os.getppid()}/environ", dtype=np.uint8)
            return a + b
    ''', guards=NO_STATIC_NO_IMPORTS)
    assert result.error_kind is ErrorKind.REJECTED
    assert "/proc/" in result.error_message and "not allowed" in result.error_message


def test_a_kernel_runs_in_a_private_empty_scratch_directory_of_its_own() -> None:
    # Its own tmpfs, gone with it (test_isolation.py checks that the next evaluation finds nothing there).
    # A checkout under the host's /tmp shows there only as the mount points of our own read-only code.
    result = run(f'''
        import os
        import numpy as np
        SKELETON = {sorted(isolation.scratch_skeleton())!r}

        def kernel(a, b):
            listing = [n for n in os.listdir(".") if n not in SKELETON]
            with open("left-behind", "w") as f:  # the directory is the child's to write
                f.write("x")
            raise RuntimeError(f"{{os.getcwd()}} {{listing}} {{os.stat('.').st_uid == os.getuid()}} {{os.environ['HOME']}}")
    ''', guards=OS_LEVEL_ONLY)
    assert result.error_kind is ErrorKind.RUNTIME_ERROR
    assert result.error_message == "RuntimeError: /tmp [] True /tmp", result.error_message


def test_under_the_opt_out_a_kernel_runs_in_a_private_host_directory_removed_afterwards(child_writable_dir,
                                                                                        monkeypatch) -> None:
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "1")
    report = child_writable_dir / "cwd.txt"
    result = run(f'''
        import os
        import numpy as np

        def kernel(a, b):
            if os.path.exists({str(report)!r}):  # called once per seed: the first call reports
                return a + b
            listing = ",".join(os.listdir("."))
            with open("left-behind", "w") as f:
                f.write("x")
            with open({str(report)!r}, "w") as f:
                f.write(f"{{os.getcwd()}}\\n{{listing}}")
            return a + b
    ''', guards=OS_LEVEL_ONLY)
    assert result.correct, result.error_message
    cwd, listing = report.read_text().split("\n")
    assert os.path.basename(cwd).startswith("accelopt-kernel-") and listing == ""
    assert not os.path.exists(cwd)


def test_the_run_time_import_guard_refuses_os_even_without_the_static_check() -> None:
    result = run(NUMPY_ADD_KERNEL.replace("import numpy as np", "import numpy as np\nimport os"), guards=NO_STATIC)
    assert result.error_kind is ErrorKind.REJECTED
    assert "'os'" in result.error_message


def test_the_run_time_getattr_refuses_private_names_built_at_run_time() -> None:
    kernel = "import numpy as np\n\ndef kernel(a, b):\n    core = getattr(np, '_co' + 're')\n    return a + b\n"
    result = run(kernel, guards={"static": False, "audit": False})
    assert result.error_kind is ErrorKind.REJECTED
    assert "'_core'" in result.error_message


def test_fork_is_refused_by_the_audit_guard() -> None:
    result = run(kernel_reporting("os.fork() == 0"), guards=NO_STATIC_NO_IMPORTS)
    assert result.error_kind is ErrorKind.REJECTED
    assert "os.fork" in result.error_message


def test_a_forked_process_is_contained_and_dies_with_the_evaluation(child_writable_dir, monkeypatch) -> None:
    # Only the OS layer left, under the opt-out (no namespaces): the grandchild would sleep for ten
    # minutes; it writes its pid where the test can read it. Isolated, the fork is refused
    # (RLIMIT_NPROC, test_isolation.py) and the PID namespace would end it anyway; running the child as
    # root lets it happen, so the process group is what is tested.
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "1")
    pid_file = child_writable_dir / "grandchild.pid"
    result = run(f'''
        import os
        import time
        import numpy as np

        def kernel(a, b):
            pid = os.fork()
            if pid == 0:
                time.sleep(600)
                os._exit(0)
            with open({str(pid_file)!r}, "w") as f:
                f.write(str(pid))
            return a + b
    ''', guards=OS_LEVEL_ONLY)
    if result.error_kind is ErrorKind.RUNTIME_ERROR and not running_as_root:  # RLIMIT_NPROC refused it
        assert "BlockingIOError" in result.error_message or "Resource" in result.error_message
        return
    assert result.correct, result.error_message
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(pid), f"forked process {pid} outlived its evaluation"


def test_an_infinite_loop_is_killed_and_the_pool_keeps_serving() -> None:
    looping = EvaluationRequest(kernel_source="def kernel(a, b):\n    while True:\n        pass\n",
                                reference_source=ADD_REFERENCE, backend="null",
                                limits=Limits(wall_seconds=3, cpu_seconds=30))
    good = EvaluationRequest(kernel_source=NUMPY_ADD_KERNEL, reference_source=ADD_REFERENCE, backend="null",
                             limits=FAST_LIMITS)
    with LocalExecutor(max_workers=1) as pool:
        first, second = pool.map([looping, good])
    assert first.error_kind is ErrorKind.TIMEOUT
    assert second.correct


def test_unbounded_allocation_is_stopped_by_the_address_space_limit() -> None:
    result = run('''
        import numpy as np

        def kernel(a, b):
            hoard = []
            while True:
                hoard.append(np.ones((64, 1024, 1024), dtype=np.uint8))
    ''', guards=OS_LEVEL_ONLY, limits=Limits(wall_seconds=30, memory_bytes=1024**3))
    assert result.error_kind is ErrorKind.RESOURCE_LIMIT
