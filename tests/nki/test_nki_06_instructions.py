"""The instructions added from the NKI 0.6 API reference (issue 34), as their reference pages describe them, in
both generations (functional `neuronxcc.nki.isa`, destination-first `nki.isa`), and each priced by the
performance model."""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.hardware import get_core_spec
from engine.platforms.nki.perf.costs import instruction_costs
from engine.platforms.nki.simulator import NKICompileError, NKIRuntimeError, simulate
from engine.platforms.nki.simulator.semantics import namespaces
from engine.platforms.nki.simulator.semantics.isa_v06 import DESTINATION, FUNCTIONAL, LANGUAGE, language_ops

MODS = namespaces.build()
nl = MODS["neuronxcc.nki.language"]
nisa = MODS["neuronxcc.nki.isa"]
nl2 = MODS["nki.language"]
nisa2 = MODS["nki.isa"]


def _out(shape, dtype=None):
    return nl.ndarray(shape, dtype=dtype or nl.float32, buffer=nl.shared_hbm)


def test_tensor_scalar_reduce_scales_and_reduces_into_reduce_res(rng):
    def kernel(a):
        out, red = _out(a.shape), _out((a.shape[0], 1))
        r = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
        t = nisa.tensor_scalar_reduce(data=nl.load(a), op0=nl.multiply, operand0=2.0, reduce_op=nl.max, reduce_res=r)
        nl.store(out, t)
        nl.store(red, r)
        return out, red

    a = rng.standard_normal((128, 64)).astype(np.float32)
    out, red = simulate(kernel, [a]).outputs
    np.testing.assert_array_equal(out, a * 2)
    np.testing.assert_array_equal(red[:, 0], (a * 2).max(axis=1))


def test_max8_returns_the_eight_largest_values_in_descending_order(rng):
    def kernel(a):
        out = _out((a.shape[0], 8))
        nl.store(out, nisa.max8(src=nl.load(a)))
        return out

    a = rng.standard_normal((32, 100)).astype(np.float32)
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], -np.sort(-a, axis=1)[:, :8])


def test_nc_find_index8_takes_successive_occurrences_and_marks_missing_values_all_ones():
    def kernel(data, vals):
        out = _out((1, 8), nl.uint32)
        nl.store(out, nisa.nc_find_index8(data=nl.load(data), vals=nl.load(vals)))
        return out

    data = np.array([[5, 7, 7, 1, 7, 2, 9, 3, 0, 4]], dtype=np.float32)
    vals = np.array([[7, 7, 7, 7, 9, 1, 42, 5]], dtype=np.float32)
    got = simulate(kernel, [data, vals]).outputs[0]
    assert got.tolist() == [[1, 2, 4, 0xFFFFFFFF, 6, 3, 0xFFFFFFFF, 0]]


def test_nc_match_replace8_pairs_duplicate_values_from_the_last_slot_down():
    # The API reference's own example (NKI 0.6 order): dst_idx = [2, 10, 9, 8, 7, 6, 5, 4].
    def kernel(data, vals):
        out, idx = _out(data.shape), _out((1, 8), nl.uint32)
        i = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nl.store(out, nisa.nc_match_replace8(data=nl.load(data), vals=nl.load(vals), imm=-1.0, dst_idx=i))
        nl.store(idx, i)
        return out, idx

    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], dtype=np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], dtype=np.float32)
    out, idx = simulate(kernel, [data, vals]).outputs
    assert idx.tolist() == [[2, 10, 9, 8, 7, 6, 5, 4]]
    assert out.tolist() == [[1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]]


@pytest.mark.parametrize(("prob", "kept"), [(0.0, 1.0), (1.0, 0.0)])
def test_dropout_keeps_everything_at_zero_and_nothing_at_one(rng, prob, kept):
    def kernel(a):
        out = _out(a.shape)
        nl.store(out, nisa.dropout(nl.load(a), prob=prob))
        return out

    a = rng.standard_normal((16, 32)).astype(np.float32) + 5
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], a * kept)


