"""The NKI 0.6 view methods `tensor.slice`, `tensor.select` and `tensor.permute` (nki/api/nki/language of
aws-neuron-sdk, SDK 2.32, NkiTensor), as their reference describes them: views of the same storage, taken by
DMAs, loads, stores and ISA operands, checked against numpy; their documented constraints refused with the
operation and the kernel line; and the recorded program replays them on other inputs."""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.simulator import NKICompileError, simulate
from engine.platforms.nki.simulator.semantics import namespaces
from engine.platforms.nki.simulator.verification.replay import replay

MODS = namespaces.build()
nl = MODS["nki.language"]
nisa = MODS["nki.isa"]


def _sbuf(shape):
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)


def _hbm(shape):
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)


def _copy_out(view):
    """`view` copied by the Vector Engine into a fresh tile, then stored: what an ISA operand reads."""
    tile = _sbuf(view.shape)
    nisa.tensor_copy(dst=tile, src=view)
    out = _hbm(view.shape)
    nisa.dma_copy(dst=out, src=tile)
    return out


def _on_chip(a):
    t = _sbuf(a.shape)
    nisa.dma_copy(dst=t, src=a)
    return t


def test_slice_takes_start_to_end_by_step_of_one_dimension(rng):
    # The reference's examples: (128, 64).slice(1, 8, 24, 1) is (128, 16), .slice(1, 0, 64, 2) is (128, 32).
    def kernel(a):
        t = _on_chip(a)
        return _copy_out(t.slice(1, 8, 24, 1)), _copy_out(t.slice(1, 0, 64, 2)), _copy_out(t.slice(0, 3, 100, 7))

    a = rng.standard_normal((128, 64)).astype(np.float32)
    outs = simulate(kernel, [a]).outputs
    assert [o.shape for o in outs] == [(128, 16), (128, 32), (14, 64)]
    for got, expected in zip(outs, (a[:, 8:24], a[:, 0:64:2], a[3:100:7]), strict=True):
        np.testing.assert_array_equal(got, expected)


def test_select_removes_the_dimension_and_keeps_an_on_chip_partition(rng):
    seen = {}

    def kernel(a):
        t = _on_chip(a[0])
        seen["shapes"] = (t.select(1, 3).shape, t.select(0, 5).shape, a.select(0, 2).shape)
        out = _hbm((2, 128, 64))
        nisa.dma_copy(dst=out.select(0, 0), src=a.select(0, 2).select(1, 3))  # HBM: both dimensions removed
        nisa.dma_copy(dst=out.select(0, 1).slice(0, 0, 1), src=t.select(0, 5).select(1, 3))
        return out

    # The reference's example: (128, 8, 64).select(1, 3) is (128, 64); an HBM (4, 128, 8, 64).select(0, 2) is 3-D.
    a = rng.standard_normal((4, 128, 8, 64)).astype(np.float32)
    out = simulate(kernel, [a]).outputs[0]
    assert seen["shapes"] == ((128, 64), (1, 8, 64), (128, 8, 64))
    np.testing.assert_array_equal(out[0], a[2, :, 3])
    np.testing.assert_array_equal(out[1, 0], a[0, 5, 3])


def test_permute_reorders_dimensions_for_reads_and_writes(rng):
    def kernel(a):
        t = _on_chip(a)
        swapped = t.permute((0, 2, 1))  # the reference's example: (128, 4, 8) -> (128, 8, 4)
        back = _hbm(a.shape)
        nisa.dma_copy(dst=back.permute((0, 2, 1)), src=swapped)  # a permuted destination undoes it
        return _copy_out(swapped), back, _copy_out(_on_chip(a.permute((2, 0, 1))))  # HBM: any order

    a = rng.standard_normal((128, 4, 8)).astype(np.float32)
    swapped, back, hbm_order = simulate(kernel, [a]).outputs
    np.testing.assert_array_equal(swapped, a.transpose(0, 2, 1))
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(hbm_order, a.transpose(2, 0, 1))


def _chained(a):
    t = _on_chip(a)
    view = t.permute((0, 2, 1)).slice(1, 1, 7, 2).select(2, 1)  # (4, 3): a[:, 1, 1:7:2] transposed away
    out = _hbm((4, 3, 2))
    nisa.dma_copy(dst=out.select(2, 0), src=view)
    nisa.dma_copy(dst=out.select(2, 1), src=a[0:4, :, :].slice(2, 0, 6, 2).select(1, 0))  # a view of a view
    return out


def _chained_expected(a):
    return np.stack([a[:, 1, 1:7:2], a[:, 0, 0:6:2]], axis=2)


def test_chained_views_compose_and_the_recorded_program_replays_them_on_other_inputs(rng):
    a = rng.standard_normal((4, 5, 8)).astype(np.float32)
    sim = simulate(_chained, [a], record_program=True)
    np.testing.assert_array_equal(sim.outputs[0], _chained_expected(a))
    b = rng.standard_normal((4, 5, 8)).astype(np.float32)
    np.testing.assert_array_equal(replay(sim.program, [b]).outputs[0], _chained_expected(b))


def test_indexing_a_view_reads_the_indexed_elements_and_replays(rng):
    def kernel(a):
        t = _on_chip(a)
        out = _hbm((128, 4, 2))
        nisa.dma_copy(dst=out, src=t.permute((0, 2, 1))[:, 2:6, 1:4:2])  # [] of a permuted view
        return out

    a = rng.standard_normal((128, 4, 8)).astype(np.float32)
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], a.transpose(0, 2, 1)[:, 2:6, 1:4:2])


@pytest.mark.parametrize(("make", "message"), [
    (lambda t: t.slice(1, 8, 8), r"slice at line \d+: start 8 and end 8 must satisfy 0 <= start < end <= 64"),
    (lambda t: t.slice(1, 0, 65), r"end 65 must satisfy 0 <= start < end <= 64"),
    (lambda t: t.slice(1, 0, 8, 0), r"step must be 1 or more, got 0"),
    (lambda t: t.slice(2, 0, 8), r"dim 2 is out of range for a view of shape \(128, 64\)"),
    (lambda t: t.select(1, 64), r"select at line \d+: index 64 is out of range for dimension 1"),
    (lambda t: t.permute((0, 0)), r"permute at line \d+: dims \(0, 0\) must be a permutation of \(0, 1\)"),
    (lambda t: t.permute((1, 0)), r"on-chip tensors keep the partition dimension first"),
    (lambda t: t.select(1, t), r"a dynamic select .* is unsupported"),
    (lambda t: t.indirect(t), r"\.indirect, NeuronCore-v4\) are not simulated"),
])
def test_invalid_views_are_refused_with_the_operation_and_the_line(make, message):
    def kernel(a):
        make(_on_chip(a))
        return a

    with pytest.raises(NKICompileError, match=message) as err:
        simulate(kernel, [np.zeros((128, 64), np.float32)])
    assert err.value.line > 0


def test_an_isa_destination_can_be_a_view(rng):
    def kernel(a):
        t = _on_chip(a)
        nisa.memset(dst=t.slice(1, 0, 8, 2), value=-1.0)  # every other column of the first eight
        nisa.tensor_copy(dst=t.select(1, 9), src=t.select(1, 10))  # column 10 over column 9
        out = _hbm(a.shape)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = rng.standard_normal((16, 12)).astype(np.float32)
    expected = a.copy()
    expected[:, 0:8:2] = -1.0
    expected[:, 9] = a[:, 10]
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], expected)
