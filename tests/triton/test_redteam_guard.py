"""Red-team checks of the cuda guard allowances, through the real sandboxed compile-only path (compile_triton):
a kernel may write and chmod in its scratch (Triton does), and the guard admits the C compiler and ldconfig by
name; it must not take a program the kernel wrote there, under one of those names, for the host's own."""

from __future__ import annotations

import json
import shutil

import pytest

from engine.evaluator.result import ErrorKind
from engine.platforms.triton import catalog
from engine.platforms.triton.flashinfer import (
    definition_to_dict,
    solution_from_kernel,
    solution_to_dict,
    workload_to_dict,
)
from engine.platforms.triton.pipeline import compile_triton
from tests.triton import kernels

_PLANTED = kernels.ATTEMPTS + '''


def run(hidden_states, weight):
    outcome, attempt = _attempts()

    def plant():
        os.makedirs("/tmp/bin", exist_ok=True)
        with open("/tmp/bin/gcc", "w") as f:
            f.write("#!/bin/sh\\nexit 0\\n")
        os.chmod("/tmp/bin/gcc", 0o755)

    def spawn_by_name():  # posix_spawnp searches the process's PATH, which the kernel may change (native code)
        os.environ["PATH"] = "/tmp/bin"
        try:
            os.waitpid(os.posix_spawnp("gcc", ["gcc"], {}), 0)
        finally:
            os.environ["PATH"] = "/usr/local/bin:/usr/bin:/bin"

    attempt("plant a gcc in the scratch", plant)
    attempt("start it by its path", lambda: subprocess.run(["/tmp/bin/gcc"]))
    attempt("start it by a path through ..", lambda: subprocess.run(["/tmp/bin/../bin/gcc"]))
    attempt("start it relative to cwd", lambda: subprocess.run(["./gcc"], cwd="/tmp/bin"))
    attempt("start gcc with PATH at the scratch", lambda: subprocess.run(["gcc"], env={"PATH": "/tmp/bin"}))
    class Turncoat(dict):  # the guard's PATH lookup sees the host's, Popen's own one the scratch
        calls = 0

        def get(self, key, default=None):
            Turncoat.calls += 1
            return "/usr/bin" if Turncoat.calls == 1 else "/tmp/bin"

    attempt("start gcc with an env that changes its PATH", lambda: subprocess.run(["gcc"], env=Turncoat(PATH="x")))
    attempt("posix_spawn it", lambda: os.waitpid(os.posix_spawn("/tmp/bin/gcc", ["gcc"], {}), 0))
    attempt("posix_spawnp gcc with PATH at the scratch", spawn_by_name)
    attempt("start the host's gcc", lambda: subprocess.run(["gcc", "--version"], capture_output=True, check=True))
    raise RuntimeError(json.dumps(outcome))
'''


@pytest.mark.skipif(shutil.which("gcc") is None, reason="the host's own gcc is what the kernel may still start")
def test_a_program_the_kernel_wrote_is_not_started_under_an_admitted_name():
    definition = catalog.definition("rmsnorm_h128")
    solution = solution_from_kernel(_PLANTED, name="t", definition=definition.name, author="test")
    # The import guard off, so that the kernel reaches os and subprocess: the audit guard alone answers.
    result = compile_triton(solution_to_dict(solution), definition_to_dict(definition),
                            workload_to_dict(catalog.workload("rmsnorm_h128_b7")), _guards={"imports": False})
    assert result.error_kind is ErrorKind.RUNTIME_ERROR, (result.error_message, result.error_detail)
    outcome = json.loads(result.error_message.removeprefix("RuntimeError: "))
    assert outcome == {"plant a gcc in the scratch": "allowed", "start it by its path": "refused",
                       "start it by a path through ..": "refused", "start it relative to cwd": "refused",
                       "start gcc with PATH at the scratch": "refused",
                       "start gcc with an env that changes its PATH": "refused", "posix_spawn it": "refused",
                       "posix_spawnp gcc with PATH at the scratch": "refused", "start the host's gcc": "allowed"}