def test_dropout_drops_about_the_asked_fraction_and_rand_is_uniform_and_repeatable():
    def kernel(a):
        out, r = _out(a.shape), _out((64, 256))
        nl.store(out, nisa.dropout(nl.load(a), prob=0.25))
        nl.store(r, nl.rand((64, 256)))
        return out, r

    a = np.ones((128, 512), dtype=np.float32)
    first = simulate(kernel, [a]).outputs
    dropped = float((first[0] == 0).mean())
    assert 0.22 < dropped < 0.28
    assert 0.0 <= first[1].min() and first[1].max() < 1.0 and 0.45 < first[1].mean() < 0.55
    again = simulate(kernel, [a]).outputs
    np.testing.assert_array_equal(first[1], again[1])  # a kernel's random values do not change between runs


def test_tensor_partition_reduce_reduces_across_partitions(rng):
    def kernel(a):
        out = _out((1, a.shape[1]))
        nl.store(out, nisa.tensor_partition_reduce(np.add, nl.load(a)))
        return out

    a = rng.standard_normal((128, 32)).astype(np.float32)
    np.testing.assert_allclose(simulate(kernel, [a]).outputs[0], a.sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-5)


def test_bn_stats_then_bn_aggr_give_each_partitions_mean_and_variance(rng):
    def kernel(a):
        out = _out((a.shape[0], 2))
        stats = nl.ndarray((a.shape[0], 12), dtype=nl.float32, buffer=nl.sbuf)
        for k in nl.affine_range(2):
            stats[:, 6 * k:6 * k + 6] = nisa.bn_stats(nl.load(a[:, 256 * k:256 * (k + 1)]))
        nl.store(out, nisa.bn_aggr(stats))
        return out

    a = rng.standard_normal((64, 512)).astype(np.float32)
    got = simulate(kernel, [a]).outputs[0]
    np.testing.assert_allclose(got[:, 0], a.mean(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[:, 1], a.var(axis=1), rtol=1e-4, atol=1e-5)


def test_bn_stats_refuses_more_than_512_elements_per_partition(rng):
    def kernel(a):
        return nisa.bn_stats(nl.load(a))

    with pytest.raises(NKICompileError, match="at most 512"):
        simulate(kernel, [rng.standard_normal((8, 1024)).astype(np.float32)])


def test_tensor_copy_predicated_copies_only_where_the_predicate_holds(rng):
    def kernel(src, dst, pred):
        out = _out(dst.shape)
        d = nl.load(dst)
        nisa.tensor_copy_predicated(src=nl.load(src), dst=d, predicate=nl.load(pred))
        nl.store(out, d)
        return out

    src = rng.standard_normal((8, 16)).astype(np.float32)
    dst = rng.standard_normal((8, 16)).astype(np.float32)
    pred = (rng.random((8, 16)) > 0.5).astype(np.uint8)
    np.testing.assert_array_equal(simulate(kernel, [src, dst, pred]).outputs[0], np.where(pred != 0, src, dst))


def test_dma_transpose_and_load_transpose2d_transpose_on_the_way_in(rng):
    def kernel(a):
        out1, out2 = _out(a.shape[::-1]), _out(a.shape[::-1])
        nl.store(out1, nisa.dma_transpose(a))
        nl.store(out2, nl.load_transpose2d(a))
        return out1, out2

    a = rng.standard_normal((64, 128)).astype(np.float32)
    for got in simulate(kernel, [a]).outputs:
        np.testing.assert_array_equal(got, a.T)


def test_the_destination_first_generation_writes_dst(rng):
    def kernel(a):
        out = nl2.ndarray((a.shape[0], 8), dtype=nl2.float32, buffer=nl2.shared_hbm)
        t = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
        top = nl2.ndarray((a.shape[0], 8), dtype=nl2.float32, buffer=nl2.sbuf)
        nisa2.dma_copy(dst=t, src=a)
        nisa2.max8(dst=top, src=t)
        nisa2.dma_copy(dst=out, src=top)
        return out

    a = rng.standard_normal((16, 40)).astype(np.float32)
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], -np.sort(-a, axis=1)[:, :8])


