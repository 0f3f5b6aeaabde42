"""Values cannot steer control flow: every host-side read of a device tensor's values is a compile error
naming the operation and the kernel line (the evaluation's verifier relies on one recorded program being
the whole program), while numpy scalars and arrays combined with tiles still become instructions."""

from __future__ import annotations

import inspect
import math
import signal

import numpy as np
import pytest

from engine.platforms.nki.simulator import NKICompileError, simulate
from engine.platforms.nki.simulator.semantics import language as nl


def line_of(kernel, text: str) -> int:
    lines, start = inspect.getsourcelines(kernel)
    for offset, line in enumerate(lines):
        if text in line:
            return start + offset
    raise AssertionError(text)


def x_input():
    return [np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)]


def _kernel(read):
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.exp(nl.load(x))
        read(t)  # the host read
        nl.store(out, t)
        return out

    return kernel


READS = {
    "bool": (lambda t: bool(t), "truth value"),
    "if": (lambda t: 1 if t else 0, "truth value"),
    "not": (lambda t: not t, "truth value"),
    "float": (lambda t: float(t), "float(tile)"),
    "math": (lambda t: math.exp(t), "float(tile)"),
    "int": (lambda t: int(t), "int(tile)"),
    "index": (lambda t: range(t), "Python integer"),
    "complex": (lambda t: complex(t), "complex(tile)"),
    "item": (lambda t: t.item(), "tile.item()"),
    "tolist": (lambda t: t.tolist(), "tile.tolist()"),
    "iteration": (lambda t: [v for v in t], "iterating"),
    "unpacking": (lambda t: tuple(t), "iterating"),
    "asarray": (lambda t: np.asarray(t), "numpy array"),
    "array": (lambda t: np.array(t), "numpy array"),
    "numpy function": (lambda t: np.mean(t), "numpy array"),
    "ufunc": (lambda t: np.exp(t), "numpy's exp"),
    "reduction": (lambda t: np.sum(t), "numpy's add.reduce"),
    "view": (lambda t: np.asarray(t[0:2, :]), "numpy array"),
    "derived": (lambda t: float(t.broadcast_to((4, 8))), "float(tile)"),
}


@pytest.fixture(autouse=True)
def no_hang():
    # Before these rules, np.asarray(tile) recursed through __len__/__getitem__ until the wall clock.
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("a host read hung"))
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("name", sorted(READS))
def test_a_host_read_of_tensor_values_is_a_compile_error_naming_the_operation_and_line(name):
    read, wording = READS[name]
    kernel = _kernel(read)
    with pytest.raises(NKICompileError) as err:
        simulate(kernel, x_input())
    assert err.value.line == read.__code__.co_firstlineno  # the deepest kernel-file frame: the read itself
    message = str(err.value)
    assert message.startswith(f"{err.value.op} at line {err.value.line}: ")
    assert wording in message and "on the host" in message and "exp_" in message, message


def test_a_kernel_that_branches_on_values_fails_the_same_way_for_every_input():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        if t:  # branch on the data
            t = nl.exp(t)
        nl.store(out, t)
        return out

    for inputs in (x_input(), [np.zeros((4, 8), np.float32)]):
        with pytest.raises(NKICompileError, match="^bool at line .*truth value"):
            simulate(kernel, inputs)


def test_numpy_scalars_and_arrays_on_the_left_of_a_tile_are_instructions():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        y = np.float32(2.0) * t + np.float64(0.5) * t + np.full((4, 8), 1.0, np.float32) * t
        nl.store(out, y)
        return out

    (x,) = x_input()
    sim = simulate(kernel, [x])
    np.testing.assert_allclose(sim.outputs[0], 3.5 * x, rtol=1e-6)
    assert sim.instructions == 7  # load, three multiplies, two adds, store


def test_shapes_and_lengths_stay_host_values():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        rows = len(t) + t.shape[0] - x.shape[0]  # host numbers: allowed
        for i in nl.affine_range(rows // 4):
            nl.store(out[i * 4:(i + 1) * 4, :], t)
        return out

    (x,) = x_input()
    np.testing.assert_array_equal(simulate(kernel, [x]).outputs[0], x)
