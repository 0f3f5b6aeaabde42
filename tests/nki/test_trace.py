"""The instruction trace the performance model reads: one truthful row per instruction."""

from __future__ import annotations

import inspect

import numpy as np

from engine.platforms.nki.simulator import simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.trace import Engine, LoopKind, MemorySpace


def kernel(a, b):
    out = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(2):
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        for k in nl.sequential_range(2):
            st = nl.load(a[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
            mv = nl.load(b[k * 128:(k + 1) * 128, :])
            acc += nisa.nc_matmul(st, mv)
        res = nisa.activation(op=nl.exp, data=acc, scale=0.01)
        nl.store(out[m * 128:(m + 1) * 128, :], res)
    return out


def rows(trace):
    c = trace.columns
    return [{name: c[name][i] for name in c} | {"op": trace.op_names[c["opcode"][i]]} for i in range(len(trace))]


def test_each_instruction_is_one_row_on_its_engine():
    a = np.ones((256, 256), np.float32)
    b = np.ones((256, 512), np.float32)
    sim = simulate(kernel, [a, b])
    ops = [r["op"] for r in rows(sim.trace)]
    assert ops == (["load", "load", "nc_matmul"] * 2 + ["activation", "store"]) * 2
    engines = {r["op"]: Engine(r["engine"]) for r in rows(sim.trace)}
    assert engines == {"load": Engine.DMA, "nc_matmul": Engine.TENSOR, "activation": Engine.SCALAR,
                       "store": Engine.DMA}
    np.testing.assert_allclose(sim.outputs[0], np.exp(np.full((256, 512), 256 * 0.01)), rtol=1e-6)


def test_rows_carry_bytes_flops_shapes_and_source_lines():
    sim = simulate(kernel, [np.ones((256, 256), np.float32), np.ones((256, 512), np.float32)])
    r = rows(sim.trace)
    load, mm, act, store = r[1], r[2], r[6], r[7]
    assert (load["hbm_read"], load["sbuf_write"]) == (128 * 512 * 4, 128 * 512 * 4)
    assert (mm["flops"], mm["partitions"], mm["free_elems"]) == (2 * 128 * 512 * 128, 128, 512)
    assert mm["sbuf_read"] == (128 * 128 + 128 * 512) * 4
    assert mm["psum_write"] == 128 * 512 * 4 and mm["psum_read"] == 128 * 512 * 4  # accumulating
    assert (act["psum_read"], act["sbuf_write"]) == (128 * 512 * 4, 128 * 512 * 4)
    assert (store["sbuf_read"], store["hbm_write"]) == (128 * 512 * 4, 128 * 512 * 4)
    assert sim.trace.dtype_names[mm["dtype"]] == "float32"
    source, start = inspect.getsourcelines(kernel)
    assert mm["line"] == start + next(i for i, s in enumerate(source) if "nc_matmul" in s)


def test_rows_record_the_loop_nest_with_loop_kinds():
    sim = simulate(kernel, [np.ones((256, 256), np.float32), np.ones((256, 512), np.float32)])
    t = sim.trace
    kinds = [loop.kind for loop in t.loops]
    assert kinds[0] == LoopKind.AFFINE and set(kinds[1:]) == {LoopKind.SEQUENTIAL}
    mm_rows = [i for i, op in enumerate(t.columns["opcode"]) if t.op_names[op] == "nc_matmul"]
    nests = [t.loop_contexts[t.columns["loop_ctx"][i]] for i in mm_rows]
    assert [tuple(it for _loop, it in nest) for nest in nests] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert t.loops[nests[0][0][0]].trip_count == 2


def test_accesses_name_tensors_and_regions():
    sim = simulate(kernel, [np.ones((256, 256), np.float32), np.ones((256, 512), np.float32)])
    t = sim.trace
    acc = t.access
    store = len(t) - 1  # the last store writes rows 128..256 of the output
    start, count = t.columns["access_start"][store], t.columns["access_count"][store]
    writes = [j for j in range(start, start + count) if acc["is_write"][j]]
    assert len(writes) == 1
    info = t.tensors[acc["tensor"][writes[0]]]
    assert info.space == MemorySpace.HBM and info.shape == (256, 512)
    assert (acc["byte_lo"][writes[0]], acc["byte_hi"][writes[0]]) == (128 * 512 * 4, 256 * 512 * 4)


def test_recording_can_be_switched_off_and_still_counts_instructions():
    sim = simulate(kernel, [np.ones((256, 256), np.float32), np.ones((256, 512), np.float32)], record_trace=False)
    assert len(sim.trace) == 0 and sim.instructions == 16