def _exp_kernel(a):
    out = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.shared_hbm)
    t = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    e = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t, src=a)
    nisa2.exponential(dst=e, src=t, max_value=1.0)
    nisa2.dma_copy(dst=out, src=e)
    return out


@pytest.mark.parametrize("platform", ["trn1", "trn2"])
def test_a_neuroncore_v4_instruction_is_refused_on_older_cores_with_the_reason(platform):
    with pytest.raises(NKICompileError, match=f"exponential exists only on NeuronCore-v4.*{platform} is NeuronCore"):
        simulate(_exp_kernel, [np.zeros((4, 8), np.float32)], platform=platform)


def test_a_neuroncore_v4_instruction_runs_on_trn3(rng):
    a = rng.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(simulate(_exp_kernel, [a], platform="trn3").outputs[0], np.exp(a - 1.0), rtol=1e-6)


# -- every new instruction costs something ------------------------------------------------------------------
def _kernels():
    """One small kernel per instruction name this module adds (functional form), by name."""
    def run(body):
        def kernel(a):
            body(nl.load(a), a)
            return _out((1, 1))
        return kernel

    col = nl.ndarray
    return {
        "tensor_scalar_reduce": run(lambda t, a: nisa.tensor_scalar_reduce(
            data=t, op0=nl.add, operand0=1.0, reduce_op=nl.add,
            reduce_res=col((128, 1), dtype=nl.float32, buffer=nl.sbuf))),
        "max8": run(lambda t, a: nisa.max8(src=t)),
        "nc_find_index8": run(lambda t, a: nisa.nc_find_index8(data=t, vals=nisa.max8(src=t))),
        "nc_match_replace8": run(lambda t, a: nisa.nc_match_replace8(data=t, vals=nisa.max8(src=t), imm=0.0)),
        "dropout": run(lambda t, a: nisa.dropout(t, prob=0.5)),
        "bn_stats": run(lambda t, a: nisa.bn_aggr(nisa.bn_stats(t))),
        "bn_aggr": run(lambda t, a: nisa.bn_aggr(nisa.bn_stats(t))),
        "tensor_copy_predicated": run(lambda t, a: nisa.tensor_copy_predicated(
            src=t, dst=nl.zeros((128, 64), dtype=nl.float32), predicate=nl.zeros((128, 64), dtype=nl.uint8))),
        "tensor_partition_reduce": run(lambda t, a: nisa.tensor_partition_reduce(np.add, t)),
        "dma_transpose": run(lambda t, a: nisa.dma_transpose(a)),
        "load_transpose2d": run(lambda t, a: nl.load_transpose2d(a)),
        "rand": run(lambda t, a: nl.rand((128, 64))),
        "tensor_scalar_cumulative": run(lambda t, a: nisa.tensor_scalar_cumulative(
            dst=col((128, 64), dtype=nl.float32, buffer=nl.sbuf), src=t, op0=nl.add, op1=nl.add, imm0=0.0)),
        "affine_select": run(lambda t, a: nisa.affine_select(
            pred=(nl.arange(128)[:, None] < nl.arange(64)[None, :]), on_true_tile=t, on_false_value=0.0)),
        "select_reduce": run(lambda t, a: nisa.select_reduce(
            dst=col((128, 64), dtype=nl.float32, buffer=nl.sbuf), predicate=nl.zeros((128, 64), dtype=nl.uint8),
            on_true=t, on_false=0.0)),
        "range_select": run(lambda t, a: nisa.range_select(
            on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less, bound0=nl.zeros((128, 1), dtype=nl.float32),
            bound1=nl.full((128, 1), 8.0, dtype=nl.float32))),
        "var": run(lambda t, a: nl.var(t, axis=1)),
        "softmax": run(lambda t, a: nl.softmax(t, axis=1)),
        "rms_norm": run(lambda t, a: nl.rms_norm(t, t, axis=1)),
        "abs_min": run(lambda t, a: nl.abs_min(t, t)),
        "mod": run(lambda t, a: nl.mod(t, t)),
        "bypass": run(lambda t, a: nl.bypass(t)),
        "gelu_dx": run(lambda t, a: nl.gelu_dx(t)),
        "gelu_apprx_sigmoid_dx": run(lambda t, a: nl.gelu_apprx_sigmoid_dx(t)),
        "silu_dx": run(lambda t, a: nl.silu_dx(t)),
        "erf_dx": run(lambda t, a: nl.erf_dx(t)),
        "rng": lambda a: _rng_kernel(a),
        "register_load": lambda a: _dst_kernel(a, lambda t, d: nisa2.register_load(nisa2.register_alloc(), t)),
        "set_rng_seed": lambda a: _dst_kernel(a, lambda t, d: nisa2.set_rng_seed(t)),
        "nc_n_gather": lambda a: _dst_kernel(a, lambda t, d: nisa2.nc_n_gather(
            dst=d, data=t, indices=nl2.zeros((128, 64), dtype=nl2.uint32, buffer=nl2.sbuf))),
        "nonzero_with_count": lambda a: _dst_kernel(a, lambda t, d: nisa2.nonzero_with_count(
            dst=nl2.zeros((128, 65), dtype=nl2.int32, buffer=nl2.sbuf), src=t)),
        "local_gather": run(lambda t, a: nisa.local_gather(t, nl.zeros((128, 2), dtype=nl.uint16))),
        "gather_flattened": run(lambda t, a: nl.gather_flattened(t, nl.zeros((128, 8), dtype=nl.uint32))),
        "sequence_bounds": run(lambda t, a: nisa.sequence_bounds(segment_ids=nl.load(a[0:1, :]))),
        "nc_stream_shuffle": run(lambda t, a: nisa.nc_stream_shuffle(
            src=t, dst=col((128, 64), dtype=nl.float32, buffer=nl.sbuf), shuffle_mask=list(range(32)))),
    }


