"""manage.py calibrate: parses, calls engine.platforms.nki.perf.calibration, prints."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


def test_it_names_the_missing_summary_json(tmp_path):
    with pytest.raises(CommandError, match="summary.json"):
        call_command("calibrate", "--nkibench", str(tmp_path), "--no-cache")


def test_json_output_reports_a_kernel_that_does_not_simulate(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "reference").mkdir()
    (tmp_path / "kernels" / "k.py").write_text("def kernel(x):\n    raise ValueError('no')\n")
    (tmp_path / "reference" / "r.py").write_text(
        "import numpy as np\ndef get_inputs():\n    return [np.zeros((2, 2), np.float32)]\n"
        "def transform_to_nki_inputs(inputs):\n    return inputs\n")
    (tmp_path / "summary.json").write_text(json.dumps({"silu": {"cases": {"0": {
        "values": {"M": 4096, "N": 7168}, "impls": [{"task": "./reference/r.py", "kernel": "./kernels/k.py"}]}}}}))
    out = StringIO()
    call_command("calibrate", "--nkibench", str(tmp_path), "--no-cache", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["cases"][0]["problem"] == "silu"
    assert "simulation failed" in report["cases"][0]["error"]
    assert report["median_abs_log_error"] is None
