"""The Triton rewrite catalog: every rewrite, at every site it finds in small correct Triton kernels,
yields a module that imports, compiles and computes the reference on Triton's CPU interpreter, except the
deliberate negative cases, which are incorrect (and so become failed rewrites, negative lessons)."""

from __future__ import annotations

import ast

import pytest

from engine.agents.rewrites import RewriteError
from engine.platforms.triton.rewrites import TRITON_BY_NAME, TRITON_CATALOG
from tests.triton_agents.interpret import check
from tests.triton_agents.kernels import CASES, RMSNORM_UNMASKED, Case

# (kernel, rewrite): rewrites that are wrong for that kernel, on purpose. Halving the block of a kernel whose
# one block must cover a whole row leaves half the row out.
NEGATIVE = {("rmsnorm_masked", "smaller_blocks")}


def test_every_rewrite_is_exercised_by_some_test_kernel():
    unused = [r.name for r in TRITON_CATALOG
              if not any(r.sites(case.source) for case in CASES.values())
              and not r.sites(RMSNORM_UNMASKED)]
    assert unused == []


def test_the_test_kernels_are_correct_on_the_interpreter(interpreter, tmp_path):
    for name, case in CASES.items():
        assert check(case.source, case, tmp_path) == "", name


@pytest.mark.parametrize("rewrite", [r.name for r in TRITON_CATALOG])
def test_each_rewrite_at_each_site_is_correct_or_a_deliberate_negative(rewrite, interpreter, tmp_path):
    applied = 0
    for name, case in CASES.items():
        sites = TRITON_BY_NAME[rewrite].sites(case.source)
        for index, site in enumerate(sites):
            rewritten = TRITON_BY_NAME[rewrite].apply(case.source, index)
            assert rewritten != case.source
            ast.parse(rewritten)
            problem = check(rewritten, case, tmp_path)
            if (name, rewrite) in NEGATIVE:
                assert problem, f"{rewrite} on {name} ({site.description}) was meant to be wrong"
            else:
                assert problem == "", f"{rewrite} on {name} ({site.description}): {problem}\n{rewritten}"
            applied += 1
    if rewrite != "mask_out_of_bounds":  # its site is in the unmasked kernel, tested below
        assert applied, f"no test kernel has a site for {rewrite}"


def test_masking_repairs_a_kernel_that_reads_past_its_rows(interpreter, tmp_path):
    masks = TRITON_BY_NAME["mask_out_of_bounds"]
    [site] = masks.sites(RMSNORM_UNMASKED)
    assert "cols < n_cols" in site.description
    fixed = masks.apply(RMSNORM_UNMASKED, 0)
    assert fixed.count("mask=cols < n_cols") == 3 and "other=0.0" in fixed
    assert masks.sites(fixed) == []  # nothing left to mask
    # Rows of 96 and 128 columns in a block of 128: the fixed kernel is right on both.
    assert check(fixed, CASES["rmsnorm_masked"], tmp_path) == ""


def test_add_autotune_moves_the_block_into_the_grid_and_the_configs():
    add = TRITON_BY_NAME["add_autotune"].apply(CASES["add"].source, 0)
    assert "@triton.autotune(configs=[triton.Config({'BLOCK_SIZE': 256}, num_warps=4)" in add
    assert "key=['n_elements']" in add
    assert "add_kernel[lambda META: (triton.cdiv(n, META['BLOCK_SIZE']),)](x, y, out, n)" in add
    assert TRITON_BY_NAME["add_autotune"].sites(add) == []  # an autotuned kernel is not autotuned twice
    assert TRITON_BY_NAME["more_warps"].sites(add) == []  # its launch no longer sets num_warps


def test_widen_autotune_adds_new_configurations_only_once():
    widen = TRITON_BY_NAME["widen_autotune"]
    once = widen.apply(CASES["scale_autotuned"].source, 0)
    assert "triton.Config({'BLOCK_SIZE': 256}, num_warps=4)" in once
    assert "triton.Config({'BLOCK_SIZE': 128}, num_warps=8)" in once
    twice = widen.apply(once, 0)
    assert twice.count("triton.Config(") == once.count("triton.Config(") + 2  # from the new last config


def test_a_site_that_does_not_exist_is_a_rewrite_error():
    with pytest.raises(RewriteError):
        TRITON_BY_NAME["larger_blocks"].apply(CASES["add"].source, 5)


def test_non_triton_sources_have_no_sites():
    nki = "import neuronxcc.nki.language as nl\n\ndef kernel(a):\n    return nl.load(a)\n"
    assert all(r.sites(nki) == [] for r in TRITON_CATALOG)
    assert all(r.sites("def broken(:\n") == [] for r in TRITON_CATALOG)


def test_case_type_is_shared():
    assert all(isinstance(case, Case) for case in CASES.values())