def _dst_kernel(a, body):
    """A destination-first kernel around one instruction: `body(tile of a, destination tile)`."""
    out = nl2.ndarray((1, 1), dtype=nl2.float32, buffer=nl2.shared_hbm)
    t = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    d = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t, src=a)
    body(t, d)
    return out


def _rng_kernel(a):
    out = nl2.ndarray((128, 64), dtype=nl2.uint32, buffer=nl2.shared_hbm)
    t = nl2.ndarray((128, 64), dtype=nl2.uint32, buffer=nl2.sbuf)
    nisa2.rng(dst=t)
    nisa2.dma_copy(dst=out, src=t)
    return out


def _instruction_names() -> set[str]:
    """Every instruction this issue added (the functions the simulator's @instruction decorator marks), in both
    generations, by its NKI name."""
    found = set()
    for table in (FUNCTIONAL, LANGUAGE, DESTINATION, language_ops()):
        for value in table.values():
            name = getattr(value, "nki_name", None)
            if name is not None:
                found.add(name)
    return found


V4_ONLY = {"exponential", "rand2", "activate2"}  # priced on trn3 below


def test_every_new_instruction_has_a_cost_on_every_platform():
    kernels = _kernels()
    listed = _instruction_names() - V4_ONLY
    assert listed <= set(kernels), f"instructions without a pricing kernel: {sorted(listed - set(kernels))}"
    a = np.ones((128, 64), np.float32)
    for platform in ("trn1", "trn2", "trn3"):
        for name, kernel in sorted(kernels.items()):
            if name in ("range_select", "nonzero_with_count") and platform == "trn1":
                continue  # NeuronCore-v3 and newer
            trace = simulate(kernel, [a], platform=platform).trace
            costs = instruction_costs(trace, get_core_spec(platform))
            ops = [trace.op_names[k] for k in np.asarray(trace.columns["opcode"])]
            assert name in ops, f"{name} left no row in the trace"
            for op, seconds, moved in zip(ops, costs.seconds, costs.dma_bytes, strict=True):
                assert seconds > 0 or moved > 0, f"{op} ({name}'s kernel) is free on {platform}"
    for kernel in (_exp_kernel, _rand2_kernel, _activate2_kernel):
        trace = simulate(kernel, [np.ones((4, 8), np.float32)], platform="trn3").trace
        costs = instruction_costs(trace, get_core_spec("trn3"))
        assert all(s > 0 or b > 0 for s, b in zip(costs.seconds, costs.dma_bytes, strict=True))


