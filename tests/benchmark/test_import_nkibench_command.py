"""python manage.py import_nkibench DIR reads AccelOpt's NKIBench/ layout: summary.json, reference/, kernels/."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmark.models import Kernel, Problem
from engine.platforms.nki.suites import load_suite


@pytest.fixture
def nkibench_dir(tmp_path: Path) -> Path:
    """A one-problem directory in the published layout, built from our own silu reference and kernel."""
    spec = load_suite("nkibench").problem("silu")
    (tmp_path / "reference").mkdir()
    (tmp_path / "kernels").mkdir()
    (tmp_path / "reference" / "silu_M256_N512_numpy_0.py").write_text(spec.reference_source("mini"))
    (tmp_path / "kernels" / "silu_M256_N512_0.py").write_text(spec.baseline_source)
    summary = {
        "silu": {
            "cases": {
                "0": {
                    "values": {"M": 256, "N": 512},
                    "impls": [{"task": "./reference/silu_M256_N512_numpy_0.py", "kernel": "./kernels/silu_M256_N512_0.py"}],
                }
            }
        }
    }
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    return tmp_path


def run(*args: str) -> str:
    out = StringIO()
    call_command("import_nkibench", *args, stdout=out)
    return out.getvalue()


def test_each_case_becomes_a_problem_with_its_reference_and_an_imported_kernel(nkibench_dir, db):
    assert "1 problems, 1 new kernels" in run(str(nkibench_dir))
    problem = Problem.objects.get(suite="imported", slug="silu", case="0")
    assert problem.parameters == {"M": 256, "N": 512}
    assert "M = 256" in problem.reference_source
    assert problem.vector_flops == 3 * 256 * 512  # a known NKIBench problem keeps its peak counts
    kernel = problem.kernels.get()
    assert kernel.origin == "imported" and problem.baseline_kernel == kernel


def test_importing_again_changes_nothing(nkibench_dir, db):
    run(str(nkibench_dir))
    assert "0 new kernels (1 already there)" in run(str(nkibench_dir))
    assert Kernel.objects.count() == 1


def test_imported_kernels_can_be_evaluated_on_import(nkibench_dir, inline_evaluations, db):
    output = run(str(nkibench_dir), "--evaluate")
    assert "1 evaluated on trn1, 1 correct" in output


def test_a_directory_without_summary_json_is_refused_naming_the_file(tmp_path, db):
    with pytest.raises(CommandError, match="summary.json"):
        run(str(tmp_path))


def test_a_summary_pointing_outside_the_directory_is_refused(nkibench_dir, db):
    summary = json.loads((nkibench_dir / "summary.json").read_text())
    summary["silu"]["cases"]["0"]["impls"][0]["task"] = "../../etc/passwd"
    (nkibench_dir / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(CommandError, match="outside"):
        run(str(nkibench_dir))
    assert not Problem.objects.exists()
