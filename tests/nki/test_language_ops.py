"""nl.* operations on small tiles, checked against numpy written independently of the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.simulator import simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl


def run(kernel, *inputs):
    return simulate(kernel, list(inputs)).outputs


def test_load_add_store_round_trips_through_sbuf(rng):
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(b)
        nl.store(out, nl.add(x, y))
        return out

    a, b = rng.standard_normal((2, 128, 64), dtype=np.float32)
    (out,) = run(kernel, a, b)
    np.testing.assert_array_equal(out, a + b)


@pytest.mark.parametrize("name, reference", [
    ("subtract", np.subtract), ("multiply", np.multiply), ("divide", np.divide),
    ("maximum", np.maximum), ("minimum", np.minimum),
])
def test_binary_arithmetic_matches_numpy(rng, name, reference):
    op = getattr(nl, name)

    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, op(nl.load(a), nl.load(b)))
        return out

    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.uniform(0.5, 2.0, (64, 32)).astype(np.float32)
    (out,) = run(kernel, a, b)
    np.testing.assert_allclose(out, reference(a, b), rtol=1e-6)


@pytest.mark.parametrize("name, reference", [
    ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("rsqrt", lambda x: 1 / np.sqrt(x)),
    ("square", np.square), ("reciprocal", lambda x: 1 / x), ("tanh", np.tanh),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("silu", lambda x: x / (1 + np.exp(-x))),
    ("relu", lambda x: np.maximum(x, 0)),
    ("gelu", lambda x: 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2)))),
])
def test_activation_functions_match_numpy(rng, name, reference):
    op = getattr(nl, name)

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, op(nl.load(a)))
        return out

    a = rng.uniform(0.1, 3.0, (32, 16)).astype(np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_allclose(out, reference(a.astype(np.float64)), rtol=2e-6, atol=1e-7)


def test_reductions_sum_max_mean_along_free_axis(rng):
    def kernel(a):
        s = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        m = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        avg = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(s, nl.sum(x, axis=1, keepdims=True))
        nl.store(m, nl.max(x, axis=[1], keepdims=True))
        nl.store(avg, nl.mean(x, axis=1, keepdims=True))
        return s, m, avg

    a = rng.standard_normal((128, 40)).astype(np.float32)
    s, m, avg = run(kernel, a)
    np.testing.assert_allclose(s[:, 0], a.sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(m[:, 0], a.max(axis=1))
    np.testing.assert_allclose(avg[:, 0], a.mean(axis=1), rtol=1e-5, atol=1e-6)


def test_per_partition_vector_broadcasts_along_free_axis(rng):
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        row_sum = nl.sum(x, axis=[1])  # one value per partition, shape (128,)
        nl.store(out, nl.divide(x, row_sum))
        return out

    a = rng.uniform(1, 2, (128, 8)).astype(np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_allclose(out, a / a.sum(axis=1, keepdims=True), rtol=1e-6)


def test_matmul_with_psum_accumulation_over_k_tiles(rng):
    def kernel(x, w):
        out = nl.ndarray((128, 256), dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 256), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(3):
            xt = nl.load(x[:, k * 128:(k + 1) * 128])
            wt = nl.load(w[k * 128:(k + 1) * 128, :])
            acc += nl.matmul(xt, wt)
        nl.store(out, nl.copy(acc))
        return out

    x = rng.standard_normal((128, 384)).astype(np.float32)
    w = rng.standard_normal((384, 256)).astype(np.float32)
    (out,) = run(kernel, x, w)
    np.testing.assert_allclose(out, x @ w, rtol=1e-4, atol=1e-4)


def test_transpose_swaps_partition_and_free_axes(rng):
    def kernel(a):
        out = nl.ndarray((32, 128), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.transpose(nl.load(a))
        nl.store(out, nl.copy(t))
        return out

    a = rng.standard_normal((128, 32)).astype(np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_array_equal(out, a.T)


def test_arange_indexing_with_offsets_and_a_mask_on_a_ragged_tail(rng):
    rows = 200  # not a multiple of 128: the last tile is masked

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        jf = nl.arange(16)[None, :]
        for i in nl.affine_range(2):
            t = nl.load(a[i * 128 + ip, jf], mask=(i * 128 + ip < rows))
            nl.store(out[i * 128 + ip, jf], nl.multiply(t, 2.0, mask=(i * 128 + ip < rows)),
                     mask=(i * 128 + ip < rows))
        return out

    a = rng.standard_normal((rows, 16)).astype(np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_array_equal(out, 2 * a)


def test_multi_dimensional_arange_combines_into_one_axis(rng):
    # the NKIBench compiler style: 128 * arange(8)[None, :, None] + arange(128)[None, None, :]
    def kernel(a):
        buf = nl.ndarray((2, nl.par_dim(128), 1024), dtype=a.dtype, buffer=nl.sbuf)
        out = nl.ndarray((2, 128, 1024), dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            buf[i, nl.arange(128)[:, None, None], 128 * nl.arange(8)[None, :, None] + nl.arange(128)[None, None, :]] = \
                nl.load(a[i, nl.arange(128)[:, None, None], nl.arange(8)[None, :, None], nl.arange(128)[None, None, :]])
            nl.store(out[i, nl.arange(128)[:, None], nl.arange(1024)[None, :]],
                     value=buf[i, nl.arange(128)[:, None], nl.arange(1024)[None, :]])
        return out

    a = rng.standard_normal((2, 128, 8, 128)).astype(np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_array_equal(out, a.reshape(2, 128, 1024))


def test_sequential_range_carries_a_dependency(rng):
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(4):
            acc[...] = nl.add(nl.multiply(acc, 2.0), nl.load(a[i]))
        nl.store(out, acc)
        return out

    a = rng.standard_normal((4, 128, 8)).astype(np.float32)
    (out,) = run(kernel, a)
    expected = np.zeros((128, 8), np.float32)
    for i in range(4):
        expected = expected * 2 + a[i]
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_loop_reduce_combines_across_the_listed_loop(rng):
    def kernel(a):
        out = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        best = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(3):
            part = nl.max(nl.load(a[i]), axis=[1], keepdims=True)
            best[nl.arange(128)[:, None], 0] = nl.loop_reduce(part, op=np.max, loop_indices=[i])
        nl.store(out, best)
        return out

    a = rng.standard_normal((3, 128, 16)).astype(np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_array_equal(out[:, 0], a.max(axis=(0, 2)))


def test_unwritten_output_elements_read_back_as_nan(rng):
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:64, :], nl.load(a[0:64, :]))
        return out

    a = rng.standard_normal((128, 8)).astype(np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_array_equal(out[:64], a[:64])
    assert np.isnan(out[64:]).all()


def test_inputs_are_copied_so_the_caller_can_compare_afterwards(rng):
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    a = rng.standard_normal((16, 4)).astype(np.float32)
    keep = a.copy()
    (out,) = run(kernel, a)
    out[...] = 0
    np.testing.assert_array_equal(a, keep)


def test_bfloat16_results_are_rounded_to_eight_mantissa_bits():
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nl.load(a), dtype=nl.bfloat16))
        return out

    a = np.array([[1.0 + 2 ** -9, 1.0 + 2 ** -7, 3.0]], dtype=np.float32)
    (out,) = run(kernel, a)
    np.testing.assert_array_equal(out, np.array([[1.0, 1.0 + 2 ** -7, 3.0]], dtype=np.float32))


def test_simulation_reports_the_inputs_as_the_kernel_left_them(rng):
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        nl.store(a, nl.multiply(nl.load(a), 0.0))  # the kernel overwrites its input
        return out

    a = rng.standard_normal((16, 4)).astype(np.float32)
    sim = simulate(kernel, [a])
    np.testing.assert_array_equal(sim.outputs[0], a)
    np.testing.assert_array_equal(sim.inputs_after[0], np.zeros_like(a))


def test_a_copy_keeps_its_values_when_the_source_tile_changes_afterwards(rng):
    def kernel(x, identity):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        out_t = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.load(x)
        ident = nl.load(identity)
        kept = nl.copy(a)  # nothing claims it: a tile of its own
        transposed = nisa.nc_matmul(a, ident, is_transpose=True)  # identity moving: a transpose
        a[...] = 0.0
        nl.store(out, value=kept)
        nl.store(out_t, value=nl.copy(transposed))
        return out, out_t

    x = rng.standard_normal((128, 64)).astype(np.float32)
    kept, transposed = simulate(kernel, [x, np.identity(128, dtype=np.float32)]).outputs
    np.testing.assert_array_equal(kept, x)
    np.testing.assert_array_equal(transposed, x.T)