def _rand2_kernel(a):
    out = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.shared_hbm)
    t = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.rand2(dst=t, min=-1.0, max=1.0)
    nisa2.dma_copy(dst=out, src=t)
    return out


# -- indirect DMA: addresses from a tile's values -------------------------------------------------------------
def _gather_scatter(data, idx):
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(data.shape[1])[None, :]
    index = nl.load(idx)  # (rows, 1) int32 on the chip
    rows = nl.load(data[index, i_f])  # gather: row idx[k] of data into partition k
    nl.store(out[index, i_f], value=rows)  # scatter it back to the same rows
    return out


def test_a_tile_of_indices_gathers_and_scatters_rows(rng):
    data = rng.standard_normal((16, 32)).astype(np.float32)
    idx = np.array([[3], [0], [7], [12]], dtype=np.int32)
    got = simulate(_gather_scatter, [data, idx]).outputs[0]
    np.testing.assert_array_equal(got[idx[:, 0]], data[idx[:, 0]])


def test_an_index_tile_pointing_outside_the_tensor_is_an_error(rng):
    with pytest.raises(NKIRuntimeError, match="index 16 is out of bounds for axis 0"):
        simulate(_gather_scatter, [rng.standard_normal((16, 32)).astype(np.float32), np.array([[16]], np.int32)])


def test_a_program_with_indirect_addresses_refuses_to_replay(rng):
    from engine.platforms.nki.simulator.verification.program import ReplayError
    from engine.platforms.nki.simulator.verification.replay import check_program

    data = rng.standard_normal((16, 32)).astype(np.float32)
    program = simulate(_gather_scatter, [data, np.array([[1]], np.int32)], record_program=True).program
    assert program.indirect
    with pytest.raises(ReplayError, match="cannot be replayed on other inputs"):
        check_program(program)


