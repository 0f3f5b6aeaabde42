"""`simulate(..., workers=2)`: the halves of a top-level affine loop run in two processes, and the result
is what one process computes, value for value and trace row for trace row, errors included."""

from __future__ import annotations

import os

import numpy as np
import pytest

from engine.platforms.nki.simulator import NKIRuntimeError, simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.speed.splittable import parallel_loops


@pytest.fixture
def forks(monkeypatch):
    """Counts the processes the simulator forks (in the parent)."""
    made = []
    real_fork = os.fork

    def fork():
        pid = real_fork()
        if pid:
            made.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return made


def _same_trace(a, b) -> None:
    for name in a.columns:
        np.testing.assert_array_equal(a.columns[name], b.columns[name], err_msg=name)
    for name in a.access:
        np.testing.assert_array_equal(a.access[name], b.access[name], err_msg=name)
    assert a.tensors == b.tensors
    assert a.loops == b.loops
    assert a.loop_contexts == b.loop_contexts
    assert (a.op_names, a.dtype_names) == (b.op_names, b.dtype_names)


def matmul_kernel(a_t, b):
    """A compiler-style tiled matmul: blocked SBUF tiles, a PSUM accumulation, an HBM output."""
    k_tiles, _, m = a_t.shape
    n = b.shape[2]
    out = nl.ndarray((m // 128, 128, n), dtype=nl.float32, buffer=nl.shared_hbm)
    lhs = nl.ndarray((m // 128, k_tiles, nl.par_dim(128), 128), dtype=nl.float32, buffer=nl.sbuf)
    rhs = nl.ndarray((k_tiles, nl.par_dim(128), n), dtype=nl.float32, buffer=nl.sbuf)
    acc = nl.zeros((m // 128, nl.par_dim(128), n), dtype=nl.float32, buffer=nl.psum)
    res = nl.ndarray((m // 128, nl.par_dim(128), n), dtype=nl.float32, buffer=nl.sbuf)
    for k in nl.affine_range(k_tiles):
        rhs[k, nl.arange(128)[:, None], nl.arange(n)[None, :]] = nl.load(b[k])
    for i in nl.affine_range(m // 128):
        for k in nl.affine_range(k_tiles):
            lhs[i, k, nl.arange(128)[:, None], nl.arange(128)[None, :]] = nl.load(
                a_t[k, nl.arange(128)[:, None], 128 * i + nl.arange(128)[None, :]])
            acc[i, nl.arange(128)[:, None], nl.arange(n)[None, :]] += nisa.nc_matmul(
                lhs[i, k, nl.arange(128)[:, None], nl.arange(128)[None, :]],
                rhs[k, nl.arange(128)[:, None], nl.arange(n)[None, :]])
        res[i, nl.arange(128)[:, None], nl.arange(n)[None, :]] = nl.copy(acc[i, nl.arange(128)[:, None],
                                                                              nl.arange(n)[None, :]])
        nl.store(out[i], value=res[i, nl.arange(128)[:, None], nl.arange(n)[None, :]])
    return out


def test_a_split_loop_computes_and_traces_exactly_what_one_process_does(rng, forks):
    a_t = rng.standard_normal((3, 128, 640)).astype(np.float32)  # K = 384, M = 640: 5 row tiles
    b = rng.standard_normal((3, 128, 512)).astype(np.float32)
    one = simulate(matmul_kernel, [a_t, b])
    assert not forks
    two = simulate(matmul_kernel, [a_t, b], workers=2)
    assert len(forks) == 2  # both top-level loops were split
    assert two.parallel_fallback == ""
    np.testing.assert_array_equal(two.outputs[0], one.outputs[0])
    expected = (a_t.reshape(384, 640).T @ b.reshape(384, 512)).reshape(5, 128, 512)
    np.testing.assert_allclose(two.outputs[0], expected, rtol=2e-4, atol=2e-4)
    assert two.instructions == one.instructions
    _same_trace(two.trace, one.trace)


def test_an_output_the_second_half_leaves_unwritten_still_reads_back_as_nan(rng, forks):
    def kernel(x):
        out = nl.ndarray((8, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)  # 2 MiB: shared storage
        for i in nl.affine_range(7):  # the last tile is never written
            nl.store(out[i], value=nl.exp(nl.load(x[i])))
        return out

    x = rng.standard_normal((8, 128, 512)).astype(np.float32)
    two = simulate(kernel, [x], workers=2)
    assert len(forks) == 1
    np.testing.assert_allclose(two.outputs[0][:7], np.exp(x[:7]), rtol=1e-6)
    assert np.isnan(two.outputs[0][7]).all()
    _same_trace(two.trace, simulate(kernel, [x]).trace)


def test_a_race_between_the_halves_is_reported_as_in_one_process(rng, forks):
    def kernel(x):
        out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            nl.store(out[i % 2], value=nl.load(x[i]))  # iterations 0 (first half) and 2 (second) race
        return out

    x = rng.standard_normal((3, 128, 64)).astype(np.float32)
    with pytest.raises(NKIRuntimeError) as one:
        simulate(kernel, [x])
    with pytest.raises(NKIRuntimeError) as two:
        simulate(kernel, [x], workers=2)
    assert len(forks) == 1  # split, the race found at the merge, then run again in one process
    assert str(two.value) == str(one.value)
    assert "both write tensor" in str(two.value)


def test_an_error_in_the_second_half_is_the_one_process_error(rng, forks, tmp_path):
    def kernel(x):
        out = nl.ndarray((5, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(5):  # iteration 4, in the second half, reads past the end of x
            nl.store(out[i], value=nl.load(x[i]))
        return out

    x = rng.standard_normal((4, 128, 64)).astype(np.float32)
    marker = tmp_path / "pids"
    with pytest.raises(Exception) as one:
        simulate(kernel, [x])
    with pytest.raises(Exception) as two:
        simulate(kernel, [x], workers=2)
    with marker.open("a") as f:  # a child that came back into pytest would get here too
        f.write(f"{os.getpid()}\n")
    assert len(forks) == 1
    assert type(two.value) is type(one.value)
    assert str(two.value) == str(one.value)
    assert marker.read_text().split() == [str(os.getpid())]


def test_a_dependency_across_the_halves_falls_back_to_one_process(rng, forks):
    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(4):
            buf[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.load(x[i])
        for j in nl.affine_range(4):
            # iteration j also writes the tile iteration 3 - j reads: a dependency across iterations
            buf[j, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.exp(
                buf[3 - j, nl.arange(128)[:, None], nl.arange(64)[None, :]])
            nl.store(out[j], value=buf[j, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((4, 128, 64)).astype(np.float32)
    one = simulate(kernel, [x])
    two = simulate(kernel, [x], workers=2)
    assert two.parallel_fallback
    np.testing.assert_array_equal(two.outputs[0], one.outputs[0])
    _same_trace(two.trace, one.trace)


def test_loops_with_python_side_effects_or_accumulations_across_iterations_are_not_split():
    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        total = nl.zeros((nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        seen = []
        for i in nl.affine_range(4):  # appends to a Python list
            seen.append(i)
        for j in nl.affine_range(4):  # a loop_reduce adding across its own iterations
            total[nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                nl.load(x[j]), op=np.add, loop_indices=[j])
        for m in nl.affine_range(4):  # every iteration accumulates into one tile
            total[nl.arange(128)[:, None], nl.arange(64)[None, :]] += nl.load(x[m])
        for r in nl.affine_range(4):  # draws from numpy's global generator
            nl.store(out[r], value=nl.multiply(nl.load(x[r]), np.random.rand()))
        for k in nl.affine_range(4):  # only tensors, each iteration its own tile: may be split
            nl.store(out[k], value=nl.load(x[k]))
        return out

    lines = sorted(parallel_loops(kernel))
    assert len(lines) == 1
    source, first = __import__("inspect").getsourcelines(kernel)
    assert "for k in" in source[lines[0] - first]


def max_across_heads_kernel(x):
    """A max across a top-level loop's iterations (a softmax's running max), then a loop that uses it."""
    out = nl.ndarray((2, 4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    peak = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    staged = nl.ndarray((2, 4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
    for h in nl.affine_range(2):
        for j in nl.affine_range(4):
            staged[h, j, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.exp(nl.load(x[h, j]))
            peak[j, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                staged[h, j, nl.arange(128)[:, None], nl.arange(64)[None, :]], op=np.max, loop_indices=[h])
    for h2 in nl.affine_range(2):
        for j2 in nl.affine_range(4):
            nl.store(out[h2, j2], value=nl.subtract(
                staged[h2, j2, nl.arange(128)[:, None], nl.arange(64)[None, :]],
                peak[j2, nl.arange(128)[:, None], nl.arange(64)[None, :]]))
    return out


def test_a_max_reduced_across_a_split_loop_combines_the_halves_exactly(rng, forks):
    x = rng.standard_normal((2, 4, 128, 64)).astype(np.float32)
    one = simulate(max_across_heads_kernel, [x])
    two = simulate(max_across_heads_kernel, [x], workers=2)
    assert len(forks) == 2  # the reducing loop is split too
    assert two.parallel_fallback == ""
    np.testing.assert_array_equal(two.outputs[0], one.outputs[0])
    np.testing.assert_allclose(one.outputs[0], np.exp(x) - np.exp(x).max(axis=0), rtol=1e-5, atol=1e-6)
    # The second half's first contribution reads the destination, as it does after the first half's.
    _same_trace(two.trace, one.trace)


def test_a_max_reduced_within_each_iteration_of_a_split_loop_stays_each_halfs_own(rng, forks):
    def kernel(x):  # a row max per head, used in the same iteration (bmm_softmax's shape)
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        peak = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for h in nl.affine_range(4):
            for j in nl.affine_range(2):
                peak[h, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                    nl.load(x[h, j]), op=np.max, loop_indices=[j])
            nl.store(out[h], value=peak[h, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((4, 2, 128, 64)).astype(np.float32)
    one = simulate(kernel, [x])
    two = simulate(kernel, [x], workers=2)
    assert len(forks) == 1
    assert two.parallel_fallback == ""
    np.testing.assert_array_equal(two.outputs[0], x.max(axis=1))
    _same_trace(two.trace, one.trace)


def test_a_sum_across_the_loop_or_a_half_reading_its_partial_max_runs_in_one_process(rng, forks):
    def summing(x):
        total = nl.ndarray((nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for h in nl.affine_range(4):
            total[nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                nl.load(x[h]), op=np.add, loop_indices=[h])
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=total[nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    def peeking(x):  # each iteration stores the max so far: the second half would see only its own
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        peak = nl.ndarray((nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for h in nl.affine_range(4):
            peak[nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                nl.load(x[h]), op=np.max, loop_indices=[h])
            nl.store(out[h], value=peak[nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    def uneven(x):  # the second half reduces into a region the first half never touches
        out = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        peak = nl.ndarray((2, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for h in nl.affine_range(4):
            peak[h // 2, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                nl.load(x[h]), op=np.max, loop_indices=[h])
        for k in nl.affine_range(2):
            nl.store(out[k], value=peak[k, nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    x = rng.standard_normal((4, 128, 64)).astype(np.float32)
    assert parallel_loops(summing) == {}
    for kernel, why in ((peeking, "read a region"), (uneven, "assumed a reduction")):
        one = simulate(kernel, [x])
        two = simulate(kernel, [x], workers=2)
        assert why in two.parallel_fallback
        np.testing.assert_array_equal(two.outputs[0], one.outputs[0])
        _same_trace(two.trace, one.trace)
    np.testing.assert_array_equal(one.outputs[0], np.stack([x[:2].max(axis=0), x[2:].max(axis=0)]))


def test_a_python_value_carried_from_one_iteration_to_the_next_keeps_the_loop_whole(rng):
    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        off = 0.0
        for i in nl.affine_range(4):  # reads `off` before this iteration assigns it
            nl.store(out[i], value=nl.add(nl.load(x[i]), off))
            off = off + 1.0
        return out

    x = rng.standard_normal((4, 128, 64)).astype(np.float32)
    assert parallel_loops(kernel) == {}
    two = simulate(kernel, [x], workers=2)
    np.testing.assert_allclose(two.outputs[0], x + np.arange(4, dtype=np.float32)[:, None, None], rtol=1e-6)


def test_a_later_split_reading_what_its_second_half_writes_in_shared_output_falls_back(rng, forks):
    def kernel(x):
        out = nl.ndarray((8, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)  # shared after the first split
        out2 = nl.ndarray((8, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(8):
            nl.store(out[i], value=nl.load(x[i]))
        for j in nl.affine_range(8):  # iterations 0-3 read what 4-7 then overwrite
            nl.store(out2[j], value=nl.exp(nl.load(out[7 - j])))
            if j >= 4:
                nl.store(out[j], value=nl.multiply(nl.load(x[j]), 2.0))
        return out, out2

    x = rng.standard_normal((8, 128, 512)).astype(np.float32)
    one = simulate(kernel, [x])
    two = simulate(kernel, [x], workers=2)
    assert two.parallel_fallback  # caught at the merge, then run in one process
    for a, b in zip(two.outputs, one.outputs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_results_left_pending_at_a_loop_boundary_trace_as_in_one_process(rng, forks):
    def kernel(x, w):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        held = nl.ndarray((4, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        w_tile = nl.load(w)  # claimed inside the loop below, by its first iteration
        for i in nl.affine_range(4):
            held[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = w_tile
        for k in nl.affine_range(4):
            nl.store(out[k], value=nl.add(nl.load(x[k]),
                                          held[k, nl.arange(128)[:, None], nl.arange(64)[None, :]]))
            nl.exp(nl.load(x[k]))  # a result nothing claims, at the end of the body
        return out

    x = rng.standard_normal((4, 128, 64)).astype(np.float32)
    w = rng.standard_normal((128, 64)).astype(np.float32)
    one = simulate(kernel, [x, w])
    two = simulate(kernel, [x, w], workers=2)
    assert len(forks) == 1  # the first loop runs whole: a result is waiting for it
    np.testing.assert_array_equal(two.outputs[0], one.outputs[0])
    _same_trace(two.trace, one.trace)
    without = simulate(kernel, [x, w], workers=2, record_trace=False)
    assert without.instructions == one.instructions
    np.testing.assert_array_equal(without.outputs[0], one.outputs[0])


def test_the_merge_compares_boxes_exactly_and_assumes_views_of_two_shapes_meet():
    from engine.platforms.nki.simulator.speed.parallel import box_array, overlapping

    first = {((0, 1), (0, 128), (0, 64)), ((1, 2), (0, 128), (0, 64))}
    assert not overlapping(first, {((2, 3), (0, 128), (0, 64))})  # apart on the split axis
    assert not overlapping(first, {((0, 2), (0, 128), (64, 128))})  # apart on the last axis only
    assert overlapping(first, {((1, 2), (127, 128), (63, 64))})  # one shared element
    assert overlapping(box_array(first), {((1, 2), (100, 101), (0, 1))})  # arrays made ahead of time
    assert not overlapping(first, None) and not overlapping(set(), first)
    assert overlapping(first, {((0, 1), (0, 128))})  # a two-axis view of the same storage
    assert overlapping({((0, 1), (0, 2)), ((0, 1),)}, first)


def test_a_block_the_first_split_handed_over_is_watched_in_the_next(rng, forks):
    # The first loop's child hands blocks 4-6 over in memory the processes share; in the second loop the
    # first half reads block 4 before (in iteration order) the second half overwrites it.
    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        buf = nl.ndarray((8, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(7):
            buf[i, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.load(x[i])
        for j in nl.affine_range(4):
            nl.store(out[j], value=buf[j + 3, nl.arange(128)[:, None], nl.arange(64)[None, :]])
            buf[j + 2, nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.multiply(
                buf[j + 3, nl.arange(128)[:, None], nl.arange(64)[None, :]], 2.0)
        return out

    x = rng.standard_normal((7, 128, 64)).astype(np.float32)
    one = simulate(kernel, [x])
    two = simulate(kernel, [x], workers=2)
    assert "read shared memory" in two.parallel_fallback
    np.testing.assert_array_equal(two.outputs[0], one.outputs[0])
    np.testing.assert_array_equal(one.outputs[0], x[3:7])


def test_memory_a_child_hands_over_in_place_is_known_as_shared():
    from engine.platforms.nki.simulator.speed.exchange import Exchange, in_shared_memory

    exchange = Exchange()
    block = exchange.zeros((128, 64), np.dtype(np.float32))
    assert in_shared_memory(block) and in_shared_memory(block[1:, :8].T)
    assert exchange.put(block) == (0, "<f4", (128, 64))  # already there: not copied again
    assert not in_shared_memory(np.zeros((128, 64), np.float32)[:, 1:])


@pytest.mark.filterwarnings("ignore:divide by zero")  # 1 / 0.0 is the point
def test_max_reductions_the_merge_could_not_combine_exactly_run_in_one_process(rng):
    def overlapping_regions(xa, xb):  # rows 0:64, then all 128 rows, of one tile
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        peak = nl.ndarray((nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for h in nl.affine_range(4):
            peak[nl.arange(64)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                nl.load(xa[h]), op=np.max, loop_indices=[h])
            peak[nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                nl.load(xb[h]), op=np.max, loop_indices=[h])
        nl.store(out, value=peak[nl.arange(128)[:, None], nl.arange(64)[None, :]])
        return out

    def signed_zeros(x):  # +0.0 before the loop, -0.0 from the first half: which zero wins is order
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        peak = nl.zeros((nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)
        for h in nl.affine_range(4):
            peak[nl.arange(128)[:, None], nl.arange(64)[None, :]] = nl.loop_reduce(
                nl.load(x[h]), op=np.max, loop_indices=[h])
        nl.store(out, value=nl.divide(1.0, peak[nl.arange(128)[:, None], nl.arange(64)[None, :]]))
        return out

    xa = rng.standard_normal((4, 64, 64)).astype(np.float32)
    xa[2] = 100.0  # the second half's first iteration holds the maximum of rows 0:64
    xb = rng.standard_normal((4, 128, 64)).astype(np.float32)
    zeros = np.full((4, 128, 64), -1.0, dtype=np.float32)
    zeros[1] = -0.0
    for kernel, inputs, why in ((overlapping_regions, [xa, xb], "partly written"),
                                (signed_zeros, [zeros], "tie with different bits")):
        one = simulate(kernel, inputs)
        two = simulate(kernel, inputs, workers=2)
        assert why in two.parallel_fallback
        np.testing.assert_array_equal(two.outputs[0], one.outputs[0])
        _same_trace(two.trace, one.trace)
    np.testing.assert_array_equal(one.outputs[0], -np.inf)  # 1 / -0.0


def test_a_split_run_without_a_trace_keeps_every_loop_context(rng):
    def kernel(x):
        out = nl.ndarray((4, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            nl.store(out[i], value=nl.exp(nl.load(x[i])))
        return out

    x = rng.standard_normal((4, 128, 64)).astype(np.float32)
    one = simulate(kernel, [x], record_trace=False)
    two = simulate(kernel, [x], record_trace=False, workers=2)
    assert two.trace.loop_contexts == one.trace.loop_contexts and len(one.trace.loop_contexts) == 5
    assert two.instructions == one.instructions
