"""What the catalog's rewrites meet in the Triton evaluation core on the interpreter (`engine.platforms.triton.local`):
a kernel without masks fails the narrower workload out of bounds, its masked rewrite is correct on both, an
autotuned rewrite with several configurations is judged too (the interpreter cannot time them), and smaller
blocks on a one-block-per-row kernel leave outputs unwritten."""

from __future__ import annotations

from pathlib import Path

from engine.platforms.triton.flashinfer import load_definition, load_workloads, solution_from_kernel
from engine.platforms.triton.local import evaluate_case
from engine.platforms.triton.rewrites import TRITON_BY_NAME
from tests.triton_agents.kernels import RMSNORM_UNMASKED_DPS

FIXTURES = Path(__file__).with_name("fixtures")


def statuses(source: str, tmp_path: Path) -> list[str]:
    definition = load_definition(FIXTURES / "studio_rmsnorm_var.json")
    solution = solution_from_kernel(source, name="candidate", definition=definition.name, author="test")
    return [evaluate_case(definition, workload, solution, workdir=tmp_path / workload.uuid).status
            for workload in load_workloads(FIXTURES / "studio_rmsnorm_var.jsonl")]


def test_catalog_rewrites_of_the_unmasked_kernel_on_the_evaluation_core(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # before triton is first imported: it decides at import
    from triton.runtime.autotuner import Autotuner

    # The core lets the interpreter run autotuned kernels (runner.autotune_without_timing); undo it afterwards.
    monkeypatch.setattr(Autotuner, "do_bench", Autotuner.__dict__["do_bench"])
    assert statuses(RMSNORM_UNMASKED_DPS, tmp_path / "start") == ["correct", "out_of_bounds"]  # hidden 128, 96
    fixed = TRITON_BY_NAME["mask_out_of_bounds"].apply(RMSNORM_UNMASKED_DPS, 0)
    assert statuses(fixed, tmp_path / "fixed") == ["correct", "correct"]
    tuned = TRITON_BY_NAME["add_autotune"].apply(fixed, 0)
    assert tuned.count("triton.Config(") == 4
    assert statuses(tuned, tmp_path / "tuned") == ["correct", "correct"]
    smaller = TRITON_BY_NAME["smaller_blocks"].apply(fixed, 0)
    assert statuses(smaller, tmp_path / "smaller") == ["incorrect", "incorrect"]