def test_matmul_accumulation_into_a_never_written_psum_tile_starts_at_zero(rng):
    # The attention tutorial's v8-v11 pattern: `acc[...] += nc_matmul(...)` into an nl.ndarray in PSUM.
    def kernel(a, b):
        out = _out((128, 256))
        acc = nl.ndarray((2, nl.par_dim(128), 256), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(3):
            acc[1] += nisa.nc_matmul(nl.load(a[k]), nl.load(b[k]))
        nl.store(out, nisa.tensor_copy(acc[1]))
        return out

    a = rng.standard_normal((3, 128, 128)).astype(np.float32)
    b = rng.standard_normal((3, 128, 256)).astype(np.float32)
    expected = sum(a[k].T.astype(np.float64) @ b[k] for k in range(3))
    np.testing.assert_allclose(simulate(kernel, [a, b]).outputs[0], expected, rtol=1e-4, atol=1e-3)


def test_collectives_import_and_refuse_with_the_reason():
    def kernel(a):
        MODS["nki.collectives"].all_reduce(a)

    with pytest.raises(NKICompileError, match="collectives are not simulated: the CPU simulator runs one NeuronCore"):
        simulate(kernel, [np.zeros((2, 2), np.float32)])


def test_an_access_pattern_views_a_tile_as_pool_windows(rng):
    # The SDK example's 2x2 max pool: .ap() gives a (C, H/2, W/2, 2, 2) view of a (C, H, W) tile.
    def kernel(a):
        c, h, w = a.shape
        out = _out((c, h // 2, w // 2))
        t = nl.load(a)
        view = t.ap([[h * w, c], [2 * w, h // 2], [2, w // 2], [w, 2], [1, 2]])
        nl.store(out, nl.max(view, axis=[3, 4]))
        return out

    a = rng.standard_normal((4, 6, 8)).astype(np.float32)
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], a.reshape(4, 3, 2, 4, 2).max(axis=(2, 4)))


def test_an_access_pattern_outside_the_tensor_is_refused():
    def kernel(a):
        return nl.load(a).ap([[8, 2], [1, 9]])

    with pytest.raises(NKICompileError, match="reaches element 16 of tensor"):
        simulate(kernel, [np.zeros((2, 8), np.float32)])


def test_oob_mode_skip_leaves_out_the_rows_whose_index_is_outside(rng):
    def kernel(a):
        out = _out((8, 16))
        ix, iy = nl.mgrid[0:8, 0:16]
        idx = nisa.iota(3 * nl.arange(8)[:, None], dtype=np.int32)  # 0, 3, ..., 21: rows 6 and 7 outside a
        tile = nisa.memset(shape=(8, 16), value=-1.0, dtype=nl.float32)
        nisa.dma_copy(src=a[idx, iy], dst=tile[ix, iy], oob_mode=nisa.oob_mode.skip)
        nl.store(out, tile)
        return out

    a = rng.standard_normal((16, 16)).astype(np.float32)
    expected = np.full((8, 16), -1.0, np.float32)
    expected[:6] = a[0:16:3]
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], expected)


def test_nc_stream_shuffle_moves_partitions_within_each_quadrant_and_255_keeps_the_destination(rng):
    def kernel(a, b):
        out = _out(b.shape)
        t = nl.load(a)
        d = nl.load(b)
        mask = [(i + 1) % 32 for i in range(32)]
        mask[5] = 255
        nisa.nc_stream_shuffle(src=t, dst=d, shuffle_mask=mask)
        nl.store(out, d)
        return out

    a = rng.standard_normal((64, 8)).astype(np.float32)
    b = rng.standard_normal((64, 8)).astype(np.float32)
    expected = np.concatenate([np.roll(a[q * 32:(q + 1) * 32], -1, axis=0) for q in range(2)])
    expected[[5, 37]] = b[[5, 37]]
    np.testing.assert_array_equal(simulate(kernel, [a, b]).outputs[0], expected)


def test_gather_flattened_picks_each_partitions_elements_by_index(rng):
    def kernel(a, idx):
        out = _out(idx.shape)
        nl.store(out, nl.gather_flattened(nl.load(a), nl.load(idx)))
        return out

    a = rng.standard_normal((4, 16)).astype(np.float32)
    idx = rng.integers(0, 16, size=(4, 5)).astype(np.uint32)
    np.testing.assert_array_equal(simulate(kernel, [a, idx]).outputs[0], np.take_along_axis(a, idx.astype(int), 1))


def test_sequence_bounds_gives_each_segments_start_and_end_and_padding_n_and_minus_one():
    def kernel(ids):
        out = _out((1, 2, ids.shape[1]), nl.int32)
        nl.store(out, nisa.sequence_bounds(segment_ids=nl.load(ids)))
        return out

    ids = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], dtype=np.int32)  # the API reference's example
    got = simulate(kernel, [ids]).outputs[0]
    assert got.tolist() == [[[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]]]


def test_local_gather_gathers_within_each_group_of_16_partitions(rng):
    def kernel(src, index):
        out = _out((32, 3 * 2))
        nl.store(out, nisa.local_gather(nl.load(src), nl.load(index), num_elem_per_idx=2, num_valid_indices=3))
        return out

    src = rng.standard_normal((32, 10)).astype(np.float32)
    index = rng.integers(0, 4, size=(32, 1)).astype(np.uint16) * 2
    expected = np.empty((32, 6), np.float32)
    for core in range(2):
        rows = slice(16 * core, 16 * core + 16)
        starts = index[rows].flatten(order="F")[:3]
        cols = (starts[:, None] + np.arange(2)).reshape(-1)
        expected[rows] = src[rows][:, cols]
    np.testing.assert_array_equal(simulate(kernel, [src, index]).outputs[0], expected)


