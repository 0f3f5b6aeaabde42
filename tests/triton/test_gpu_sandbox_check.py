"""measurements/gpu_sandbox_check.py on the CPU (the product's sandboxed Triton evaluation, interpreter backend),
its refusal without a sandbox, and the cuda backend's placement telling a child where the GPU driver is."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
from pathlib import Path

import pytest

from engine.evaluator.sandbox import isolation
from engine.evaluator.sandbox.process import Limits
from engine.evaluator.sandbox.user import ALLOW_ROOT_VARIABLE
from engine.platforms.triton.pipeline import cuda_placement

SCRIPT = Path(__file__).resolve().parents[2] / "measurements" / "gpu_sandbox_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_sandbox_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_in_the_sandbox_our_rmsnorm_passes_and_both_attacks_get_their_failure_kinds(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "0")
    out = tmp_path / "sandbox.json"
    assert _script().main(["--interpret", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["isolation"].startswith("OS-isolated") and report["backend"] == "triton-interpreter"
    assert [(r["status"], r["error_kind"], r["latency_ms"]) for r in report["results"]] == [
        ("ok", None, None), ("failed", "runtime_error", None), ("failed", "modified_input", None)]
    assert "wrote outside the buffer of output" in report["results"][1]["error_message"]
    assert "NOT OS-ISOLATED" not in capsys.readouterr().out


def test_compile_only_puts_the_three_kernels_through_the_cuda_child_for_sm_90_without_a_gpu(tmp_path, monkeypatch):
    import triton

    if not os.access(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas-blackwell", os.X_OK):
        pytest.skip("Triton's NVIDIA backend has no runnable ptxas here: nothing compiles for sm_90")
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "0")
    monkeypatch.delenv("TRITON_LIBCUDA_PATH", raising=False)
    out = tmp_path / "sandbox.json"
    assert _script().main(["--compile-only", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["isolation"].startswith("OS-isolated") and report["backend"] == "cuda (compile only)"
    assert [(r["status"], r["compiled"], r["runnable"], r["profile"]["target"]) for r in report["results"]] == \
        [("ok", True, False, "sm_90")] * 3


def test_without_a_sandbox_it_stops_unless_the_unisolated_fallback_is_asked_for(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(ALLOW_ROOT_VARIABLE, "0")
    monkeypatch.setattr(isolation, "tools", lambda: {"bwrap": None, "unshare": "/usr/bin/unshare"})
    out = tmp_path / "sandbox.json"
    with pytest.raises(SystemExit) as stopped:
        _script().main(["--interpret", "--out", str(out)])
    assert stopped.value.code == 3
    assert "SANDBOX UNAVAILABLE HERE" in capsys.readouterr().out
    assert json.loads(out.read_text())["isolation"].startswith("UNAVAILABLE")
    label, why = _script().start_isolation(allow_fallback=True)
    assert label.startswith("NONE") and "`bwrap`" in why

    assert os.environ[ALLOW_ROOT_VARIABLE] == "1"  # restored by monkeypatch


def test_the_cuda_placement_binds_the_devices_and_tells_the_child_where_libcuda_is(tmp_path, monkeypatch):
    (tmp_path / "libcuda.so.1").write_bytes(b"")
    monkeypatch.setenv("LD_LIBRARY_PATH", f"/nowhere:{tmp_path}")
    monkeypatch.delenv("TRITON_LIBCUDA_PATH", raising=False)
    monkeypatch.setattr(glob, "glob", lambda pattern: ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"])
    limits, extras = cuda_placement(Limits())
    assert [d for d, _ in extras.devices] == ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"]
    assert (str(tmp_path), str(tmp_path)) in extras.read_only
    assert dict(extras.environment) == {"LD_LIBRARY_PATH": str(tmp_path), "TRITON_LIBCUDA_PATH": str(tmp_path)}
    assert limits.memory_bytes >= 1 << 46 and limits.processes >= 512
    # Its 512 threads may use 4 cores at once, no more (its cpu cgroup), and 8 GiB resident.
    assert limits.cpus == 4 and limits.resident_limit() == 8 * 1024**3
