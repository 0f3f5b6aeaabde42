"""measurements/gpu_check.py's CPU-safe parts: its arguments, its message without a GPU, the interpreter mode."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "measurements" / "gpu_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bad_arguments_are_refused_with_a_message(capsys):
    with pytest.raises(SystemExit):
        _script().parse_args(["--budget-s", "0"])
    assert "--budget-s must be > 0" in capsys.readouterr().err
    assert _script().parse_args([]).budget_s == 200


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_without_a_gpu_it_exits_with_a_clear_message(capsys):
    assert _script().main([]) == 2
    assert "no NVIDIA GPU visible to PyTorch" in capsys.readouterr().err


def test_the_interpreter_mode_checks_one_small_rmsnorm_and_writes_json(tmp_path, capsys):
    out = tmp_path / "gpu.json"
    assert _script().main(["--interpret", "--only", "rmsnorm_h128", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [(r["solution"], r["status"], r["latency_ms"]) for r in report["results"]] == [
        ("ours:rmsnorm_h128", "correct", None)]
    assert "ours:rmsnorm_h128" in capsys.readouterr().out
