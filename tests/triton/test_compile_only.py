"""The cuda backend's kernel child on a machine without a GPU (`compile_triton`): in the evaluation sandbox, with
the cuda guard allowances, limits and environment, real Triton kernels compile for sm_90 (Triton's pipeline and
its bundled ptxas, its cache in the private /tmp), Triton's launcher helper builds (gcc) and loads, failures
keep their kinds, and a kernel still cannot run or chmod what it likes."""

from __future__ import annotations

import json
import os
import shutil
import sysconfig
import tempfile
from pathlib import Path

import pytest

from engine.evaluator.result import ErrorKind
from engine.platforms.triton import catalog
from engine.platforms.triton.flashinfer import (
    definition_to_dict,
    solution_from_kernel,
    solution_to_dict,
    workload_to_dict,
)
from engine.platforms.triton.pipeline import COMPILED_ONLY, compile_triton
from tests.triton import kernels
from tests.triton.toolchain import bundled_ptxas


@pytest.fixture(autouse=True)
def _needs_ptxas():
    bundled_ptxas()


def _compile(source: str, **options):
    definition = catalog.definition("rmsnorm_h128")
    solution = solution_from_kernel(source, name="t", definition=definition.name, author="test")
    return compile_triton(solution_to_dict(solution), definition_to_dict(definition),
                          workload_to_dict(catalog.workload("rmsnorm_h128_b7")), **options)


def test_in_the_sandbox_our_rmsnorm_compiles_for_sm_90_and_nothing_runs():
    result = _compile(catalog.kernel_source("rmsnorm_h128"))
    assert result.ok and result.compiled and not result.runnable, (result.error_message, result.error_detail)
    assert result.latency_ms is None and result.profile["note"] == COMPILED_ONLY
    assert result.profile["target"] == "sm_90" and result.profile["launches"] == 1
    [kernel] = result.profile["kernels"]
    assert kernel["name"] == "_rmsnorm_rows" and kernel["cubin_bytes"] > 1000
    # Without libcuda Triton's launcher helper stops at Triton's own check; with one, it is built.
    assert result.profile["launcher"].startswith(("not built: libcuda.so cannot found", "built and loaded"))
    assert (result.backend, result.platform) == ("cuda", "h200")


def test_every_autotune_configuration_compiles():
    source = kernels.HEADER + '''

@triton.autotune(configs=[triton.Config({}, num_warps=2), triton.Config({}, num_warps=4)], key=["HIDDEN"])
@triton.jit
def _row(x_ptr, w_ptr, y_ptr, HIDDEN: tl.constexpr):
    row = tl.program_id(0)
    col = tl.arange(0, HIDDEN)
    x = tl.load(x_ptr + row * HIDDEN + col).to(tl.float32)
    w = tl.load(w_ptr + col).to(tl.float32)
    y = x / tl.sqrt(tl.sum(x * x, axis=0) / HIDDEN + 1e-6) * w
    tl.store(y_ptr + row * HIDDEN + col, y.to(tl.bfloat16))


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _row[(hidden_states.shape[0],)](hidden_states, weight, out, HIDDEN=128)
    return out
'''
    result = _compile(source)
    assert result.ok, (result.error_message, result.error_detail)
    assert sorted(k["num_warps"] for k in result.profile["kernels"]) == [2, 4]


def test_a_kernel_that_does_not_compile_for_the_gpu_is_a_compile_error_with_tritons_message_and_launch_line():
    broken = kernels.CORRECT.replace("col = tl.arange(0, BLOCK)", "col = tl.arange(0, BLOCK - 28)")
    result = _compile(broken)
    assert result.error_kind is ErrorKind.COMPILE_ERROR, (result.error_message, result.error_detail)
    assert "arange's range must be a power of 2" in result.error_message
    assert "_row[" in broken.splitlines()[result.error_line - 1]


@pytest.mark.skipif(shutil.which("gcc") is None or not os.path.isfile(
    os.path.join(sysconfig.get_paths()["include"], "Python.h")),
    reason="building Triton's launcher helper needs gcc and Python's headers (python3-dev)")
def test_with_a_stand_in_libcuda_the_launcher_helper_builds_loads_and_reaches_the_driver(monkeypatch):
    from engine.platforms.triton.compile_only import write_libcuda_stub

    # Not under pytest's tmp_path: the sandbox's own uid must be able to reach it.
    directory = Path(tempfile.mkdtemp(prefix="accelopt-libcuda-stub-"))
    try:
        directory.chmod(0o755)
        write_libcuda_stub(directory)
        monkeypatch.setenv("TRITON_LIBCUDA_PATH", str(directory))
        result = _compile(kernels.CORRECT)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert result.ok, (result.error_message, result.error_detail)
    assert result.profile["launcher"] == ("built and loaded; loading the cubin: Triton Error [CUDA]: no CUDA-capable "
                                          "device is detected (stub libcuda)")


_ESCAPES = kernels.ATTEMPTS + '''


def run(hidden_states, weight):
    outcome, attempt = _attempts()

    def write_tool():
        with open("/tmp/ptxas-blackwell", "w") as f:
            f.write("#!/bin/sh\\nexit 0\\n")

    attempt("write in Triton's cache root", write_tool)
    attempt("chmod it there", lambda: os.chmod("/tmp/ptxas-blackwell", 0o755))
    attempt("start it", lambda: subprocess.run(["/tmp/ptxas-blackwell"]))
    attempt("start a shell", lambda: subprocess.run(["sh", "-c", "true"]))
    attempt("chmod outside", lambda: os.chmod("/usr/bin", 0o777))
    raise RuntimeError(json.dumps(outcome))
'''


def test_in_the_sandbox_a_kernel_still_cannot_start_a_program_or_chmod_outside_its_scratch():
    # The import guard off, so that the kernel reaches os and subprocess: the audit guard alone answers.
    result = _compile(_ESCAPES, _guards={"imports": False})
    assert result.error_kind is ErrorKind.RUNTIME_ERROR, (result.error_message, result.error_detail)
    outcome = json.loads(result.error_message.removeprefix("RuntimeError: "))
    assert outcome == {"write in Triton's cache root": "allowed", "chmod it there": "allowed", "start it": "refused",
                       "start a shell": "refused", "chmod outside": "refused"}
