"""The hardware rules a recorded program must obey, checked from the program alone (replay.check_program).

The simulator enforces these while it runs a kernel (runtime.py, isa.py, language.py); a program recorded in
an untrusted process is checked again here, on what the program says it does, so a forged program cannot
claim an instruction the hardware would refuse:

* declared and result tiles: at most `partitions` partitions; a PSUM tile at most one PSUM bank per
  partition; an SBUF tile at most one SBUF partition (declared sizes are not live sizes: see
  docs/nki-coverage.md, only a single block or tile is bounded);
* every on-chip operand and destination region: at most `partitions` partitions; a PSUM destination at most
  one bank (in fp32) per partition;
* where data may go: `load` reads HBM into SBUF; only `store` and `dma_copy` write HBM; every other
  instruction reads and writes on-chip tiles; matmul and Tensor Engine transposes write PSUM, and a matmul
  reads SBUF;
* matmul shapes: stationary and moving share the partition (contraction) size, the stationary's free size
  is at most 128 and the moving's at most 512; a Tensor Engine transpose takes at most 128x128, a Vector
  Engine one 32x32.

Which instruction a program entry is comes from its kind, and for the kinds several instructions share
(a conversion is a load, a copy or a tensor_copy), from the op and engine of its cost-trace row, which the
trace check (trace_check.py) ties to the entry.
"""

from __future__ import annotations

import math
from typing import Any

from engine.platforms.nki.hardware import get_core_spec
from engine.platforms.nki.simulator.semantics.dtypes import as_dtype
from engine.platforms.nki.simulator.trace import Engine, MemorySpace
from engine.platforms.nki.simulator.verification.program import Program, ReplayError, spec_root, spec_shape

HBM, SBUF, PSUM = int(MemorySpace.HBM), int(MemorySpace.SBUF), int(MemorySpace.PSUM)
_HBM_WRITERS = ("store", "dma_copy")


def check(program: Program, trace: Any = None, platform: str = "trn1") -> None:
    """Raise replay.ReplayError for the first rule `program` breaks. `trace`: its cost trace, which names the
    instructions (without it, kinds several instructions share are checked by the rules common to them)."""
    core = get_core_spec(platform)
    limit, bank, sbuf = core.partitions, core.psum_bank_bytes_per_partition, core.sbuf_bytes_per_partition
    for bid, (name, space, dtype, shape, axis, _size, _init, _key, _serial) in enumerate(program.buffers):
        if space == HBM or not shape:
            continue
        if not (isinstance(axis, int) and 0 <= axis < len(shape)):
            raise ReplayError(f"buffer {bid} ({name}) has no partition axis")
        if shape[axis] > limit:
            raise ReplayError(f"tile {name!r} {shape} has {shape[axis]} partitions, over {limit}")
        per_partition = math.prod(shape[axis + 1:]) * as_dtype(dtype).itemsize
        cap = bank if space == PSUM else sbuf
        if per_partition > cap:
            raise ReplayError(f"{'PSUM' if space == PSUM else 'SBUF'} tile {name!r} {shape} needs {per_partition} "
                              f"bytes per partition, over {cap}")
    ops = _row_ops(trace)
    constants = program.constants
    for index, (kind, params, operands, stores, row, line) in enumerate(program.instructions):
        op, engine = ops.get(row, (None, None))
        where = f"instruction {index} ({op or kind})"

        def space_of(spec: Any) -> int:
            return program.buffers[spec_root(spec)[1]][1]

        tiles = [o for o in operands if o is not None and o[0] in ("r", "f", "d")]
        dsts = [s[2] for s in stores]
        for spec in (*tiles, *dsts):
            shape = spec_shape(spec, constants)
            if space_of(spec) != HBM and shape and shape[0] > limit:
                raise ReplayError(f"{where}: a region of {shape[0]} partitions, over {limit}", line)
        for spec in dsts:
            if space_of(spec) == PSUM:
                shape = spec_shape(spec, constants)
                free = math.prod(shape) // shape[0] if shape and shape[0] else 0
                if free * 4 > bank:
                    raise ReplayError(f"{where}: a PSUM destination of {free} elements per partition, over the "
                                      f"{bank}-byte bank", line)
        if op is None and kind in ("convert", "move"):
            continue  # without its row the instruction is unknown: a load or a store moves HBM legitimately
        if op == "load":
            if any(space_of(s) != HBM for s in tiles) or any(space_of(d) != SBUF for d in dsts):
                raise ReplayError(f"{where}: load reads HBM into SBUF", line)
            continue
        if op == "store":
            if any(space_of(s) == HBM for s in tiles) or any(space_of(d) != HBM for d in dsts):
                raise ReplayError(f"{where}: store writes an on-chip tile to HBM", line)
            continue
        if op in ("dma_copy", "dma_transpose", "load_transpose2d", "dma_compute"):  # DMAs (the last three: NKI 0.6)
            continue
        if any(space_of(s) == HBM for s in tiles) or any(space_of(d) == HBM for d in dsts):
            raise ReplayError(f"{where}: only load, store and dma_copy move data to or from HBM "
                              f"(other instructions work on SBUF and PSUM tiles)", line)
        if kind == "matmul":
            _matmul(program, params, tiles, dsts, space_of, where, line)
        elif kind == "transpose":
            partitions, free = params[0], params[1]
            size = 128 if engine in (None, int(Engine.TENSOR)) else 32
            if partitions > size or free > size:
                raise ReplayError(f"{where}: a transpose of {partitions}x{free}, over {size}x{size}", line)
            if engine == int(Engine.TENSOR) and any(space_of(d) != PSUM for d in dsts):
                raise ReplayError(f"{where}: a Tensor Engine transpose writes PSUM", line)


def _matmul(program: Program, params: tuple, tiles: list[Any], dsts: list[Any], space_of: Any, where: str,
            line: int) -> None:
    k, m, n, _is_transpose = params
    if len(tiles) != 2 or any(space_of(s) != SBUF for s in tiles):
        raise ReplayError(f"{where}: a matmul reads two SBUF tiles", line)
    if any(space_of(d) != PSUM for d in dsts):
        raise ReplayError(f"{where}: a matmul writes PSUM", line)
    for spec, free in zip(tiles, (m, n), strict=True):
        shape = spec_shape(spec, program.constants)
        # perf_mode double_row splits the contraction over the partitions and a first free dimension of 2.
        double_row = len(shape) == 3 and shape[1] == 2 and 2 * shape[0] == k
        if not shape or (shape[0] != k and not double_row) or math.prod(shape) != k * free:
            raise ReplayError(f"{where}: operand {shape} is not {k}x{free}", line)
    if m > 128:
        raise ReplayError(f"{where}: stationary free size {m} exceeds 128", line)
    if n > 512:
        raise ReplayError(f"{where}: moving free size {n} exceeds 512", line)


def _row_ops(trace: Any) -> dict[int, tuple[str, int]]:
    if trace is None:
        return {}
    names = trace.op_names
    opcode, engine = trace.columns["opcode"], trace.columns["engine"]
    return {row: (names[int(opcode[row])], int(engine[row])) for row in range(len(opcode))}
