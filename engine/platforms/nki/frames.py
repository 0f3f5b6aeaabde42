"""The simulator's instruction trace as it crosses the pipes, and what the parent checks on it.

The trace goes from the kernel child to the verifier, which checks it and prices it (the performance model
never runs next to untrusted code): columns travel as arrays, the small tables as JSON (`encode_trace`, `decode_trace`;
the simulator backend's). The parent reads its dtype columns to refuse work done in lower precision than the
reference's outputs (`check_trace_precision`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.evaluator.checks import CheckFailed, float_significand_bits
from engine.evaluator.protocol import ProtocolError
from engine.platforms.nki.simulator.trace import (
    ACCESS_COLUMNS,
    INSTRUCTION_COLUMNS,
    Engine,
    LoopInfo,
    LoopKind,
    MemorySpace,
    TensorInfo,
    Trace,
)


def encode_trace(trace: Any, prefix: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    trace.freeze()
    meta = {
        "op_names": list(trace.op_names),
        "dtype_names": list(trace.dtype_names),
        "tensors": [
            {"name": t.name, "memory": int(t.space), "shape": list(t.shape), "dtype": str(t.dtype),
             "partition_axis": t.partition_axis, "bytes_per_partition": t.bytes_per_partition,
             "total_bytes": t.total_bytes}
            for t in trace.tensors
        ],
        "loops": [{"kind": int(loop.kind), "trip_count": loop.trip_count, "line": loop.line} for loop in trace.loops],
        "loop_contexts": [[list(pair) for pair in ctx] for ctx in trace.loop_contexts],
    }
    arrays = {f"{prefix}col.{k}": np.asarray(v) for k, v in trace.columns.items()}
    arrays.update({f"{prefix}acc.{k}": np.asarray(v) for k, v in trace.access.items()})
    return meta, arrays


def decode_trace(meta: dict[str, Any], arrays: dict[str, np.ndarray], prefix: str) -> Any:
    columns = {k: arrays[f"{prefix}col.{k}"].astype(code, copy=False) for k, code in INSTRUCTION_COLUMNS.items()}
    access = {k: arrays[f"{prefix}acc.{k}"].astype(code, copy=False) for k, code in ACCESS_COLUMNS.items()}
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1 or len({len(v) for v in access.values()}) > 1:
        raise ProtocolError("trace columns have different lengths")
    return Trace(
        op_names=list(meta["op_names"]),
        dtype_names=list(meta["dtype_names"]),
        tensors=[TensorInfo(name=t["name"], space=MemorySpace(t["memory"]), shape=tuple(t["shape"]), dtype=t["dtype"],
                            partition_axis=t["partition_axis"], bytes_per_partition=t["bytes_per_partition"],
                            total_bytes=t["total_bytes"]) for t in meta["tensors"]],
        loops=[LoopInfo(kind=LoopKind(loop["kind"]), trip_count=loop["trip_count"], line=loop["line"])
               for loop in meta["loops"]],
        loop_contexts=[tuple(tuple(pair) for pair in ctx) for ctx in meta["loop_contexts"]],
        columns=columns,
        access=access,
        frozen=True,
    )


@dataclass(frozen=True)
class TraceDtypes:
    """The columns of a trace the precision check needs (sent by the kernel child as plain arrays)."""

    engine: np.ndarray
    dtype: np.ndarray
    opcode: np.ndarray
    line: np.ndarray
    dtype_names: list[str]
    op_names: list[str]


def trace_dtypes(trace: dict) -> TraceDtypes:
    """The precision check's columns of a trace as it crosses the pipes ({"meta": ..., "arrays": ...})."""
    arrays, meta = trace["arrays"], trace["meta"]
    return TraceDtypes(engine=arrays["trace.col.engine"], dtype=arrays["trace.col.dtype"],
                       opcode=arrays["trace.col.opcode"], line=arrays["trace.col.line"],
                       dtype_names=list(meta["dtype_names"]), op_names=list(meta["op_names"]))


_ENGINE_NAMES = {"TENSOR": "Tensor", "VECTOR": "Vector", "SCALAR": "Scalar", "GPSIMD": "GpSimd", "DMA": "DMA"}


def check_trace_precision(trace: TraceDtypes, floor: tuple[int, str] | None) -> None:
    """No instruction may compute in a float type narrower than the reference's outputs."""
    if floor is None or not len(trace.dtype):
        return
    floor_bits, floor_name = floor
    narrow = [i for i, name in enumerate(trace.dtype_names)
              if (bits := float_significand_bits(name)) is not None and bits < floor_bits]
    if not narrow:
        return
    rows = np.flatnonzero(np.isin(trace.dtype, narrow))
    if not len(rows):
        return
    row = int(rows[0])
    op = trace.op_names[int(trace.opcode[row])] if int(trace.opcode[row]) < len(trace.op_names) else "?"
    code = int(trace.engine[row])
    engine = _ENGINE_NAMES[Engine(code).name] if code in Engine._value2member_map_ else str(code)
    line = int(trace.line[row])
    where = f" at line {line}" if line > 0 else ""
    raise CheckFailed(f"{len(rows)} instruction(s) compute in lower precision than the reference ({floor_name}): "
                      f"first {op} on the {engine} engine in {trace.dtype_names[int(trace.dtype[row])]}{where}",
                      line=line if line > 0 else None)
