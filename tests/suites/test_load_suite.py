"""The built-in NKIBench suite: its problems, cases, rendered references and peak counts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.platforms.nki.suites import SuiteError, load_suite
from engine.platforms.nki.suites.loader import SUITES_DIR
from engine.platforms.nki.suites.specs import evaluate_count, render_reference

from .conftest import exec_reference

# DESIGN.md section 11: the published NKIBench shapes.
PUBLISHED_SHAPES = {
    "silu": {"M": 4096, "N": 7168},
    "adamw": {"M": 10944, "N": 2048},
    "rope_single_freq_apply": {"B": 1, "H": 64, "N": 4096, "D": 128},
    "mamba": {"M": 7168, "C": 256, "S": 16},
    "matmul": {"M": 4096, "N": 12288, "K": 5120},
    "transpose_matmul": {"M": 4096, "K": 2048, "N": 10944},
    "bmm": {"B": 16, "M": 4096, "K": 64, "N": 4096},
    "bmm_softmax": {"B": 16, "M": 4096, "K": 64, "N": 4096},
    "rmsnorm_matmul": {"M": 4096, "K": 1024, "N": 2048},
    "add_rmsnorm_matmul": {"M": 4096, "K": 1024, "N": 2048},
    "matmul_add_rmsnorm": {"M": 4096, "K": 2048, "N": 2048},
    "swiglu": {"M": 4096, "K": 1024, "N": 3072},
    "lora": {"M": 4096, "K": 5120, "N": 12288, "R": 128},
    "gqa_full": {"B": 1, "N": 4096, "QH": 16, "KH": 8, "D": 128},
}


def test_it_holds_the_fourteen_nkibench_problems(suite):
    assert sorted(p.slug for p in suite.problems) == sorted(PUBLISHED_SHAPES)
    assert all(p.family and p.title and p.description for p in suite.problems)


def test_the_full_cases_are_the_published_shapes_and_every_problem_has_a_mini_case(suite):
    for spec in suite.problems:
        assert spec.case("full") == PUBLISHED_SHAPES[spec.slug], spec.slug
        mini = spec.case("mini")
        assert sorted(mini) == sorted(spec.parameters)
        full_size = 1
        mini_size = 1
        for name in spec.parameters:
            full_size *= spec.case("full")[name]
            mini_size *= mini[name]
        assert mini_size * 100 < full_size, f"{spec.slug}: the mini case is not small"


def test_reference_source_sets_the_case_constants_and_keeps_the_rest(suite):
    spec = suite.problem("matmul")
    full, mini = spec.reference_source("full"), spec.reference_source("mini")
    module = exec_reference(mini)
    assert (module.M, module.N, module.K) == (256, 1024, 256)
    changed = [(a, b) for a, b in zip(full.splitlines(), mini.splitlines(), strict=True) if a != b]
    assert changed == [("M = 4096", "M = 256"), ("N = 12288", "N = 1024"), ("K = 5120", "K = 256")]


def test_an_unknown_case_is_refused_with_the_cases_it_has(suite):
    with pytest.raises(KeyError, match=r"no case 'huge'.*\['full', 'mini'\]"):
        suite.problem("silu").reference_source("huge")


def test_peak_counts_follow_the_math(suite):
    matmul = suite.problem("matmul").peak_counts("full")
    assert matmul.matmul_flops == 2 * 4096 * 12288 * 5120
    assert matmul.vector_flops == 0
    assert matmul.hbm_bytes == 4 * (4096 * 5120 + 5120 * 12288 + 4096 * 12288)
    silu = suite.problem("silu").peak_counts("mini")
    assert silu.as_dict() == {"vector_flops": 3 * 256 * 512, "matmul_flops": 0, "hbm_bytes": 2 * 4 * 256 * 512}


def test_every_problem_counts_each_input_and_output_byte_once(suite):
    # HBM bytes = float32 size of the reference's inputs plus its output, for the mini case.
    for spec in suite.problems:
        module = exec_reference(spec.reference_source("mini"))
        inputs = module.get_inputs()
        output = module.forward(*inputs)
        tensor_bytes = sum(a.nbytes for a in inputs if hasattr(a, "nbytes")) + output.nbytes
        assert spec.peak_counts("mini").hbm_bytes == tensor_bytes, spec.slug


def test_it_names_the_missing_baseline_file(tmp_path: Path):
    copy = tmp_path / "nkibench"
    shutil.copytree(SUITES_DIR / "nkibench", copy)
    (copy / "baselines" / "mamba.py").unlink()
    with pytest.raises(SuiteError, match=r"problem 'mamba'.*baselines/mamba\.py not found"):
        load_suite("nkibench", directory=copy)


def test_it_refuses_a_case_that_misses_a_parameter(tmp_path: Path):
    copy = tmp_path / "nkibench"
    shutil.copytree(SUITES_DIR / "nkibench", copy)
    manifest = copy / "suite.yaml"
    manifest.write_text(manifest.read_text().replace("mini: {M: 256, N: 512}", "mini: {M: 256}", 1))
    with pytest.raises(SuiteError, match=r"problem 'silu'.*case 'mini' must set exactly \['M', 'N'\]"):
        load_suite("nkibench", directory=copy)


def test_count_formulas_allow_only_integer_arithmetic():
    assert evaluate_count("2*M*N + M//2 - (N - 1)", {"M": 4, "N": 3}) == 2 * 4 * 3 + 2 - 2
    for bad in ("__import__('os').getpid()", "M / 2", "M ** 2", "Q * 2"):
        with pytest.raises(SuiteError):
            evaluate_count(bad, {"M": 4})


def test_rendering_needs_every_parameter_at_module_level():
    with pytest.raises(SuiteError, match=r"no module-level assignment for shape parameter\(s\) \['K'\]"):
        render_reference("M = 1\n\ndef forward(x):\n    K = 3\n    return x\n", {"M": 2, "K": 4})