def _activate2_kernel(a):
    out = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.shared_hbm)
    red = nl2.ndarray((a.shape[0], 1), dtype=nl2.float32, buffer=nl2.shared_hbm)
    t = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    e = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    r = nl2.ndarray((a.shape[0], 1), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t, src=a)
    nisa2.activate2(dst=e, op=nl2.exp, data=t, imm0=2.0, imm1=1.0, op0=nl2.multiply, op1=nl2.subtract,
                    reduce_op=nl2.maximum, reduce_res=r)
    nisa2.dma_copy(dst=out, src=e)
    nisa2.dma_copy(dst=red, src=r)
    return out, red


def test_activate2_scales_subtracts_activates_and_reduces_on_trn3_only(rng):
    a = rng.standard_normal((8, 16)).astype(np.float32)
    out, red = simulate(_activate2_kernel, [a], platform="trn3").outputs
    np.testing.assert_allclose(out, np.exp(a * 2 - 1), rtol=1e-6)
    np.testing.assert_allclose(red[:, 0], np.exp(a * 2 - 1).max(axis=1), rtol=1e-6)
    with pytest.raises(NKICompileError, match="activate2 exists only on NeuronCore-v4"):
        simulate(_activate2_kernel, [a], platform="trn2")


def test_nonzero_with_count_writes_positions_padding_and_count_on_each_cores_first_partition():
    def kernel(a):
        out = nl2.ndarray((32, 9), dtype=nl2.int32, buffer=nl2.shared_hbm)
        t = nl2.ndarray((32, 8), dtype=nl2.float32, buffer=nl2.sbuf)
        d = nl2.ndarray((32, 9), dtype=nl2.int32, buffer=nl2.sbuf)
        nisa2.dma_copy(dst=t, src=a)
        nisa2.memset(dst=d, value=7)
        nisa2.nonzero_with_count(dst=d, src=t, index_offset=16, padding_val=-1)
        nisa2.dma_copy(dst=out, src=d)
        return out

    a = np.zeros((32, 8), np.float32)
    a[0] = [0, 1, 1, 0, 0, 1, 0, 0]  # the API reference's example
    got = simulate(kernel, [a], platform="trn2").outputs[0]
    assert got[0].tolist() == [17, 18, 21, -1, -1, -1, -1, -1, 3]
    assert got[16].tolist() == [-1] * 8 + [0]
    assert (got[1] == 7).all()  # the other partitions are untouched


def test_nc_n_gather_gathers_within_each_partition(rng):
    def kernel(a, idx):
        out = nl2.ndarray(idx.shape, dtype=nl2.float32, buffer=nl2.shared_hbm)
        t = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
        i = nl2.ndarray(idx.shape, dtype=nl2.uint32, buffer=nl2.sbuf)
        g = nl2.ndarray(idx.shape, dtype=nl2.float32, buffer=nl2.sbuf)
        nisa2.dma_copy(dst=t, src=a)
        nisa2.dma_copy(dst=i, src=idx)
        nisa2.nc_n_gather(dst=g, data=t, indices=i)
        nisa2.dma_copy(dst=out, src=g)
        return out

    a = rng.standard_normal((8, 20)).astype(np.float32)
    idx = rng.integers(0, 20, size=(8, 6)).astype(np.uint32)
    np.testing.assert_array_equal(simulate(kernel, [a, idx]).outputs[0], np.take_along_axis(a, idx.astype(int), 1))


