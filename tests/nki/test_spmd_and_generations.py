"""SPMD launches, and the differences between the neuronxcc (2.26) and top-level nki (2.30) generations."""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.simulator import NKICompileError, jit, simulate
from engine.platforms.nki.simulator.semantics import isa_dst as nisa2
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.semantics import namespaces


def test_an_spmd_grid_runs_every_program_into_one_shared_output(rng):
    @jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        j = nl.program_id(1)
        rows = i * 128 + nl.arange(128)[:, None]
        cols = j * 64 + nl.arange(64)[None, :]
        nl.store(out[rows, cols], nl.add(nl.load(a[rows, cols]), float(i * 10 + j)))
        return out

    a = rng.standard_normal((256, 192)).astype(np.float32)
    out = kernel[2, 3](a)
    expected = a.copy()
    for i in range(2):
        for j in range(3):
            expected[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64] += i * 10 + j
    np.testing.assert_array_equal(out, expected)


def test_2_30_loops_are_unrolled_so_tiles_may_outlive_an_iteration(rng):
    mods = namespaces.build()
    nl2 = mods["nki.language"]

    def kernel(a):
        out = nl2.ndarray((128, 64), dtype=nl2.float32, buffer=nl2.shared_hbm)
        tiles = []
        for k in nl2.affine_range(2):
            t = nl2.ndarray((128, 64), dtype=nl2.float32, buffer=nl2.sbuf)
            nisa2.dma_copy(dst=t, src=a[k])
            tiles.append(t)
        acc = nl2.ndarray((128, 64), dtype=nl2.float32, buffer=nl2.sbuf)
        nisa2.tensor_tensor(acc, tiles[0], tiles[1], nl2.add)
        nisa2.dma_copy(dst=out, src=acc)
        return out

    a = rng.standard_normal((2, 128, 64)).astype(np.float32)
    np.testing.assert_allclose(simulate(kernel, [a]).outputs[0], a[0] + a[1], rtol=1e-6)


def test_the_same_pattern_in_the_2_26_generation_is_a_scope_error(rng):
    def kernel(a):
        tiles = []
        for k in nl.affine_range(2):
            tiles.append(nl.load(a[k]))
        return nl.add(tiles[0], tiles[1])

    with pytest.raises(NKICompileError, match="outside the loop iteration"):
        simulate(kernel, [rng.standard_normal((2, 128, 64)).astype(np.float32)])


def test_2_30_nc_matmul_accumulates_into_an_unwritten_psum_tile_by_default(rng):
    mods = namespaces.build()
    nl2 = mods["nki.language"]

    def kernel(a, b):
        out = nl2.ndarray((128, 256), dtype=nl2.float32, buffer=nl2.shared_hbm)
        acc = nl2.ndarray((128, 256), dtype=nl2.float32, buffer=nl2.psum)
        for k in nl2.affine_range(3):
            st = nl2.ndarray((128, 128), dtype=nl2.float32, buffer=nl2.sbuf)
            mv = nl2.ndarray((128, 256), dtype=nl2.float32, buffer=nl2.sbuf)
            nisa2.dma_copy(dst=st, src=a[k])
            nisa2.dma_copy(dst=mv, src=b[k])
            nisa2.nc_matmul(dst=acc, stationary=st, moving=mv)
        res = nl2.ndarray((128, 256), dtype=nl2.float32, buffer=nl2.sbuf)
        nisa2.tensor_copy(dst=res, src=acc)
        nisa2.dma_copy(dst=out, src=res)
        return out

    a = rng.standard_normal((3, 128, 128)).astype(np.float32)
    b = rng.standard_normal((3, 128, 256)).astype(np.float32)
    expected = sum(a[k].T @ b[k] for k in range(3))
    np.testing.assert_allclose(simulate(kernel, [a, b]).outputs[0], expected, rtol=1e-4, atol=1e-4)
