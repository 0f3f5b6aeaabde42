"""rows_per_program, and launch rewrites that follow a name to where it is assigned, on Triton's CPU
interpreter: the rewritten kernels compute the reference at row counts that are not multiples of the rows
per program (the last program's tail rows are masked), and kernels outside the pattern have no site."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.platforms.triton.rewrites import TRITON_BY_NAME
from tests.triton_agents.interpret import check, load
from tests.triton_agents.kernels import ADD, CASES, RMSNORM_UNMASKED, ROW_SUMSQ, Case

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "engine" / "platforms" / "triton" / "samples" / "solutions"
# Our own FlashInfer-Bench solution of rmsnorm_h128 in the published solutions' shape (one program per 128-wide
# row, a module constant for the width, bf16 in and out), committed: tests/fixtures/README.md.
STUDIO_RMSNORM = ROOT / "tests" / "fixtures" / "rmsnorm_h128_one_row.json"
ROWS = TRITON_BY_NAME["rows_per_program"]

# One program per row, the row one block of a module-constant width, the reduction with no axis, the grid a
# variable: the shape of FlashInfer-Bench's published rmsnorm_h128 solutions (written here for the test).
RMSNORM_ONE_ROW = '''import torch
import triton
import triton.language as tl

WIDTH = 64


@triton.jit
def _norm_row(x_ptr, w_ptr, o_ptr, stride_x, stride_o, eps: tl.constexpr, width: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = tl.arange(0, width)
    x = tl.load(x_ptr + pid * stride_x + offs).to(tl.float32)
    w = tl.load(w_ptr + offs).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x) / width + eps)
    tl.store(o_ptr + pid * stride_o + offs, x * inv * w)


def run(x, weight):
    batch, _ = x.shape
    out = torch.empty_like(x)
    grid = (batch,)
    _norm_row[grid](x, weight, out, x.stride(0), out.stride(0), 1e-6, WIDTH, num_warps=4)
    return out
'''


def _rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * weight


def _fused(x: torch.Tensor, r: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return _rmsnorm(x + r, weight)


def _randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


ODD_ROWS = (37, 5, 1)  # 16 rows per program: a 5-row tail, a program of only tail rows, a single row
ONE_ROW = Case(RMSNORM_ONE_ROW, _rmsnorm, lambda g: [(_randn(g, rows, 64), _randn(g, 64)) for rows in ODD_ROWS])
UNMASKED = Case(RMSNORM_UNMASKED, _rmsnorm, lambda g: [(_randn(g, rows, 128), _randn(g, 128)) for rows in (37, 3)])
MASKED = Case(CASES["rmsnorm_masked"].source, _rmsnorm,
              lambda g: [(_randn(g, rows, n), _randn(g, n)) for rows, n in ((37, 96), (19, 128))])
FUSED = Case((SOLUTIONS / "fused_add_rmsnorm.py").read_text(), _fused,
             lambda g: [(_randn(g, rows, n), _randn(g, rows, n), _randn(g, n)) for rows, n in ((37, 96), (3, 200), (9, 1100))])


@pytest.mark.parametrize("case", [ONE_ROW, UNMASKED, MASKED, FUSED], ids=["one_row", "unmasked", "masked", "fused_add"])
def test_rows_per_program_is_correct_with_tail_rows(case, interpreter, tmp_path):
    assert check(case.source, case, tmp_path) == ""
    [site] = ROWS.sites(case.source)
    rewritten = ROWS.apply(case.source, 0)
    assert "ROW_BLOCK: tl.constexpr" in rewritten and "triton.cdiv(" in rewritten
    assert check(rewritten, case, tmp_path) == "", f"{site.description}\n{rewritten}"
    assert ROWS.sites(rewritten) == []  # the kernel is 2-D now: not the pattern any more


def test_rows_per_program_picks_rows_from_the_row_width_and_larger_blocks_then_follows_it(interpreter, tmp_path):
    [site] = ROWS.sites(RMSNORM_ONE_ROW)
    assert "`_norm_row`: 16 rows per program" in site.description  # 2048 elements / 64 wide, at most 16
    rewritten = ROWS.apply(RMSNORM_ONE_ROW, 0)
    assert "ROW_BLOCK = 16" in rewritten and "grid = (triton.cdiv(batch, ROW_BLOCK),)" in rewritten
    assert "tl.sum(x * x, axis=1, keep_dims=True)" in rewritten
    # The host's ROW_BLOCK is a block size written once: larger_blocks rewrites it there, and the grid follows.
    larger = TRITON_BY_NAME["larger_blocks"]
    [grow] = [s for s in larger.sites(rewritten) if "ROW_BLOCK" in s.description]
    bigger = larger.apply(rewritten, larger.sites(rewritten).index(grow))
    assert "ROW_BLOCK = 32" in bigger
    assert check(bigger, ONE_ROW, tmp_path) == ""
    # The sample whose row width is only known at run time computes the rows on the host.
    assert "ROW_BLOCK = max(2, min(16, 2048 // block_h))" in ROWS.apply(FUSED.source, 0)


def test_rows_per_program_on_a_flashinfer_bench_rmsnorm_solution(interpreter, tmp_path):
    source = json.loads(STUDIO_RMSNORM.read_text())["sources"][0]["content"]
    [site] = ROWS.sites(source)
    assert "16 rows per program" in site.description  # 2048 elements / 128 wide
    rewritten = ROWS.apply(source, 0)
    before, after = load(source, tmp_path), load(rewritten, tmp_path)
    g = torch.Generator().manual_seed(0)
    for rows in ODD_ROWS:
        x, w = _randn(g, rows, 128).to(torch.bfloat16), _randn(g, 128).to(torch.bfloat16)
        expected = before.run(x, w)
        got = after.run(x.clone(), w.clone())
        assert torch.allclose(got.float(), expected.float(), rtol=1e-2, atol=1e-2), rows
        assert torch.allclose(got.float(), _rmsnorm(x.float(), w.float()), rtol=2e-2, atol=2e-2), rows


STORE_EVERY_PROGRAM = RMSNORM_ONE_ROW.replace(
    "    tl.store(o_ptr + pid * stride_o + offs, x * inv * w)\n",
    "    tl.store(o_ptr + pid * stride_o + offs, x * inv * w)\n    tl.store(o_ptr + offs, w)\n")
TWO_D_GRID = RMSNORM_ONE_ROW.replace("grid = (batch,)", "grid = (batch, 1)")


@pytest.mark.parametrize("source", [
    (SOLUTIONS / "rmsnorm.py").read_text(),  # already several rows per program (a 2-D block)
    (SOLUTIONS / "gemm.py").read_text(),  # a loop, tl.dot, two program coordinates
    ADD,  # elementwise: the offsets start at the program's block, not at a row
    ROW_SUMSQ,  # a loop over the row
    STORE_EVERY_PROGRAM,  # one store every program makes to the same place
    TWO_D_GRID,  # the grid is not one row per program along one axis
], ids=["rows_sample", "gemm", "add", "row_sumsq", "shared_store", "grid_2d"])
def test_rows_per_program_does_not_apply_outside_its_pattern(source):
    assert ROWS.sites(source) == []


GEMM = (SOLUTIONS / "gemm.py").read_text()
GEMM_CASE = Case(GEMM, lambda a, b: a @ b.T,
                 lambda g: [(_randn(g, m, k), _randn(g, n, k)) for m, n, k in ((37, 45, 70), (70, 33, 19))])


@pytest.mark.parametrize("rewrite", ["larger_blocks", "smaller_blocks", "more_warps", "fewer_warps", "more_stages",
                                     "fewer_stages"])
def test_launch_rewrites_follow_names_to_their_assignments(rewrite, interpreter, tmp_path):
    """The gemm sample launches with BLOCK_M=bm, num_warps=warps, num_stages=stages, assigned in each branch
    of an `if`: each assignment is a site, rewritten where it is written (the grid reads the same names)."""
    sites = TRITON_BY_NAME[rewrite].sites(GEMM)
    assert sites and all("`" in s.description and "(line " in s.description for s in sites)
    cpu = [i for i, s in enumerate(sites) if f"(line {_cpu_branch_line()})" in s.description]
    assert cpu or rewrite == "fewer_stages"  # the interpreter's branch runs 1 stage: nothing fewer
    for index in cpu:
        rewritten = TRITON_BY_NAME[rewrite].apply(GEMM, index)
        assert rewritten != GEMM
        assert check(rewritten, GEMM_CASE, tmp_path) == "", f"{sites[index].description}\n{rewritten}"


def _cpu_branch_line() -> int:
    return next(i for i, line in enumerate(GEMM.splitlines(), 1) if "= 32, 32, 32, 4, 1" in line)


def test_a_conditional_expression_of_literals_is_rewritten_as_a_whole():
    more = TRITON_BY_NAME["more_warps"]
    [site] = more.sites(FUSED.source)
    assert "`warps` 16/8/4 -> 32/16/8" in site.description
    assert "warps = 32 if block_h >= 8192 else 16 if block_h >= 2048 else 8" in more.apply(FUSED.source, 0)


def test_names_not_bound_to_literals_have_no_launch_sites():
    computed = RMSNORM_ONE_ROW.replace("num_warps=4)", "num_warps=w)").replace(
        "    grid = (batch,)\n", "    w = triton.next_power_of_2(batch % 8 + 1)\n    grid = (batch,)\n")
    from_parameter = RMSNORM_ONE_ROW.replace("def run(x, weight):", "def run(x, weight, w=4):").replace(
        "num_warps=4)", "num_warps=w)")
    augmented = RMSNORM_ONE_ROW.replace("num_warps=4)", "num_warps=w)").replace(
        "    grid = (batch,)\n", "    w = 2\n    w *= 2\n    grid = (batch,)\n")
    for source in (computed, from_parameter, augmented):
        assert TRITON_BY_NAME["more_warps"].sites(source) == []
        assert TRITON_BY_NAME["fewer_warps"].sites(source) == []
    # FlashInfer-Bench's row block computed at run time is no literal either: nothing to double.
    assert TRITON_BY_NAME["larger_blocks"].sites(FUSED.source) == []
