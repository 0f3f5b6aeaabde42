"""The audit guard with the cuda backend's allowances (triton.roles.cuda_allowances): what Triton's compile and
launcher build do in the kernel's process passes (each step below failed on an H200 or in the sandbox on the
CPU before it was admitted), and nothing around it: no chmod, listing or removal outside the write roots, no
program but Triton's own tools at their own paths, the C compiler and ldconfig (not nvidia-smi: the parent
reads the clocks)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.triton.toolchain import bundled_ptxas

_PROBE = textwrap.dedent("""
    import json, os, subprocess, sys, tempfile
    from engine.evaluator.sandbox.guards import install_audit_guard
    from engine.platforms.triton.roles import cuda_allowances
    from engine.platforms.triton.timing import nvidia_smi
    scratch, outside, ptxas = sys.argv[1], sys.argv[2], sys.argv[3]
    outside_fd = os.open(outside, os.O_RDONLY)  # opened before the guard, as shutil.rmtree opens its directory
    install_audit_guard([sys.prefix, sys.base_prefix], cuda_allowances() if sys.argv[4] == "1" else None)
    outcome = {}
    def attempt(name, action):
        try:
            action()
            outcome[name] = "allowed"
        except OSError:  # the guard's PermissionError, or tempfile finding no directory it may use
            outcome[name] = "refused"
    def temporary_directory():  # Triton's launcher build and its cache's writes: make, fill, remove
        with tempfile.TemporaryDirectory() as directory:
            with open(os.path.join(directory, "cuda_utils.c"), "w") as f:
                f.write("int x;")
    attempt("a temporary directory, filled and removed", temporary_directory)
    attempt("a temporary file opened for reading", lambda: tempfile.NamedTemporaryFile(mode="r", delete=False).close())
    attempt("chmod in the cache", lambda: os.chmod(os.path.join(scratch, "cuda_utils.so"), 0o755))
    attempt("open /dev/null for writing", lambda: os.close(os.open(os.devnull, os.O_RDWR)))
    attempt("start Triton's ptxas", lambda: subprocess.run([ptxas, "--version"], capture_output=True, check=True))
    attempt("chmod elsewhere", lambda: os.chmod(outside, 0o777))
    attempt("list a directory elsewhere by descriptor", lambda: list(os.scandir(outside_fd)))
    attempt("remove a file elsewhere by descriptor", lambda: os.unlink("victim", dir_fd=outside_fd))
    attempt("start a ptxas the kernel wrote", lambda: subprocess.run([os.path.join(scratch, "ptxas-blackwell")]))
    attempt("start a shell", lambda: subprocess.run(["sh", "-c", "true"], capture_output=True))
    outcome["nvidia-smi"] = "refused" if nvidia_smi() is None else "allowed"  # the parent asks it instead
    print(json.dumps(outcome))
""")


def _fake_nvidia_smi(directory: Path) -> Path:
    """A directory holding an `nvidia-smi` that answers the query as the real one does on an H200."""
    tools = directory / "tools"
    tools.mkdir()
    tool = tools / "nvidia-smi"
    tool.write_text("#!/bin/sh\necho '1980, 3201, 1980, 3201, 120.50, 41, 570.86.15'\n")
    tool.chmod(0o755)
    return tools


def test_the_parent_reads_clocks_from_nvidia_smi_which_the_kernels_process_may_not_start(tmp_path, monkeypatch):
    from engine.platforms.triton.timing import nvidia_smi

    monkeypatch.setenv("PATH", f"{_fake_nvidia_smi(tmp_path)}:/usr/bin:/bin")
    assert nvidia_smi() == {"clocks.sm": "1980", "clocks.mem": "3201", "clocks.max.sm": "1980",
                            "clocks.max.mem": "3201", "power.draw": "120.50", "temperature.gpu": "41",
                            "driver_version": "570.86.15"}


@pytest.mark.parametrize("with_allowances", [True, False])
def test_the_cuda_allowances_admit_tritons_compile_and_build_steps_and_nothing_outside(tmp_path, with_allowances):
    ptxas = bundled_ptxas()
    scratch, outside = tmp_path / "home", tmp_path / "outside"
    for directory in (scratch, outside):
        directory.mkdir()
    (scratch / "cuda_utils.so").write_bytes(b"")
    (scratch / "victim").write_text("the same name in the working directory: only the descriptor's counts")
    (outside / "victim").write_text("keep me")
    fake = scratch / "ptxas-blackwell"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    env = {"PATH": f"{_fake_nvidia_smi(tmp_path)}:/usr/bin:/bin", "HOME": str(scratch), "TMPDIR": str(scratch),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", _PROBE, str(scratch), str(outside), str(ptxas),
                           "1" if with_allowances else "0"], capture_output=True, text=True, env=env, cwd=scratch,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    admitted = "allowed" if with_allowances else "refused"
    assert json.loads(done.stdout) == {
        "a temporary directory, filled and removed": admitted, "a temporary file opened for reading": admitted,
        "chmod in the cache": admitted, "open /dev/null for writing": admitted, "start Triton's ptxas": admitted,
        "chmod elsewhere": "refused", "list a directory elsewhere by descriptor": "refused",
        "remove a file elsewhere by descriptor": "refused", "start a ptxas the kernel wrote": "refused",
        "start a shell": "refused", "nvidia-smi": "refused"}
    assert (outside / "victim").read_text() == "keep me"
    assert oct(outside.stat().st_mode & 0o777) != oct(0o777)
