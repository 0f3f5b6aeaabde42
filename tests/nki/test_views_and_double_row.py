"""Three NKI 0.6 reference features AWS's own kernels use (issue 34's conformance failures): indexing a reshaped
tile, `NkiTensor.view(dtype)` on an HBM tensor, and nc_matmul's perf_mode double_row."""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.simulator import NKICompileError, simulate
from engine.platforms.nki.simulator.semantics import namespaces

MODS = namespaces.build()
nl = MODS["neuronxcc.nki.language"]
nisa = MODS["neuronxcc.nki.isa"]
nl2 = MODS["nki.language"]
nisa2 = MODS["nki.isa"]


def test_a_reshaped_tile_is_indexed_like_the_tile_it_views(rng):
    # The SDK's fully optimized matmul stores `result_tile.reshape((TILE_M, BLOCK_N))[0:TILE_M, 0:BLOCK_N]`.
    def kernel(a):
        out = nl2.ndarray((128, 64), dtype=nl2.float32, buffer=nl2.shared_hbm)
        tile = nl2.ndarray((128, 2, 64), dtype=nl2.float32, buffer=nl2.sbuf)
        nisa2.dma_copy(dst=tile, src=a)
        nisa2.dma_copy(dst=out, src=tile.reshape((128, 128))[0:128, 32:96])
        return out

    a = rng.standard_normal((128, 2, 64)).astype(np.float32)
    (out,) = simulate(kernel, [a]).outputs
    np.testing.assert_array_equal(out, a.reshape(128, 128)[:, 32:96])


def _double_row(a_input, b_input):
    out = nl.ndarray((a_input.shape[2], b_input.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
    a_tile = nl.load(a_input.view(nl.float8_e5m2))
    b_tile = nl.load(b_input.view(nl.float8_e5m2))
    nl.store(out, value=nisa.nc_matmul(a_tile, b_tile, perf_mode=nisa.matmul_perf_mode.double_row))
    return out


def test_double_row_contracts_over_the_partitions_and_the_first_free_dimension_of_2(rng):
    # The 0.6 reference: "[1, 256] @ [256, 3]: the stationary tile is [128, 2, 1], the moving tile [128, 2, 3]".
    a = rng.integers(-3, 4, (128, 2, 4)).astype(np.float32)  # small integers: exact in float8_e5m2
    b = rng.integers(-3, 4, (128, 2, 64)).astype(np.float32)
    (out,) = simulate(_double_row, [a, b], platform="trn2").outputs
    np.testing.assert_array_equal(out, np.einsum("kli,klj->ij", a, b))


def test_double_row_is_refused_on_neuroncore_v2_and_for_other_dtypes_or_layouts(rng):
    a = np.ones((128, 2, 4), np.float32)
    b = np.ones((128, 2, 64), np.float32)
    with pytest.raises(NKICompileError, match="double_row exists only on NeuronCore-v3 and newer"):
        simulate(_double_row, [a, b], platform="trn1")

    def float32_operands(a_input, b_input):
        out = nl.ndarray((4, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.nc_matmul(nl.load(a_input), nl.load(b_input), perf_mode="double_row"))
        return out

    with pytest.raises(NKICompileError, match="needs float8 operands; the stationary tile is float32"):
        simulate(float32_operands, [a, b], platform="trn2")


def test_a_view_between_types_stored_differently_is_refused_naming_both():
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a.view(nl.int32)))
        return out

    with pytest.raises(NKICompileError, match="reinterpreting float32 bytes as int32"):
        simulate(kernel, [np.ones((128, 64), np.float32)])
