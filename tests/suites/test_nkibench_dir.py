"""Reading a directory in AccelOpt's NKIBench layout (summary.json, seeds/, reference/, kernels/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.platforms.nki.suites import SuiteError, load_suite, read_nkibench_dir

from .conftest import exec_reference

REFERENCE = """import numpy as np

M = {M}
N = {N}


def get_inputs():
    return [np.random.normal(size=(M, N)).astype(np.float32)]


def forward(x):
    return {math}


def transform_to_nki_inputs(inputs):
    return inputs


def transform_nki_outputs(k_res, ref):
    return [k_res]
"""

KERNEL = "import neuronxcc.nki as nki\n\n\n@nki.jit\ndef kernel(x):\n    return x  # case {case}\n"


def write_nkibench_dir(root: Path, summary: dict | None = None) -> Path:
    """Two problems: 'silu' (a built-in slug, two cases) and 'double' (unknown to the suite)."""
    for folder in ("seeds", "reference", "kernels"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "seeds" / "silu.yaml").write_text("test_name: silu\nparameters:\n- M\n- N\n")
    for case, (m, n) in {"1": (128, 256), "2": (256, 512)}.items():
        (root / "reference" / f"silu_{case}.py").write_text(REFERENCE.format(M=m, N=n, math="x / (1 + np.exp(-x))"))
        (root / "kernels" / f"silu_{case}.py").write_text(KERNEL.format(case=case))
    (root / "reference" / "double.py").write_text(REFERENCE.format(M=8, N=4, math="2 * x"))
    (root / "kernels" / "double.py").write_text(KERNEL.format(case="0"))
    if summary is None:
        summary = {
            "silu": {
                "seed": "./seeds/silu.yaml",
                "cases": {
                    case: {
                        "values": {"N": n, "M": m},
                        "impls": [{"task": f"./reference/silu_{case}.py", "kernel": f"./kernels/silu_{case}.py"}],
                    }
                    for case, (m, n) in {"1": (128, 256), "2": (256, 512)}.items()
                },
            },
            "double": {
                "cases": {
                    "0": {
                        "values": {"M": 8, "N": 4},
                        "impls": [{"task": "./reference/double.py", "kernel": "./kernels/double.py"}],
                    }
                }
            },
        }
    (root / "summary.json").write_text(json.dumps(summary))
    return root


def test_it_reads_every_case_with_its_reference_and_kernel(tmp_path):
    specs = {spec.slug: spec for spec in read_nkibench_dir(write_nkibench_dir(tmp_path))}
    silu = specs["silu"]
    assert silu.parameters == ("M", "N")  # the seed's order, not the summary's
    assert silu.cases == {"1": {"M": 128, "N": 256}, "2": {"M": 256, "N": 512}}
    assert exec_reference(silu.reference_source("2")).M == 256
    assert silu.baseline_for("1").endswith("# case 1\n") and silu.baseline_for("2").endswith("# case 2\n")


def test_a_built_in_slug_gets_the_suites_description_and_peak_counts(tmp_path):
    specs = {spec.slug: spec for spec in read_nkibench_dir(write_nkibench_dir(tmp_path))}
    built_in = load_suite().problem("silu")
    assert (specs["silu"].family, specs["silu"].title) == (built_in.family, built_in.title)
    assert specs["silu"].peak_counts("2") == built_in.peak_counts("mini")  # same shape, same counts
    assert specs["double"].family == "imported"
    assert specs["double"].peak_counts("0") is None


def test_it_refuses_a_file_outside_the_directory(tmp_path):
    root = write_nkibench_dir(tmp_path / "bench")
    (tmp_path / "secret.py").write_text("M = 1\nN = 1\n")
    summary = json.loads((root / "summary.json").read_text())
    summary["double"]["cases"]["0"]["impls"][0]["task"] = "../secret.py"
    (root / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(SuiteError, match=r"'\.\./secret\.py' points outside"):
        read_nkibench_dir(root)


def test_it_names_a_missing_kernel_file(tmp_path):
    root = write_nkibench_dir(tmp_path)
    (root / "kernels" / "double.py").unlink()
    with pytest.raises(SuiteError, match=r"\['double'\] case '0' kernel: './kernels/double.py' not found"):
        read_nkibench_dir(root)


def test_a_directory_without_summary_is_not_an_nkibench_directory(tmp_path):
    with pytest.raises(SuiteError, match="not an NKIBench directory"):
        read_nkibench_dir(tmp_path)
