"""Recycling the storage of on-chip blocks that look dead never changes what a kernel computes.

The recycler's budget is set to zero here, so every block is recycled at the end of each iteration of
the outermost loop: the most aggressive guess it can make.
"""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.simulator import NKIRuntimeError, simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.speed import recycling
from engine.platforms.nki.simulator.speed.recycling import EVICTED


@pytest.fixture(autouse=True)
def recycle_everything(monkeypatch):
    monkeypatch.setattr(recycling, "RETIRED_BLOCK_BYTES", 0)


def test_blocks_dead_after_their_iteration_give_the_same_result_without_a_rerun(rng):
    def kernel(x):
        out = nl.ndarray((4, 128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        loaded = nl.ndarray((4, nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.sbuf)
        scaled = nl.ndarray((4, nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            loaded[i, nl.arange(128)[:, None], nl.arange(256)[None, :]] = nl.load(x[i])
            scaled[i, nl.arange(128)[:, None], nl.arange(256)[None, :]] = nisa.tensor_scalar(
                data=loaded[i, nl.arange(128)[:, None], nl.arange(256)[None, :]], op0=nl.multiply, operand0=3.0)
            nl.store(out[i], value=scaled[i, nl.arange(128)[:, None], nl.arange(256)[None, :]])
        return out

    x = rng.standard_normal((4, 128, 256)).astype(np.float32)
    sim = simulate(kernel, [x])
    np.testing.assert_allclose(sim.outputs[0], 3.0 * x, rtol=1e-6)
    assert not sim.rerun_without_recycling


def test_a_tensor_a_later_loop_names_is_kept_without_a_rerun(rng):
    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        kept = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            kept[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.exp(nl.load(x[i]))
        for j in nl.affine_range(4):  # reads every block written by the first loop
            nl.store(out[j], value=kept[3 - j, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((4, 128, 64)).astype(np.float32)
    sim = simulate(kernel, [x])
    np.testing.assert_allclose(sim.outputs[0], np.exp(x[::-1]), rtol=1e-6)
    assert not sim.rerun_without_recycling  # the source says the second loop reads `kept`


def test_a_tensor_read_under_another_name_is_kept_without_a_rerun(rng):
    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        kept = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        same = kept  # an alias: the source says `kept` escapes, so its blocks are never recycled
        for i in nl.affine_range(4):
            kept[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.exp(nl.load(x[i]))
        for j in nl.affine_range(4):
            nl.store(out[j], value=same[3 - j, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((4, 128, 64)).astype(np.float32)
    sim = simulate(kernel, [x])
    np.testing.assert_allclose(sim.outputs[0], np.exp(x[::-1]), rtol=1e-6)
    assert not sim.rerun_without_recycling


def _declare_blocks():
    return nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)


def test_a_block_read_again_after_it_was_recycled_still_has_its_values(rng):
    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        kept = _declare_blocks()  # declared outside the kernel's body: the source does not tell its home
        for i in nl.affine_range(4):
            kept[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.exp(nl.load(x[i]))
        for j in nl.affine_range(4):
            nl.store(out[j], value=kept[3 - j, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((4, 128, 64)).astype(np.float32)
    sim = simulate(kernel, [x])
    np.testing.assert_allclose(sim.outputs[0], np.exp(x[::-1]), rtol=1e-6)
    assert sim.rerun_without_recycling  # the guess (dead after the first loop) was wrong; values are right


def test_blocks_of_an_inner_loop_are_recycled_inside_one_outer_iteration(rng):
    stored = []

    def kernel(x, w):
        out = nl.ndarray((2, 8, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((2, 8, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.psum)
        tiles = nl.ndarray((2, 8, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            for j in nl.affine_range(8):  # the home loop of `acc` and `tiles`
                for k in nl.affine_range(2):
                    acc[i, j, nl.arange(128)[:, None], nl.arange(128)[None, :]] += nisa.nc_matmul(
                        nl.load(x[i, j, k]), nl.load(w[k]))
                tiles[i, j, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.copy(
                    acc[i, j, nl.arange(128)[:, None], nl.arange(128)[None, :]])
                nl.store(out[i, j], value=tiles[i, j, nl.arange(128)[:, None], nl.arange(128)[None, :]])
                stored.append(sum(1 for entry in acc.blocks.values() if entry is EVICTED))
        return out

    x = rng.standard_normal((2, 8, 2, 128, 128)).astype(np.float32)
    w = rng.standard_normal((2, 128, 128)).astype(np.float32)
    sim = simulate(kernel, [x, w])
    expected = np.einsum("ijkpm,kpn->ijmn", x, w)
    np.testing.assert_allclose(sim.outputs[0], expected, rtol=1e-4, atol=1e-3)
    assert not sim.rerun_without_recycling
    # With a zero budget each accumulator block goes back to the pool at the end of its j iteration,
    # and the next one, given the same storage, starts from zeros again (else the sums above are wrong).
    assert stored[:8] == list(range(8))


def test_a_recycled_block_reads_as_uninitialised_not_as_the_old_values(rng):
    def kernel(x):
        out = nl.ndarray((3, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        blocks = nl.ndarray((3, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            blocks[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.load(x)
            nl.store(out[i], value=blocks[i, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        # Block 2 gets the storage block 0 or 1 had; it was never written.
        nl.store(out[2], value=blocks[2, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((128, 64)).astype(np.float32)
    with pytest.raises(NKIRuntimeError, match="uninitialised"):
        simulate(kernel, [x])


def test_a_tile_aliasing_a_recycled_block_keeps_its_values(rng):
    def kernel(x):
        out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        blocks = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        first = None
        for i in nl.static_range(2):
            tile = nl.load(x[i])
            blocks[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = tile
            if i == 0:
                first = tile  # after the assignment the tile reads block 0
        nl.store(out[0], value=first)
        nl.store(out[1], value=blocks[1, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((2, 128, 64)).astype(np.float32)
    np.testing.assert_array_equal(simulate(kernel, [x]).outputs[0], x)


def test_a_tensor_read_by_every_iteration_of_a_later_loop_outlives_that_loops_intermediates(rng, monkeypatch):
    block_bytes = 128 * 64 * 4 + 128 * 64  # one (128, 64) fp32 block and its initialisation mask
    monkeypatch.setattr(recycling, "RETIRED_BLOCK_BYTES", 2 * block_bytes + block_bytes // 2)

    def kernel(x):
        out = nl.ndarray((2, 4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        kept = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        scratch = nl.ndarray((2, 4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            kept[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.load(x[i])
        for j in nl.affine_range(2):
            for k in nl.affine_range(4):
                scratch[j, k, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.add(
                    kept[0, nl.arange(128)[:, None], nl.arange(64)[None, :]],
                    kept[1, nl.arange(128)[:, None], nl.arange(64)[None, :]])
                nl.store(out[j, k], value=scratch[j, k, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((2, 128, 64)).astype(np.float32)
    sim = simulate(kernel, [x])
    np.testing.assert_allclose(sim.outputs[0], np.broadcast_to(x[0] + x[1], (2, 4, 128, 64)), rtol=1e-6)
    assert not sim.rerun_without_recycling


def test_a_block_written_in_part_reads_back_that_part_and_refuses_the_rest(rng):
    def kernel(x, read_hi):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        blocks = nl.ndarray((2, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(1):
            blocks[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.load(x)  # the first half only
            lo = 64 if read_hi else 0
            nl.store(out, value=blocks[i, nl.arange(128)[:, None], lo + nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(simulate(kernel, [x, False]).outputs[0], x)
    with pytest.raises(NKIRuntimeError, match=r"uninitialised memory of tensor .*\[0:1, 0:128, 64:128\]"):
        simulate(kernel, [x, True])
