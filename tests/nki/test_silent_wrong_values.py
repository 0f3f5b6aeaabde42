"""Four results the simulator used to get wrong without a word (issue 34): one-element tiles, float -> int
casts, nl.abs_max, and an empty launch grid."""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.simulator import NKICompileError, jit, simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl


def _round_trip(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


@pytest.mark.parametrize("shape", [(1, 1), (1,), (1, 1, 1)])
def test_a_one_element_tensor_loads_and_stores_its_value(shape):
    a = np.full(shape, 3.5, dtype=np.float32)
    np.testing.assert_array_equal(simulate(_round_trip, [a]).outputs[0], a)


def test_memset_into_a_one_element_slice_is_kept():
    def kernel(a):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.zeros((4, 4), dtype=nl.float32)
        t[1:2, 2:3] = nisa.memset(shape=(1, 1), value=7.0, dtype=nl.float32)
        t[3, 0] = 5.0
        nl.store(out, t)
        return out

    expected = np.zeros((4, 4), np.float32)
    expected[1, 2] = 7.0
    expected[3, 0] = 5.0
    np.testing.assert_array_equal(simulate(kernel, [np.zeros(1, np.float32)]).outputs[0], expected)


@pytest.mark.parametrize(("dtype", "np_dtype", "big", "small"), [
    ("int32", np.int32, 2**31 - 1, -2**31), ("int8", np.int8, 127, -128), ("uint8", np.uint8, 255, 0)])
def test_float_to_int_casts_round_half_to_even_and_saturate(dtype, np_dtype, big, small):
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=getattr(nl, dtype), buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nl.load(a), dtype=getattr(nl, dtype)))
        return out

    a = np.array([[0.5, 1.5, 2.5, 2.7, 3e10, -3e10, 1.4, 100.0]], dtype=np.float32)
    got = simulate(kernel, [a]).outputs[0]
    assert got.dtype == np_dtype
    assert got.tolist() == [[0, 2, 2, 3, big, small, 1, 100]]


def test_storing_a_float_tile_into_an_int_tensor_rounds_too():
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=nl.int16, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    a = np.array([[-0.5, -1.5, -2.5, 40000.0]], dtype=np.float32)
    assert simulate(kernel, [a]).outputs[0].tolist() == [[0, -2, -2, 32767]]


def test_abs_max_returns_the_signed_value_with_the_larger_magnitude():
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.abs_max(nl.load(a), nl.load(b)))
        return out

    a = np.array([[-5.0, 1.0, 1.0, -2.0]], dtype=np.float32)
    b = np.array([[3.0, -5.0, -1.0, 0.5]], dtype=np.float32)
    # A tie (|1| == |-1|) returns y, as the API reference says.
    assert simulate(kernel, [a, b]).outputs[0].tolist() == [[-5.0, -5.0, -1.0, -2.0]]


@pytest.mark.parametrize("grid", [0, (0,), (2, 0)])
def test_an_empty_launch_grid_is_an_error(grid):
    @jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out

    with pytest.raises(NKICompileError, match="launch grid .* needs at least 1"):
        kernel[grid](np.ones((2, 2), np.float32))
