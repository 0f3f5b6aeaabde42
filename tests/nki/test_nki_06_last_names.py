"""The last names of the NKI 0.6 API reference (issue 34), as their reference pages describe them
(nki/api/nki/{isa,language}/__init__.py of aws-neuron-sdk, SDK 2.32): NkiInstruction, dma_compute,
rand_set_state / rand_get_state, topk, core_barrier, sendrecv, quantize_mx, nc_matmul_mx and the packed MX
types; each priced on every platform that has it and refused, with the reason, where the NeuronCore lacks it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engine.platforms.nki.hardware import get_core_spec
from engine.platforms.nki.perf.costs import instruction_costs
from engine.platforms.nki.simulator import NKICompileError, NKIRuntimeError, simulate
from engine.platforms.nki.simulator.semantics import namespaces
from engine.platforms.nki.simulator.semantics.isa_v06_more import DESTINATION_MORE
from engine.platforms.nki.simulator.verification.replay import replay

MODS = namespaces.build()
nl = MODS["nki.language"]
nisa = MODS["nki.isa"]


def _sbuf(shape, dtype=None):
    return nl.ndarray(shape, dtype=dtype or nl.float32, buffer=nl.sbuf)


def _hbm(shape, dtype=None):
    return nl.ndarray(shape, dtype=dtype or nl.float32, buffer=nl.shared_hbm)


# -- NkiInstruction -------------------------------------------------------------------------------------------
def test_a_destination_first_call_returns_an_instruction_that_takes_dependencies():
    seen = {}

    def kernel(a):
        out = _hbm(a.shape)
        t = _sbuf(a.shape)
        load = nisa.dma_copy(dst=t, src=a)
        fill = nisa.memset(dst=_sbuf(a.shape), value=0.0)
        store = nisa.dma_copy(dst=out, src=t)
        seen["chain"] = store.depends_on(load).depends_on(fill)
        seen["both"] = store.depends_on(load, fill)
        seen["types"] = (type(load).__name__, type(nisa.register_alloc(3)).__name__)
        try:
            store.depends_on(t)
        except NKICompileError as err:
            seen["refused"] = str(err)
        return out

    a = np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], a)
    assert seen["types"] == ("NkiInstruction", "VirtualRegister")  # registers are not instructions
    assert seen["chain"] is seen["both"]  # both forms return the consumer itself
    assert "must be the NkiInstruction" in seen["refused"]


# -- dma_compute ----------------------------------------------------------------------------------------------
def test_dma_compute_adds_its_sources_in_float32_into_dst(rng):
    def kernel(a, b):
        out = _hbm(a.shape, nl.bfloat16)
        t = _sbuf(a.shape)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_compute(dst=out, srcs=[t, b, a], reduce_op=nl.add, scales=[1.0, 1.0, 1.0])
        return out

    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((8, 16)).astype(np.float32)
    total = (2 * a + b).astype(np.float32)
    out = simulate(kernel, [a, b]).outputs[0]
    bf16 = ((total.view(np.uint32) + 0x7FFF + ((total.view(np.uint32) >> 16) & 1)) & 0xFFFF0000).view(np.float32)
    np.testing.assert_array_equal(out, bf16)  # one rounding, of the float32 sum, into dst's type


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"reduce_op": "multiply"}, "reduce_op must be nl.add"),
    ({"scales": [1.0, 2.0]}, "scales must be one 1.0 per source"),
    ({"unique_indices": False}, "non-unique scatter indices"),
    ({"srcs": "short"}, "srcs[1] has 16 elements, dst 32"),
])
def test_dma_compute_refuses_what_its_page_does_not_support(kwargs, message):
    def kernel(a):
        out = _hbm(a.shape)
        srcs = [a, a[0:2, :]] if kwargs.get("srcs") == "short" else [a, a]
        args = {"reduce_op": nl.multiply if kwargs.get("reduce_op") else nl.add, "srcs": srcs}
        args.update({k: v for k, v in kwargs.items() if k not in ("reduce_op", "srcs")})
        nisa.dma_compute(dst=out, **args)
        return out

    with pytest.raises(NKICompileError, match="dma_compute") as err:
        simulate(kernel, [np.ones((4, 8), np.float32)])
    assert message in str(err.value)


# -- random number generator state ------------------------------------------------------------------------------
def _draws_twice(a, engine=None, words=6):
    out = _hbm((2, 64), nl.uint32)
    state = _sbuf((1, words), nl.uint32)
    r = _sbuf((2, 16), nl.uint32)
    nisa.rand_get_state(state, engine=engine)
    for half in (0, 32):
        for j in (0, 16):
            nisa.rng(dst=r)
            nisa.dma_copy(dst=out[:, half + j:half + j + 16], src=r)
        if half == 0:
            nisa.rand_set_state(state, engine=engine)
    return out


def test_rand_set_state_with_the_state_rand_get_state_wrote_repeats_the_draws():
    a = np.ones((1, 1), np.float32)
    out = simulate(_draws_twice, [a], platform="trn2").outputs[0]
    np.testing.assert_array_equal(out[:, :32], out[:, 32:])
    assert len(np.unique(out[:, :32])) > 30  # draws, not a constant
    vector = simulate(lambda a: _draws_twice(a, nisa.vector_engine, 24), [a], platform="trn3").outputs[0]
    np.testing.assert_array_equal(vector[:, :32], vector[:, 32:])


@pytest.mark.parametrize(("platform", "engine", "words", "message"), [
    ("trn1", None, 6, "rand_get_state exists only on NeuronCore-v3 and newer (trn2); trn1 is NeuronCore-v2"),
    ("trn2", "vector", 24, "exists only on NeuronCore-v4 and newer (trn3); trn2 is NeuronCore-v3"),
    ("trn2", None, 5, "the gpsimd engine's state is 6 uint32 words per partition, the tile has 5"),
])
def test_the_generator_state_is_refused_where_the_page_rules_it_out(platform, engine, words, message):
    eng = nisa.vector_engine if engine == "vector" else None
    with pytest.raises(NKICompileError) as err:
        simulate(lambda a: _draws_twice(a, eng, words), [np.ones((1, 1), np.float32)], platform=platform)
    assert message in str(err.value)


# -- topk -----------------------------------------------------------------------------------------------------
def _topk_kernel(n, k, src_dtype=None):
    def kernel(a):
        out_v, out_i = _hbm((a.shape[0], k)), _hbm((a.shape[0], k), nl.uint32)
        src = _sbuf(a.shape, src_dtype or nl.bfloat16)
        vals, idx = _sbuf((a.shape[0], k), nl.bfloat16), _sbuf((a.shape[0], k), nl.uint32)
        nisa.dma_copy(dst=src, src=a)
        nisa.topk(val_dst=vals, idx_dst=idx, src=src, n=n)
        nisa.dma_copy(dst=out_v, src=vals)
        nisa.dma_copy(dst=out_i, src=idx)
        return out_v, out_i
    return kernel


def test_topk_takes_the_k_largest_of_each_16_partition_snake_in_ascending_order(rng):
    a = rng.permutation(96).reshape(32, 3).astype(np.float32)  # integers: exact in bfloat16
    n, k = 42, 8
    vals, idx = simulate(_topk_kernel(n, k), [a]).outputs
    for group in (0, 1):
        # element j of the snake sits at partition j % 16, column j // 16 (the page's layout)
        snake = [a[16 * group + j % 16, j // 16] for j in range(n)]
        best = sorted(range(n), key=lambda j: snake[j])[-k:]
        for p in range(16 * group, 16 * group + 16):
            assert vals[p].tolist() == [snake[j] for j in best]
            assert idx[p].tolist() == best


@pytest.mark.parametrize(("n", "k", "dtype", "message"), [
    (7, 4, None, "n must be at least 8"),
    (42, 43, None, "at most n (42)"),
    (42, 8, "float32", "src must be bfloat16, not float32"),
    (64, 8, None, "fewer than n / 16 = 4"),
])
def test_topk_refuses_shapes_and_types_outside_its_constraints(n, k, dtype, message):
    with pytest.raises(NKICompileError, match="topk") as err:
        simulate(_topk_kernel(n, k, nl.float32 if dtype else None), [np.zeros((32, 3), np.float32)])
    assert message in str(err.value)


# -- two cores: core_barrier and sendrecv -------------------------------------------------------------------------
def _swap_halves(a):
    """Each core writes its half of a shared tensor, meets the other at the barrier, then reads the other half."""
    shared, out = _hbm(a.shape), _hbm(a.shape)
    core = nl.program_id(0)
    half = a.shape[0] // 2
    t, u = _sbuf((half, a.shape[1])), _sbuf((half, a.shape[1]))
    nisa.dma_copy(dst=t, src=a[core * half:(core + 1) * half, :])
    nisa.activation(dst=t, op=nl.exp, data=t)
    nisa.dma_copy(dst=shared[core * half:(core + 1) * half, :], src=t)
    nisa.core_barrier(shared, (0, 1))
    other = 1 - core
    nisa.dma_copy(dst=u, src=shared[other * half:(other + 1) * half, :])
    nisa.dma_copy(dst=out[core * half:(core + 1) * half, :], src=u)
    return out


def test_after_core_barrier_each_core_reads_what_the_other_wrote_before_it(rng):
    a = rng.standard_normal((8, 4)).astype(np.float32)
    out = simulate(_swap_halves, [a], platform="trn2", grid=(2,)).outputs[0]
    np.testing.assert_allclose(out, np.exp(np.concatenate([a[4:], a[:4]])), rtol=1e-6)


def _exchange(a):
    out = _hbm(a.shape)
    core = nl.program_id(0)
    src, dst = _sbuf(a.shape[1:]), _sbuf(a.shape[1:])
    nisa.dma_copy(dst=src, src=a[core])
    nisa.sendrecv(src=src, dst=dst, send_to_rank=1 - core, recv_from_rank=1 - core, pipe_id=0)
    nisa.memset(dst=src, value=-1.0)  # after the exchange: the partner already has the values sent
    nisa.dma_copy(dst=out[core], src=dst)
    return out


def test_sendrecv_swaps_the_two_cores_tiles_and_the_recorded_program_replays_it(rng):
    a = rng.standard_normal((2, 4, 8)).astype(np.float32)
    sim = simulate(_exchange, [a], platform="trn2", grid=(2,), record_program=True)
    np.testing.assert_array_equal(sim.outputs[0], a[::-1])
    b = rng.standard_normal((2, 4, 8)).astype(np.float32)
    np.testing.assert_array_equal(replay(sim.program, [b], platform="trn2").outputs[0], b[::-1])


def test_a_core_that_never_reaches_the_barrier_is_reported_with_its_line():
    def kernel(a):
        shared = _hbm(a.shape)
        if nl.program_id(0) == 0:
            nisa.core_barrier(shared, (0, 1))
        return shared

    with pytest.raises(NKIRuntimeError, match="program \\[0\\] waits at the core_barrier of line") as err:
        simulate(kernel, [np.ones((2, 2), np.float32)], platform="trn2", grid=(2,))
    assert "for program(s) [1], which ended without reaching it" in str(err.value)


@pytest.mark.parametrize(("platform", "grid", "message"), [
    ("trn2", (), "sendrecv works between the two NeuronCores of an LNC=2 launch"),
    ("trn1", (2,), "sendrecv exists only on NeuronCore-v3 and newer (trn2); trn1 is NeuronCore-v2"),
])
def test_sendrecv_is_refused_without_two_cores(platform, grid, message):
    with pytest.raises(NKICompileError) as err:
        simulate(_exchange, [np.ones((2, 4, 8), np.float32)], platform=platform, grid=grid)
    assert message in str(err.value)


# -- MX: quantize_mx, nc_matmul_mx and the packed types ---------------------------------------------------------
def _e4m3fn(code: int) -> float:
    """The value of a float8_e4m3fn code (OCP: bias 7, no infinity)."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 7
    return sign * (m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


_E4M3FN_VALUES = np.array(sorted({_e4m3fn(c) for c in range(256) if c & 0x7F != 0x7F}))


def test_quantize_mx_scales_each_8x4_group_and_rounds_to_float8(rng):
    p, f = 64, 16

    def kernel(x):
        data_out, scale_out = _hbm((p, f // 4), nl.uint32), _hbm((p, f // 4), nl.uint8)
        src = _sbuf((p, f), nl.bfloat16)
        data, scale = _sbuf((p, f // 4), nl.float8_e4m3fn_x4), _sbuf((p, f // 4), nl.uint8)
        nisa.dma_copy(dst=src, src=x)
        nisa.memset(dst=scale, value=0)
        nisa.quantize_mx(dst=data, src=src, dst_scale=scale)
        nisa.dma_copy(dst=data_out, src=data)
        nisa.dma_copy(dst=scale_out, src=scale)
        return data_out, scale_out

    x = (rng.standard_normal((p, f)) * 8).astype(np.float32)
    x[0:8, 0:4] = 0.0  # an all-zero group: scale 2^-127, code 0
    x = ((x.view(np.uint32) >> 16) << 16).view(np.float32)  # exact in bfloat16
    packed, scales = simulate(kernel, [x], platform="trn3").outputs
    # groups 0-3 in partitions 0-3, groups 4-7 in the second quadrant's first partitions 32-35
    rows = [0, 1, 2, 3, 32, 33, 34, 35]
    for g, row in enumerate(rows):
        for c in range(f // 4):
            block = x[8 * g:8 * g + 8, 4 * c:4 * c + 4]
            amax = float(np.abs(block).max())
            exponent = math.floor(math.log2(amax)) - (8 - 1) if amax else -127  # E_max = 8 for e4m3fn
            assert scales[row, c] == exponent + 127
            for i in range(8):
                for j in range(4):
                    code = (int(packed[8 * g + i, c]) >> (8 * j)) & 0xFF
                    want = block[i, j] / 2.0**exponent
                    distance = np.abs(_E4M3FN_VALUES - want)
                    assert abs(_e4m3fn(code) - want) == distance.min()  # the nearest value
                    if np.sum(distance == distance.min()) > 1:
                        assert code % 2 == 0  # a tie goes to the even code
    assert scales[4:32].max() == 0  # the other partitions are left as they were


_CODES = {1.0: 0x38, 2.0: 0x40, 0.5: 0x30, -1.5: 0xBC}  # float8_e4m3fn
_FP4 = {0.5: 0x1, 1.0: 0x2, 6.0: 0x7, -3.0: 0xD}  # float4_e2m1fn: bias 1, one mantissa bit


def _pack(values, codes, bits):
    words = np.zeros(values.shape[:2], np.uint64)
    for j in range(4):
        words |= np.vectorize(codes.get)(values[:, :, j]).astype(np.uint64) << np.uint64(bits * j)
    return words


def test_nc_matmul_mx_contracts_partitions_and_packed_values_with_their_scales(rng):
    k, m, n = 32, 2, 4
    sv = rng.choice(list(_CODES), size=(k, m, 4))
    mv = rng.choice(list(_FP4), size=(k, n, 4))
    s_scale = rng.choice([127, 128], size=(k // 8, m)).astype(np.uint8)  # x1 or x2
    m_scale = rng.choice([126, 127], size=(k // 8, n)).astype(np.uint8)  # x0.5 or x1

    def kernel(st, mo, ss, ms):
        out = _hbm((m, n))
        tiles = [_sbuf((k, m), nl.float8_e4m3fn_x4), _sbuf((k, n), nl.float4_e2m1fn_x4),
                 _sbuf((k // 8, m), nl.uint8), _sbuf((k // 8, n), nl.uint8)]
        for t, x in zip(tiles, (st, mo, ss, ms), strict=True):
            nisa.dma_copy(dst=t, src=x)
        acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        for _ in range(2):  # the second accumulates: acc was written before (accumulate=None)
            nisa.nc_matmul_mx(dst=acc, stationary=tiles[0], moving=tiles[1], stationary_scale=tiles[2],
                              moving_scale=tiles[3])
        res = _sbuf((m, n))
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out

    inputs = [_pack(sv, _CODES, 8).astype(np.uint32), _pack(mv, _FP4, 4).astype(np.uint16), s_scale, m_scale]
    out = simulate(kernel, inputs, platform="trn3").outputs[0]
    s = sv * np.repeat(2.0 ** (s_scale.astype(float) - 127), 8, axis=0)[..., None]
    mo = mv * np.repeat(2.0 ** (m_scale.astype(float) - 127), 8, axis=0)[..., None]
    np.testing.assert_allclose(out, 2 * np.einsum("pmj,pnj->mn", s, mo), rtol=1e-6)


def test_the_packed_mx_types_hold_four_values_in_their_bits():
    assert (nl.float8_e5m2_x4.itemsize, nl.float8_e4m3fn_x4.itemsize, nl.float4_e2m1fn_x4.itemsize) == (4, 4, 2)
    assert MODS["neuronxcc.nki.language"].float8_e4m3fn_x4 is nl.float8_e4m3fn_x4

    def kernel(x):
        out = _hbm(x.shape, nl.uint32)
        t = _sbuf(x.shape, nl.float8_e5m2_x4)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.array([[0xFFFFFFFF, 0x3C3C3C3C, 0x01020304]], np.uint32)
    sim = simulate(kernel, [x])
    np.testing.assert_array_equal(sim.outputs[0], x)
    assert sim.trace.columns["sbuf_write"][0] == 3 * 4  # four bytes an element on the chip


@pytest.mark.parametrize("name", ["quantize_mx", "nc_matmul_mx"])
def test_the_mx_instructions_exist_only_on_neuroncore_v4(name):
    kernel = _mx_kernels()[name]
    with pytest.raises(NKICompileError) as err:
        simulate(kernel, [np.ones((32, 8), np.float32)], platform="trn2")
    assert f"{name} exists only on NeuronCore-v4 and newer (trn3); trn2 is NeuronCore-v3" in str(err.value)


# -- every name here costs something where it exists ---------------------------------------------------------------
def _mx_kernels():
    def quantize(a):
        out = _hbm((1, 1))
        src = _sbuf(a.shape, nl.bfloat16)
        nisa.dma_copy(dst=src, src=a)
        nisa.quantize_mx(dst=_sbuf((32, 2), nl.float8_e4m3fn_x4), src=src, dst_scale=_sbuf((4, 2), nl.uint8))
        return out

    def matmul(a):
        out = _hbm((1, 1))
        st, mo = _sbuf((32, 2), nl.float8_e4m3fn_x4), _sbuf((32, 2), nl.float8_e4m3fn_x4)
        scale = _sbuf((4, 2), nl.uint8)
        for t in (st, mo, scale):
            nisa.memset(dst=t, value=0)
        nisa.nc_matmul_mx(dst=nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.psum), stationary=st, moving=mo,
                          stationary_scale=scale, moving_scale=scale)
        return out

    return {"quantize_mx": quantize, "nc_matmul_mx": matmul}


def _one(body):
    def kernel(a):
        out = _hbm((1, 1))
        body(a)
        return out
    return kernel


# name: (kernel, oldest NeuronCore, launch grid)
PRICED = {
    "dma_compute": (_one(lambda a: nisa.dma_compute(dst=_hbm(a.shape), srcs=[a, a], reduce_op=nl.add)), 2, ()),
    "rand_get_state": (_one(lambda a: nisa.rand_get_state(_sbuf((1, 6), nl.uint32))), 3, ()),
    "rand_set_state": (_one(lambda a: nisa.rand_set_state(nl.zeros((1, 6), dtype=nl.uint32, buffer=nl.sbuf))), 3,
                       ()),
    "topk": (lambda a: _topk_kernel(16, 8)(np.zeros((32, 2), np.float32) if a is None else a[0:32, 0:2]), 2, ()),
    "core_barrier": (_one(lambda a: nisa.core_barrier(_hbm((1, 1)), (0, 1))), 3, (2,)),
    "sendrecv": (_one(lambda a: nisa.sendrecv(src=nl.zeros((4, 4), dtype=nl.float32, buffer=nl.sbuf),
                                              dst=_sbuf((4, 4)), send_to_rank=1 - nl.program_id(0),
                                              recv_from_rank=1 - nl.program_id(0), pipe_id=0)), 3, (2,)),
    **{name: (kernel, 4, ()) for name, kernel in _mx_kernels().items()},
}
CORE = {"trn1": 2, "trn2": 3, "trn3": 4}


def test_every_instruction_here_is_priced_where_it_exists_and_refused_where_it_does_not():
    names = {getattr(v, "nki_name", None) for v in DESTINATION_MORE.values()} - {None}
    assert names == set(PRICED), f"instructions without a pricing kernel: {sorted(names - set(PRICED))}"
    a = np.ones((32, 8), np.float32)
    for platform, core in CORE.items():
        for name, (kernel, oldest, grid) in sorted(PRICED.items()):
            if core < oldest:
                with pytest.raises(NKICompileError, match=f"{name} exists only on NeuronCore-v{oldest}"):
                    simulate(kernel, [a], platform=platform, grid=grid)
                continue
            trace = simulate(kernel, [a], platform=platform, grid=grid).trace
            costs = instruction_costs(trace, get_core_spec(platform))
            ops = [trace.op_names[k] for k in np.asarray(trace.columns["opcode"])]
            assert name in ops, f"{name} left no row in the trace on {platform}"
            for op, seconds, moved in zip(ops, costs.seconds, costs.dma_bytes, strict=True):
                assert seconds > 0 or moved > 0, f"{op} ({name}'s kernel) is free on {platform}"
