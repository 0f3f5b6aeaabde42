"""nki.isa operations (both API generations) on small tiles against independent numpy."""

from __future__ import annotations

import numpy as np

from engine.platforms.nki.simulator import simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import isa_dst as nisa2
from engine.platforms.nki.simulator.semantics import language as nl


def run(kernel, *inputs):
    return simulate(kernel, list(inputs)).outputs


def test_nc_matmul_computes_stationary_transposed_times_moving(rng):
    def kernel(s, m):
        out = nl.ndarray((96, 300), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nisa.nc_matmul(nl.load(s), nl.load(m))
        nl.store(out, nl.copy(res))
        return out

    s = rng.standard_normal((64, 96)).astype(np.float32)
    m = rng.standard_normal((64, 300)).astype(np.float32)
    (out,) = run(kernel, s, m)
    np.testing.assert_allclose(out, s.T @ m, rtol=1e-5, atol=1e-5)


def test_nc_matmul_transpose_mode_with_identity_transposes_the_stationary(rng):
    def kernel(a):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        ident = nl.load(nl.shared_constant(np.identity(128, dtype=np.float32)))
        t = nisa.nc_matmul(nl.load(a), ident, is_moving_onezero=True, is_transpose=True)
        nl.store(out, nl.copy(t))
        return out

    a = rng.standard_normal((128, 64)).astype(np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_array_equal(out, a.T)


def test_activation_applies_scale_and_bias_before_the_function_and_reduces(rng):
    def kernel(a, b):
        out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        bias = nl.load(b)
        acc = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        y = nisa.activation(op=nl.exp, data=nl.load(a), bias=bias, scale=0.5, reduce_op=nl.add, reduce_res=acc)
        nl.store(out, y)
        nl.store(red, acc)
        return out, red

    a = rng.standard_normal((128, 32)).astype(np.float32)
    b = rng.standard_normal((128, 1)).astype(np.float32)
    out, red = run(kernel, a, b)
    expected = np.exp(a * 0.5 + b)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_allclose(red[:, 0], expected.sum(axis=1), rtol=1e-5)


def test_tensor_scalar_applies_two_operators_with_reverse(rng):
    def kernel(a, v):
        out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        y = nisa.tensor_scalar(data=nl.load(a), op0=nl.subtract, operand0=1.0, reverse0=True,
                               op1=nl.multiply, operand1=nl.load(v))
        nl.store(out, y)
        return out

    a = rng.standard_normal((128, 16)).astype(np.float32)
    v = rng.standard_normal((128, 1)).astype(np.float32)
    (out,) = run(kernel, a, v)
    np.testing.assert_allclose(out, (1.0 - a) * v, rtol=1e-6)


def test_tensor_tensor_and_reciprocal(rng):
    def kernel(a, b):
        out = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        y = nisa.tensor_tensor(nl.load(a), nl.load(b), nl.add)
        nl.store(out, nisa.reciprocal(data=y))
        return out

    a = rng.uniform(1, 2, (128, 16)).astype(np.float32)
    b = rng.uniform(1, 2, (128, 16)).astype(np.float32)
    (out,) = run(kernel, a, b)
    np.testing.assert_allclose(out, 1 / (a + b), rtol=1e-6)


def test_tensor_reduce_with_negate_and_keepdims(rng):
    def kernel(a):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_reduce(nl.max, data=nl.load(a), axis=[1], negate=True, keepdims=True))
        return out

    a = rng.standard_normal((128, 20)).astype(np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_array_equal(out[:, 0], -a.max(axis=1))


def test_tensor_tensor_scan_is_the_linear_recurrence(rng):
    def kernel(a, b):
        out = nl.ndarray((128, 300), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_tensor_scan(nl.load(a), nl.load(b), initial=0.5, op0=np.multiply, op1=np.add))
        return out

    a = rng.uniform(0.9, 1.1, (128, 300)).astype(np.float32)
    b = rng.standard_normal((128, 300)).astype(np.float32)
    (out,) = run(kernel, a, b)
    expected = np.empty_like(a, dtype=np.float64)
    prev = np.full(128, 0.5)
    for i in range(300):
        prev = a[:, i] * prev + b[:, i]
        expected[:, i] = prev
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_tensor_tensor_scan_with_other_operators_scans_column_by_column(rng):
    def kernel(a, b):
        out = nl.ndarray((8, 10), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_tensor_scan(nl.load(a), nl.load(b), initial=0.0, op0=np.maximum, op1=np.add))
        return out

    a = rng.standard_normal((8, 10)).astype(np.float32)
    b = rng.standard_normal((8, 10)).astype(np.float32)
    (out,) = run(kernel, a, b)
    expected = np.empty_like(a)
    prev = np.zeros(8, np.float32)
    for i in range(10):
        prev = np.maximum(a[:, i], prev) + b[:, i]
        expected[:, i] = prev
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_memset_iota_and_tensor_copy():
    def kernel():
        ones = nl.ndarray((4, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        idx = nl.ndarray((4, 3), dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(ones, nisa.tensor_copy(nisa.memset(shape=(4, 3), value=1.5, dtype=nl.float32)))
        nl.store(idx, nisa.iota(3 * nl.arange(4)[:, None] + nl.arange(3)[None, :], dtype=nl.int32))
        return ones, idx

    ones, idx = run(kernel)
    np.testing.assert_array_equal(ones, np.full((4, 3), 1.5, np.float32))
    np.testing.assert_array_equal(idx, np.arange(12).reshape(4, 3))


def test_destination_first_api_writes_into_dst(rng):
    # SDK 2.30 (top-level nki.isa): the destination tile comes first.
    def kernel(a, b):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa2.dma_copy(dst=x, src=a)
        nisa2.activation(y, nl.exp, x, scale=2.0)
        acc = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)
        ident = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa2.dma_copy(dst=ident, src=b)
        nisa2.nc_matmul(acc, ident, y)
        nisa2.nc_matmul(acc, ident, y, accumulate=True)
        z = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa2.tensor_copy(z, acc)
        nisa2.tensor_scalar(z, z, nl.add, 1.0)
        nisa2.dma_copy(dst=out, src=z)
        return out

    a = rng.standard_normal((128, 64)).astype(np.float32)
    (out,) = run(kernel, a, np.identity(128, dtype=np.float32))
    np.testing.assert_allclose(out, 2 * np.exp(2 * a) + 1, rtol=1e-5)
