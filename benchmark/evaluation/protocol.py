"""Messages between the evaluator and its children: length-prefixed JSON plus named numpy arrays.

A frame is `>QQ` (header length, payload length), a UTF-8 JSON header, then an uncompressed `.npz`
payload (empty when there are no arrays). Arrays are loaded with `allow_pickle=False`, so a child can
send data but never objects. Nothing goes through files the kernel could find.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any, BinaryIO

import numpy as np

_FRAME = struct.Struct(">QQ")


class ProtocolError(Exception):
    """The other side sent something that is not a frame, or a frame over the size limit."""


def encode_arrays(arrays: dict[str, np.ndarray]) -> bytes:
    if not arrays:
        return b""
    buffer = io.BytesIO()
    np.savez(buffer, **{name: np.ascontiguousarray(a) for name, a in arrays.items()})
    return buffer.getvalue()


def decode_arrays(payload: bytes) -> dict[str, np.ndarray]:
    if not payload:
        return {}
    with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def write_message(stream: BinaryIO, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
    head = json.dumps(header, allow_nan=True).encode("utf-8")
    payload = encode_arrays(arrays or {})
    stream.write(pack_frame_header(len(head), len(payload)))
    stream.write(head)
    stream.write(payload)
    stream.flush()


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    chunks = []
    remaining = size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise EOFError(f"stream closed with {remaining} of {size} bytes still expected")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_message(stream: BinaryIO, *, max_bytes: int = 1 << 40) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Blocking read of one frame (used by children; the parent reads with a deadline in sandbox.py)."""
    head_len, payload_len = _FRAME.unpack(_read_exact(stream, _FRAME.size))
    check_frame_sizes(head_len, payload_len, max_bytes)
    header = json.loads(_read_exact(stream, head_len))
    return header, decode_arrays(_read_exact(stream, payload_len))


def check_frame_sizes(head_len: int, payload_len: int, max_bytes: int) -> None:
    if head_len > 64 * 1024 * 1024 or head_len + payload_len > max_bytes:
        raise ProtocolError(f"message of {head_len + payload_len} bytes exceeds the limit of {max_bytes} bytes")


FRAME_HEADER_SIZE = _FRAME.size
unpack_frame_header = _FRAME.unpack
pack_frame_header = _FRAME.pack


def parse_message(head: bytes, payload: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    try:
        header = json.loads(head)
        arrays = decode_arrays(payload)
    except (ValueError, OSError) as exc:
        raise ProtocolError(f"malformed message: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("malformed message: header is not an object")
    return header, arrays


# -- kernel inputs --------------------------------------------------------------------------------
# A kernel's inputs are arrays, but NKIBench references also pass plain numbers (an epsilon, a scale):
# those travel in the header and arrive as the same Python or numpy scalar type.


def split_inputs(values: list[Any], prefix: str = "in") -> tuple[dict[str, np.ndarray], list[list[Any]]]:
    arrays: dict[str, np.ndarray] = {}
    scalars: list[list[Any]] = []
    for index, value in enumerate(values):
        if isinstance(value, np.ndarray):
            arrays[f"{prefix}{index}"] = value
        elif isinstance(value, np.generic) and value.dtype.kind in "biuf":
            scalars.append([index, f"np:{value.dtype.name}", value.item()])
        elif isinstance(value, (bool, int, float)):
            scalars.append([index, type(value).__name__, value])
        else:
            raise TypeError(f"input {index} is a {type(value).__name__}; kernel inputs must be numpy arrays or numbers")
    return arrays, scalars


def join_inputs(count: int, arrays: dict[str, np.ndarray], scalars: list[list[Any]],
                prefix: str = "in") -> list[Any]:
    values: list[Any] = [arrays.get(f"{prefix}{i}") for i in range(count)]
    for index, kind, value in scalars:
        if kind.startswith("np:"):
            values[index] = np.dtype(kind[3:]).type(value)
        else:
            values[index] = {"bool": bool, "int": int, "float": float}[kind](value)
    return values


# -- instruction traces ---------------------------------------------------------------------------
# The trace crosses from the kernel child to the profile child (the performance model never runs next to
# untrusted code). Columns travel as arrays, the small tables as JSON.


def encode_trace(trace: Any, prefix: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    trace.freeze()
    meta = {
        "op_names": list(trace.op_names),
        "dtype_names": list(trace.dtype_names),
        "tensors": [
            {"name": t.name, "memory": int(t.memory), "shape": list(t.shape), "dtype": str(t.dtype),
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
    from benchmark.nki.trace import (
        ACCESS_COLUMNS,
        INSTRUCTION_COLUMNS,
        LoopInfo,
        LoopKind,
        Memory,
        TensorInfo,
        Trace,
    )

    columns = {k: arrays[f"{prefix}col.{k}"].astype(code, copy=False) for k, code in INSTRUCTION_COLUMNS.items()}
    access = {k: arrays[f"{prefix}acc.{k}"].astype(code, copy=False) for k, code in ACCESS_COLUMNS.items()}
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1 or len({len(v) for v in access.values()}) > 1:
        raise ProtocolError("trace columns have different lengths")
    return Trace(
        op_names=list(meta["op_names"]),
        dtype_names=list(meta["dtype_names"]),
        tensors=[TensorInfo(name=t["name"], memory=Memory(t["memory"]), shape=tuple(t["shape"]), dtype=t["dtype"],
                            partition_axis=t["partition_axis"], bytes_per_partition=t["bytes_per_partition"],
                            total_bytes=t["total_bytes"]) for t in meta["tensors"]],
        loops=[LoopInfo(kind=LoopKind(loop["kind"]), trip_count=loop["trip_count"], line=loop["line"])
               for loop in meta["loops"]],
        loop_contexts=[tuple(tuple(pair) for pair in ctx) for ctx in meta["loop_contexts"]],
        columns=columns,
        access=access,
        frozen=True,
    )
