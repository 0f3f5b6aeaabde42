"""Matmuls accumulating into one PSUM tile: fused on the CPU, but observably the same as one by one."""

from __future__ import annotations

import numpy as np

from engine.platforms.nki.simulator import simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl


def test_operand_tiles_rewritten_between_accumulations_do_not_change_the_sum(rng):
    def kernel(a, b):
        out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 256), dtype=nl.float32, buffer=nl.psum)
        st = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        mv = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
        for k in nl.sequential_range(3):
            st[...] = nl.load(a[k])  # the same SBUF tiles, overwritten every iteration
            mv[...] = nl.load(b[k])
            acc += nisa.nc_matmul(st, mv)
        nl.store(out, nl.copy(acc))
        return out

    a = rng.standard_normal((3, 128, 128)).astype(np.float32)
    b = rng.standard_normal((3, 128, 256)).astype(np.float32)
    out = simulate(kernel, [a, b]).outputs[0]
    expected = sum(a[k].T.astype(np.float64) @ b[k] for k in range(3))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_reading_the_accumulator_midway_sees_the_partial_sum(rng):
    def kernel(a, b):
        first = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        total = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
        for k in nl.sequential_range(2):
            acc += nisa.nc_matmul(nl.load(a[k]), nl.load(b[k]))
            if k == 0:
                nl.store(first, nl.copy(acc))
        nl.store(total, nl.copy(acc))
        return first, total

    a = rng.standard_normal((2, 128, 128)).astype(np.float32)
    b = rng.standard_normal((2, 128, 64)).astype(np.float32)
    first, total = simulate(kernel, [a, b]).outputs
    np.testing.assert_allclose(first, a[0].T @ b[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(total, a[0].T @ b[0] + a[1].T @ b[1], rtol=1e-4, atol=1e-4)