def test_loops_on_registers_run_as_many_times_as_the_device_value_says():
    # fori_loop with an upper bound loaded from a tile, and a while_loop counting a loaded value down (the API
    # reference's pattern): the bodies run 3 and 5 times.
    def kernel(bounds):
        out = nl2.ndarray((1, 2), dtype=nl2.float32, buffer=nl2.shared_hbm)
        b = nl2.ndarray((1, 2), dtype=nl2.int32, buffer=nl2.sbuf)
        nisa2.dma_copy(dst=b, src=bounds)
        acc = nl2.ndarray((1, 2), dtype=nl2.float32, buffer=nl2.sbuf)
        nisa2.memset(dst=acc, value=0.0)
        upper = nisa2.register_alloc()
        nisa2.register_load(upper, b[0:1, 0:1])

        def body(i):
            nisa2.tensor_scalar(dst=acc[0:1, 0:1], data=acc[0:1, 0:1], op0=nl2.add, operand0=1.0)

        nl2.fori_loop(0, upper, body)
        count = nl2.ndarray((1, 1), dtype=nl2.int32, buffer=nl2.sbuf)
        nisa2.tensor_copy(dst=count, src=b[0:1, 1:2])
        reg = nisa2.register_alloc()
        nisa2.register_load(reg, count)

        def countdown(r):
            nisa2.tensor_scalar(dst=acc[0:1, 1:2], data=acc[0:1, 1:2], op0=nl2.add, operand0=1.0)
            nisa2.tensor_scalar(dst=count, data=count, op0=nl2.subtract, operand0=1)
            nisa2.register_load(r, count)
            return r

        nl2.while_loop(reg, countdown)
        nisa2.dma_copy(dst=out, src=acc)
        return out

    simulation = simulate(kernel, [np.array([[3, 5]], np.int32)], record_program=True)
    assert simulation.outputs[0].tolist() == [[3.0, 5.0]]
    assert simulation.program.indirect  # the instruction stream depends on device values: not replayable


def test_activate2_with_prelu_scales_negative_values_by_relu_param():
    def kernel(a):
        out = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.shared_hbm)
        t = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
        nisa2.dma_copy(dst=t, src=a)
        nisa2.activate2(dst=t, op=nl2.prelu, data=t, imm0=1.0, imm1=0.0, op0=nl2.multiply, op1=nl2.bypass,
                        relu_param=0.25)
        nisa2.dma_copy(dst=out, src=t)
        return out

    a = np.array([[-4.0, -1.0, 0.0, 2.0]], np.float32)
    assert simulate(kernel, [a], platform="trn3").outputs[0].tolist() == [[-1.0, -0.25, 0.0, 2.0]]


def test_set_rng_seed_makes_the_draws_follow_the_seed_tile():
    def kernel(seeds):
        out = nl2.ndarray((4, 16), dtype=nl2.uint32, buffer=nl2.shared_hbm)
        s = nl2.ndarray(seeds.shape, dtype=nl2.int32, buffer=nl2.sbuf)
        t = nl2.ndarray((4, 16), dtype=nl2.uint32, buffer=nl2.sbuf)
        nisa2.dma_copy(dst=s, src=seeds)
        nisa2.set_rng_seed(s)
        nisa2.rng(dst=t)
        nisa2.dma_copy(dst=out, src=t)
        return out

    first = simulate(kernel, [np.array([[1, 2]], np.int32)]).outputs[0]
    same = simulate(kernel, [np.array([[1, 2]], np.int32)]).outputs[0]
    other = simulate(kernel, [np.array([[3, 4]], np.int32)]).outputs[0]
    np.testing.assert_array_equal(first, same)
    assert not np.array_equal(first, other)


def test_the_0_6_float8_types_round_as_their_formats_do():
    def kernel(a):
        e4, e8 = _out(a.shape), _out(a.shape)
        t = nl.load(a)
        nl.store(e4, nl.copy(t, dtype=nl.float8_e4m3fn))
        nl.store(e8, nl.copy(t, dtype=nl.float8_e8m0fnu))
        return e4, e8

    a = np.array([[1.0, 1.1, 3.0, 5.0, 0.3]], np.float32)
    e4, e8 = simulate(kernel, [a]).outputs
    assert e4.tolist() == [[1.0, 1.125, 3.0, 5.0, 0.3125]]  # 3 mantissa bits
    assert e8.tolist() == [[1.0, 1.0, 4.0, 4.0, 0.25]]  # powers of two only (log2 3 = 1.58 -> 2)
