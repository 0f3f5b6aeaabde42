"""Loop-invariant computation: value numbering of the trace.

The Neuron compiler hoists a loop-invariant load *and* what is computed from it: neuron-profile's transpose_flops
for the NKIBench baselines are the trace's divided by the repeat count exactly where a loaded tile is transposed
on the Tensor Engine inside a loop that does not index it (swiglu 6.00: three row blocks times two statements
that transpose the same input, bmm and bmm_softmax 4.00, lora 3.50; trn1_nkibench_baselines.csv), and it keeps
the product, spilling it when it does not fit (bmm: 12.6 MB saved, 33.8 MB reloaded). So:

- every instruction gets a value number: a load's is the HBM region it reads (of a tensor the kernel never
  writes), a Tensor Engine transpose's or a copy's is its operation (opcode, engine, dtype, shape: the trace row
  holds every parameter of these two) applied to the value numbers of the data it reads (the writers of those
  bytes, and where in their output the read falls). Other compute is not merged: the evidence is for transposes
  only (value-numbering the Mamba baseline's loop-invariant `delta * u` moves it 2.92 -> 2.14 ms, measured 2.89);
- a transpose or copy whose value number an earlier one already has is *redundant*: it is elided when its
  output is in SBUF (the earlier product is kept, see below) or nothing that still runs reads it (a PSUM
  intermediate of an elided chain, such as a transpose whose evacuating copy is elided);
- a load that only elided instructions read is dead: elided too (swiglu's second statement loads the input again
  for transposes the first statement already made);
- a kept product is a virtual SBUF chunk, like a kept repeated load (deps._repeated_loads), but dirty: the spill
  planner (spills.py) may evict it, and then it is saved once after the first instance and reloaded at each
  repeat, counted in spill_save_bytes / spill_reload_bytes.

A product too large for SBUF is recomputed (rule 2 in docs/history/performance-model.md, "perf-8 candidates: loop-invariant
transposes"); with NeuronCoreSpec.sequential_outermost the bound is per iteration of the innermost sequential_range
loop around the statement, which the compiler runs outermost (interchange.sequential_major_order): the product is
then live one sequential iteration at a time (SbufUse.sequential_major; lora's transposed x, 84 MB in all, 21 MB
per K chunk).

Stores and instructions that write HBM are never redundant, nor is a compute instruction without inputs (a
memset: the compiler rematerializes constants rather than keeping them).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf.deps import Dependencies, SbufUse, build_dependencies
from engine.platforms.nki.simulator.trace import Engine, LoopKind, MemorySpace, Trace

# Ops whose trace row records everything that determines their result (a Tensor Engine transpose multiplies by the
# identity tile it reads; a copy only moves data): two statements doing them on the same data compute the same.
_PARAMETERLESS = ("copy", "tensor_copy")
# What the compiler can keep: the whole SBUF of a NeuronCore (24 MiB on NeuronCore-v2 and -v3; the trace is prepared
# once for every platform, so the check does not take a platform's usable fraction).
SBUF_BYTES = float(TRN1.sbuf_bytes_per_partition * TRN1.partitions)


def redundant_instructions(trace: Trace, read_access: np.ndarray, write_access: np.ndarray,
                           hbm_written: np.ndarray, capacity_bytes: float = np.inf,
                           per_sequential: bool = False) -> np.ndarray:
    """Per instruction, the earlier instruction computing the same value (-1: none). `read_access` and
    `write_access` pair each on-chip read access with the write access that last wrote its bytes.

    Only loop-invariant code counts: an instruction repeats an earlier one when it reads a repeated load's tile
    (or a repeat's product), not when it reads the very tile the earlier one read (matmul_add_rmsnorm transposes
    one loaded tile for each of its four column blocks, and neuron-profile counts all four: the compiler does not
    merge them). And only products that fit SBUF are kept: a statement whose first instances write more than
    `capacity_bytes` of SBUF in all is recomputed (the matmul baseline transposes its 84 MB input in each of 12
    column blocks, and neuron-profile counts all twelve). `per_sequential`: a statement inside a sequential_range
    loop counts per iteration of it (the compiler runs that loop outermost: sequential_major_product_bytes)."""
    return _bounded(trace, _numbered(trace, read_access, write_access, hbm_written), capacity_bytes, per_sequential)


def _numbered(trace: Trace, read_access: np.ndarray, write_access: np.ndarray, hbm_written: np.ndarray) -> np.ndarray:
    """Per instruction, the earlier instruction computing the same value (-1: none), before the size bound."""
    n = len(trace)
    canon = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return canon
    c, acc = trace.columns, trace.access
    start = np.asarray(c["access_start"], dtype=np.int64).tolist()
    count = np.asarray(c["access_count"], dtype=np.int64).tolist()
    engine = np.asarray(c["engine"], dtype=np.int64).tolist()
    opcode = np.asarray(c["opcode"], dtype=np.int64).tolist()
    dtype = np.asarray(c["dtype"], dtype=np.int64).tolist()
    free = np.asarray(c["free_elems"], dtype=np.int64).tolist()
    transpose = np.asarray(c["is_transpose"], dtype=np.int64).tolist()
    tensor = np.asarray(acc["tensor"], dtype=np.int64).tolist()
    is_write = (np.asarray(acc["is_write"]) != 0).tolist()
    pl, ph = np.asarray(acc["part_lo"], dtype=np.int64).tolist(), np.asarray(acc["part_hi"], dtype=np.int64).tolist()
    bl, bh = np.asarray(acc["byte_lo"], dtype=np.int64).tolist(), np.asarray(acc["byte_hi"], dtype=np.int64).tolist()
    space = [int(t.space) for t in trace.tensors]
    written = hbm_written.tolist()
    hbm, dma = int(MemorySpace.HBM), int(Engine.DMA)
    parameterless = {k for k, name in enumerate(trace.op_names) if name in _PARAMETERLESS}
    writers: dict[int, list[int]] = {}
    for r, w in zip(read_access.tolist(), write_access.tolist(), strict=True):
        writers.setdefault(r, []).append(w)
    owner = np.repeat(np.arange(n), np.asarray(c["access_count"], dtype=np.int64)).tolist()

    vn = [0] * n
    table: dict[tuple, int] = {}
    first_of: dict[int, int] = {}
    repeat = [False] * n  # a load of a region loaded before, or a repeated computation
    fresh = 0

    def new() -> int:
        nonlocal fresh
        fresh -= 1  # negative: a value no other instruction can have
        return fresh

    for i in range(n):
        rows = range(start[i], start[i] + count[i])
        if any(is_write[a] and space[tensor[a]] == hbm for a in rows):
            vn[i] = new()  # a store
            continue
        reads = [a for a in rows if not is_write[a]]
        out = tuple((ph[a] - pl[a], bh[a] - bl[a]) for a in rows if is_write[a])
        if engine[i] == dma:
            if len(reads) == 1 and space[tensor[reads[0]]] == hbm and not written[tensor[reads[0]]]:
                a = reads[0]
                key: tuple = ("load", tensor[a], pl[a], ph[a], bl[a], bh[a], out)
                repeat[i] = key in table
                vn[i] = table.setdefault(key, len(table) + 1)
            else:
                vn[i] = new()
            continue
        if not (transpose[i] or opcode[i] in parameterless):
            vn[i] = new()  # only transposes and copies are hoisted (module docstring)
            continue
        sig = []
        for a in reads:
            ws = writers.get(a)
            if space[tensor[a]] == hbm or not ws:
                sig = None
                break
            sig.append((ph[a] - pl[a], bh[a] - bl[a],
                        tuple(sorted((vn[owner[w]], pl[a] - pl[w], bl[a] - bl[w]) for w in ws))))
        if not sig:
            vn[i] = new()
            continue
        key = (opcode[i], engine[i], dtype[i], free[i], transpose[i], tuple(sig), out)
        hit = table.get(key)
        if hit is None or not any(repeat[owner[w]] for a in reads for w in writers[a]):
            if hit is None:
                table[key] = len(table) + 1
                first_of[table[key]] = i
            vn[i] = table[key]
        else:
            vn[i] = hit
            canon[i] = first_of[hit]
            repeat[i] = True
    return canon


def _bounded(trace: Trace, canon: np.ndarray, capacity_bytes: float, per_sequential: bool) -> np.ndarray:
    """`canon` without the products too large to keep (redundant_instructions): per statement, the SBUF bytes its
    first instances write (`per_sequential`: per iteration of the innermost sequential loop around them)."""
    canon = canon.copy()
    n = len(trace)
    c, acc = trace.columns, trace.access
    owner = np.repeat(np.arange(n), np.asarray(c["access_count"], dtype=np.int64))
    space = [int(t.space) for t in trace.tensors]
    bl, bh = np.asarray(acc["byte_lo"], dtype=np.int64), np.asarray(acc["byte_hi"], dtype=np.int64)
    pl, ph = np.asarray(acc["part_lo"], dtype=np.int64), np.asarray(acc["part_hi"], dtype=np.int64)
    heads = np.unique(canon[canon >= 0])
    if len(heads):
        sbuf_out = np.zeros(n)
        w = np.flatnonzero((np.asarray(acc["is_write"]) != 0)
                           & (np.array(space, dtype=np.int64)[np.asarray(acc["tensor"], dtype=np.int64)]
                              == int(MemorySpace.SBUF)))
        np.add.at(sbuf_out, owner[w], (bh[w] - bl[w]) * (ph[w] - pl[w]))
        lines = np.asarray(c["line"], dtype=np.int64)
        head_line = lines[heads]
        step = _sequential_step(trace)[heads] if per_sequential else np.zeros(len(heads), dtype=np.int64)
        groups, inv = np.unique(np.stack((head_line, step), axis=1), axis=0, return_inverse=True)
        total = np.bincount(inv.reshape(-1), sbuf_out[heads], minlength=len(groups))
        too_big = set(groups[total > capacity_bytes, 0].tolist())
        if too_big:
            drop = (canon >= 0) & np.isin(lines[np.maximum(canon, 0)], list(too_big))
            canon[drop] = -1
    return canon


def _sequential_step(trace: Trace) -> np.ndarray:
    """Per instruction, a number for the iteration of the innermost sequential_range loop around it (0: none)."""
    steps: dict[tuple[int, int], int] = {}
    per_ctx = []
    for nest in trace.loop_contexts:
        inner = [(lid, it) for lid, it in nest if trace.loops[lid].kind == LoopKind.SEQUENTIAL]
        per_ctx.append(steps.setdefault(inner[-1], len(steps) + 1) if inner else 0)
    if not per_ctx:
        return np.zeros(len(trace), dtype=np.int64)
    return np.asarray(per_ctx, dtype=np.int64)[np.asarray(trace.columns["loop_ctx"], dtype=np.int64)]


def value_numbered(trace: Trace, use: SbufUse, read_access: np.ndarray, write_access: np.ndarray,
                   hbm_written: np.ndarray, capacity_bytes: float = np.inf, canon: np.ndarray | None = None) -> SbufUse:
    """`use` with the loop-invariant computation elided (module docstring): `vn_elided` per instruction, the
    rows of elided instructions dropped from the live set, and a virtual dirty chunk per kept product. `plain`
    keeps `use` as it was, for NeuronCoreSpec.value_numbering off. `canon`: redundant_instructions' answer, if known."""
    n = len(trace)
    if canon is None:
        canon = redundant_instructions(trace, read_access, write_access, hbm_written, capacity_bytes)
    if not (canon >= 0).any():
        return replace(use, vn_elided=np.zeros(n, dtype=bool), plain=use)
    c, acc = trace.columns, trace.access
    owner = np.repeat(np.arange(n), np.asarray(c["access_count"], dtype=np.int64))
    space = np.array([int(t.space) for t in trace.tensors], dtype=np.int64)
    tensor = np.asarray(acc["tensor"], dtype=np.int64)
    writes = np.asarray(acc["is_write"]) != 0
    sbuf_write = writes & (space[tensor] == MemorySpace.SBUF)
    # Per instruction: writes somewhere other than SBUF (PSUM: not kept across a loop), and its SBUF output size.
    off_sbuf = np.bincount(owner[writes & ~sbuf_write], minlength=n) > 0
    width = (np.asarray(acc["byte_hi"], dtype=np.int64) - np.asarray(acc["byte_lo"], dtype=np.int64))
    parts = (np.asarray(acc["part_hi"], dtype=np.int64) - np.asarray(acc["part_lo"], dtype=np.int64))
    out_bytes = np.bincount(owner[sbuf_write], width[sbuf_write], minlength=n)
    out_parts = np.zeros(n, dtype=np.int64)
    np.maximum.at(out_parts, owner[sbuf_write], parts[sbuf_write])
    engine = np.asarray(c["engine"], dtype=np.int64)
    load = (engine == Engine.DMA) & (np.asarray(c["hbm_read"], dtype=np.int64) > 0)
    pairs = np.unique(owner[write_access] * n + owner[read_access])
    readers: dict[int, list[int]] = {}
    for w, r in zip((pairs // n).tolist(), (pairs % n).tolist(), strict=True):
        if r != w:
            readers.setdefault(w, []).append(r)

    elided = np.zeros(n, dtype=bool)
    kept = np.zeros(n, dtype=bool)  # elided, but something that runs reads the product: keep it
    for i in range(n - 1, -1, -1):
        rd = readers.get(i, ())
        dead = bool(rd) and all(elided[r] for r in rd)
        if canon[i] >= 0:
            if dead or not off_sbuf[i]:
                elided[i] = True
                kept[i] = not dead and bool(rd)
        elif load[i] and dead:
            elided[i] = True

    # Rows of elided instructions leave the live set: their reads happen nowhere, a dead load writes nothing.
    rows_elided = elided[use.inst] & ~use.virtual
    producer = np.where(rows_elided & ~use.is_write, -1, use.producer)
    chunk_bytes = np.where(rows_elided & use.is_write & load[use.inst], 0, use.chunk_bytes)
    # A kept repeated load that is dead is not kept: its virtual read becomes an empty write.
    dead_virtual = use.virtual & ~use.is_write & elided[use.inst]
    chunk_bytes = np.where(dead_virtual, 0, chunk_bytes)
    is_write = use.is_write | dead_virtual
    virtual = use.virtual & ~dead_virtual

    # A virtual dirty chunk per kept product: written by the first instance, read at each repeat.
    repeat = np.flatnonzero(kept)
    first = canon[repeat]
    heads = np.unique(first)
    base = len(use.inst)
    head_row = np.full(n, -1, dtype=np.int64)
    head_row[heads] = base + np.arange(len(heads))
    last = {int(h): int(h) for h in heads}
    prev = []
    for j, i in zip(first.tolist(), repeat.tolist(), strict=True):
        prev.append(last[j])
        last[j] = i
    k = len(heads) + len(repeat)
    inst = np.concatenate((heads, repeat))
    return replace(
        use,
        inst=np.concatenate((use.inst, inst)),
        is_write=np.concatenate((is_write, np.arange(k) < len(heads))),
        chunk_bytes=np.concatenate((chunk_bytes, out_bytes[heads], out_bytes[first])),
        partitions=np.concatenate((use.partitions, np.maximum(out_parts[heads], 1), np.maximum(out_parts[first], 1))),
        prev_inst=np.concatenate((use.prev_inst, np.full(len(heads), -1, dtype=np.int64), np.array(prev, dtype=np.int64))),
        producer=np.concatenate((producer, np.full(len(heads), -1, dtype=np.int64), head_row[first])),
        clean=np.concatenate((use.clean, np.zeros(k, dtype=bool))),
        virtual=np.concatenate((virtual, np.ones(k, dtype=bool))),
        source_bytes=np.concatenate((use.source_bytes, np.zeros(k, dtype=np.int64))),
        vn_elided=elided,
        plain=use,
    )


def numbered_dependencies(trace: Trace, capacity_bytes: float = SBUF_BYTES) -> Dependencies:
    """deps.build_dependencies with the loop-invariant computation value-numbered into its SBUF use, products up
    to `capacity_bytes` kept."""
    deps = build_dependencies(trace)
    if len(deps.read_access) == 0:
        return deps
    raw = _numbered(trace, deps.read_access, deps.write_access, deps.hbm_written)
    canon = _bounded(trace, raw, capacity_bytes, per_sequential=False)
    args = (trace, deps.sbuf, deps.read_access, deps.write_access, deps.hbm_written, capacity_bytes)
    sbuf = value_numbered(*args, canon=canon)
    per_step = _bounded(trace, raw, capacity_bytes, per_sequential=True)
    if not np.array_equal(per_step, canon):  # a product kept only per sequential iteration (sequential_outermost)
        sbuf = replace(sbuf, sequential_major=value_numbered(*args, canon=per_step))
    return replace(deps, sbuf=sbuf)
