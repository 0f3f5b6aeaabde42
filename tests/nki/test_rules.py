"""Each hardware rule: a kernel that breaks it gets the right error, naming the operation and the line."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from engine.platforms.nki.simulator import NKICompileError, NKIRuntimeError, simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl


def line_of(kernel, text: str) -> int:
    lines, start = inspect.getsourcelines(kernel)
    for offset, line in enumerate(lines):
        if text in line:
            return start + offset
    raise AssertionError(text)


def f32(*shape):
    return np.ones(shape, dtype=np.float32)


def test_it_rejects_partition_dim_over_128():
    def kernel(a):
        t = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)  # too many partitions
        return t

    with pytest.raises(NKICompileError) as err:
        simulate(kernel, [f32(1)])
    assert err.value.op == "ndarray"
    assert err.value.line == line_of(kernel, "too many partitions")
    assert "partition dimension 256" in str(err.value) and "128" in str(err.value)


def test_it_rejects_a_load_with_more_than_128_partitions():
    def kernel(a):
        return nl.load(a)  # (256, 4)

    with pytest.raises(NKICompileError, match="partition dimension 256 exceeds 128"):
        simulate(kernel, [f32(256, 4)])


def test_it_rejects_psum_tiles_over_2kib_per_partition():
    def kernel(a):
        return nl.zeros((128, 1024), dtype=nl.float32, buffer=nl.psum)

    with pytest.raises(NKICompileError, match="4096 bytes per partition.*2048"):
        simulate(kernel, [f32(1)])


def test_it_rejects_a_matmul_output_outside_psum():
    def kernel(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        out[...] = nisa.nc_matmul(nl.load(a), nl.load(b))  # SBUF destination
        return out

    with pytest.raises(NKICompileError) as err:
        simulate(kernel, [f32(128, 128), f32(128, 128)])
    assert err.value.op == "nc_matmul"
    assert err.value.line == line_of(kernel, "SBUF destination")
    assert "PSUM" in str(err.value) and "SBUF" in str(err.value)


def test_it_rejects_matmul_operands_outside_sbuf():
    def kernel(a, b):
        p = nisa.nc_matmul(nl.load(a), nl.load(b))
        return nisa.nc_matmul(p, nl.load(b))  # stationary in PSUM

    with pytest.raises(NKICompileError, match="stationary operand must be in SBUF.*PSUM"):
        simulate(kernel, [f32(128, 128), f32(128, 128)])


def test_it_rejects_a_stationary_free_size_over_128():
    def kernel(a, b):
        return nisa.nc_matmul(nl.load(a), nl.load(b))

    with pytest.raises(NKICompileError, match="stationary free size 256 exceeds 128"):
        simulate(kernel, [f32(128, 256), f32(128, 128)])


def test_it_rejects_a_moving_free_size_over_512():
    def kernel(a, b):
        return nisa.nc_matmul(nl.load(a), nl.load(b))  # moving too wide

    with pytest.raises(NKICompileError) as err:
        simulate(kernel, [f32(128, 128), f32(128, 1024)])
    assert str(err.value) == f"nc_matmul at line {line_of(kernel, 'moving too wide')}: moving free size 1024 exceeds 512"


def test_it_rejects_a_load_that_does_not_read_hbm():
    def kernel(a):
        return nl.load(nl.load(a))

    with pytest.raises(NKICompileError, match="load reads HBM.*SBUF"):
        simulate(kernel, [f32(128, 4)])


def test_it_rejects_a_load_into_psum():
    def kernel(a):
        p = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.psum)
        p[...] = nl.load(a)
        return p

    with pytest.raises(NKICompileError, match="load writes its result to SBUF.*PSUM"):
        simulate(kernel, [f32(128, 4)])


def test_it_rejects_a_store_from_hbm():
    def kernel(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, a)
        return out

    with pytest.raises(NKICompileError, match="operand 'a' is in HBM"):
        simulate(kernel, [f32(128, 4)])


def test_a_store_from_psum_goes_through_an_sbuf_copy_in_the_trace():
    def kernel(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.nc_matmul(nl.load(a), nl.load(b)))
        return out

    sim = simulate(kernel, [f32(128, 128), f32(128, 128)])
    ops = [sim.trace.op_names[i] for i in sim.trace.columns["opcode"]]
    assert ops == ["load", "load", "nc_matmul", "tensor_copy", "store"]
    store = len(sim.trace) - 1
    assert sim.trace.columns["psum_read"][store] == 0 and sim.trace.columns["sbuf_read"][store] == 128 * 128 * 4
    np.testing.assert_array_equal(sim.outputs[0], np.full((128, 128), 128.0, np.float32))


def test_it_rejects_a_store_into_sbuf():
    def kernel(a):
        t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nl.store(t, nl.load(a))
        return t

    with pytest.raises(NKICompileError, match="store writes HBM.*SBUF"):
        simulate(kernel, [f32(128, 4)])


def test_it_rejects_a_tile_larger_than_an_sbuf_partition():
    def kernel(a):
        return nl.ndarray((128, 65536), dtype=nl.float32, buffer=nl.sbuf)  # 256 KiB per partition

    with pytest.raises(NKICompileError, match="262144 bytes per partition.*196608"):
        simulate(kernel, [f32(1)])


def test_it_accepts_declarations_larger_than_sbuf_and_only_pays_for_touched_tiles():
    def kernel(a):
        big = nl.ndarray((64, 64, nl.par_dim(128), 2048), dtype=nl.float32, buffer=nl.sbuf)  # 4 GiB declared
        out = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
        big[3, 5, nl.arange(128)[:, None], nl.arange(2048)[None, :]] = nl.load(a)
        nl.store(out, big[3, 5, nl.arange(128)[:, None], nl.arange(2048)[None, :]])
        return out

    a = np.arange(128 * 2048, dtype=np.float32).reshape(128, 2048)
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], a)


def test_it_reports_racing_writes_from_affine_iterations():
    def kernel(a):
        t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(2):
            t[...] = nl.load(a[i])  # every iteration writes all of t
        return t

    with pytest.raises(NKIRuntimeError) as err:
        simulate(kernel, [f32(2, 128, 4)])
    assert err.value.op == "load"
    assert err.value.line == line_of(kernel, "every iteration writes")
    assert "iterations 0 and 1 of the affine_range loop" in str(err.value)


@pytest.mark.parametrize("order", ["whole row first", "slice first"])
def test_it_reports_races_between_a_single_row_and_a_slice_of_rows(order):
    # Races are bucketed by the pinned leading indices: a store of one row (out[1, r]) and a store of a
    # slice of rows (out[1, a:b]) land in different buckets and must still be compared.
    def kernel(a):
        out = nl.ndarray((2, 4, 128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        row = nl.load(a[0])
        rows = nl.load(a[0:2])
        for i in nl.affine_range(2):
            if order == "whole row first":
                nl.store(out[1, 1 - i], value=row)  # racing store: row 0 in iteration 1, in 0's slice
                nl.store(out[1, 2 * i:2 * i + 2], value=rows)
            else:
                nl.store(out[1, 2 * i:2 * i + 2], value=rows)  # racing store: rows 2:4 in iteration 1
                nl.store(out[1, 3 - 3 * i], value=row)  # row 3 in iteration 0
        return out

    with pytest.raises(NKIRuntimeError) as err:
        simulate(kernel, [f32(2, 128, 16)])
    assert "iterations 0 and 1 of the affine_range loop" in str(err.value)
    assert err.value.line == line_of(kernel, "racing store: " + ("row 0" if order == "whole row first" else "rows 2:4"))


def test_stores_of_distinct_rows_and_slices_do_not_race():
    def kernel(a):
        out = nl.ndarray((2, 4, 128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        row = nl.load(a[0])
        rows = nl.load(a[0:2])
        for i in nl.affine_range(2):
            nl.store(out[0, i], value=row)
            nl.store(out[1, 2 * i:2 * i + 2], value=rows)
        return out

    out = simulate(kernel, [f32(2, 128, 16)]).outputs[0]
    assert np.isnan(out[0, 2:]).all() and (out[1] == 1).all() and (out[0, :2] == 1).all()


def test_it_allows_psum_accumulation_across_affine_iterations():
    def kernel(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(2):
            acc += nisa.nc_matmul(nl.load(a[i]), nl.load(b[i]))
        nl.store(out, nl.copy(acc))
        return out

    out = simulate(kernel, [f32(2, 128, 128), f32(2, 128, 128)]).outputs[0]
    np.testing.assert_array_equal(out, np.full((128, 128), 256.0, np.float32))


def test_it_allows_the_same_writes_in_a_sequential_range():
    def kernel(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(2):
            t[...] = nl.load(a[i])
        nl.store(out, t)
        return out

    a = np.stack([np.zeros((128, 4)), np.ones((128, 4))]).astype(np.float32)
    np.testing.assert_array_equal(simulate(kernel, [a]).outputs[0], a[1])


def test_it_reports_reading_uninitialised_memory():
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        t[:, 0:4] = nl.load(a)
        nl.store(out, t)  # columns 4..8 were never written
        return out

    with pytest.raises(NKIRuntimeError) as err:
        simulate(kernel, [f32(128, 4)])
    assert err.value.op == "store"
    assert err.value.line == line_of(kernel, "never written")
    assert "uninitialised" in str(err.value)


def test_it_reports_out_of_bounds_indices():
    def kernel(a):
        return nl.load(a[nl.arange(128)[:, None] + 64, nl.arange(4)[None, :]])

    with pytest.raises(NKIRuntimeError, match="index 191 is out of bounds for axis 0 of size 128"):
        simulate(kernel, [f32(128, 4)])


def test_it_reports_a_tile_used_outside_its_loop_iteration():
    def kernel(a):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.load(a[i])
        nl.store(out, t)  # t belongs to the loop body
        return out

    with pytest.raises(NKICompileError) as err:
        simulate(kernel, [f32(2, 128, 4)])
    assert err.value.line == line_of(kernel, "belongs to the loop body")
    assert "outside the loop iteration that defined it" in str(err.value)


def test_it_names_unsupported_operations():
    def kernel(a):
        return nisa.dropout(nl.load(a), 0.5)

    with pytest.raises(NKICompileError, match="nisa.dropout is unsupported"):
        simulate(kernel, [f32(128, 4)])


def test_a_malformed_assignment_is_a_compile_error_naming_the_tensor():
    def kernel(a):
        t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        t[0, 1, 2] = nl.load(a)  # three indices into a 2-D tile
        return t

    with pytest.raises(NKICompileError, match="too many indices"):
        simulate(kernel, [f32(128, 4)])
