"""Messages between the evaluator and its children: length-prefixed JSON plus named numpy arrays.

A frame is `>QQ` (header length, payload length), a UTF-8 JSON header, then the arrays' raw C-order bytes
one after another. The header lists each array's name, dtype and shape under `ARRAYS_KEY`; only numeric
and boolean dtypes are accepted, so a child can send data but never objects. Arrays are written straight
from their buffers and read straight into freshly allocated ones: a message of N bytes costs about N
bytes of memory on each side, not several copies (a 1 GiB output must not cost the parent gigabytes).
Nothing goes through files the kernel could find.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from typing import Any, BinaryIO

import numpy as np

_FRAME = struct.Struct(">QQ")
ARRAYS_KEY = "__arrays__"
_ARRAY_KINDS = "biufc"  # bool, integers, floats, complex: no objects, strings or structured records
IO_CHUNK_BYTES = 1 << 22


class ProtocolError(Exception):
    """The other side sent something that is not a frame, or a frame over the size limit."""


def frame_parts(header: dict[str, Any], arrays: dict[str, np.ndarray] | None) -> tuple[bytes, list[memoryview]]:
    """The frame header plus JSON head as bytes, and one flat byte view per array (no copies when the
    array is already C-contiguous)."""
    listing, views = [], []
    for name, array in (arrays or {}).items():
        array = np.asarray(array, order="C")  # ascontiguousarray would turn a 0-d array into shape (1,)
        if array.dtype.kind not in _ARRAY_KINDS:
            raise TypeError(f"array {name!r} has dtype {array.dtype}; only numeric arrays can be sent")
        listing.append([name, array.dtype.str, list(array.shape)])
        views.append(memoryview(array.reshape(-1).view(np.uint8)) if array.size else memoryview(b""))
    head = json.dumps({**header, ARRAYS_KEY: listing}, allow_nan=True).encode("utf-8")
    payload_len = sum(v.nbytes for v in views)
    return _FRAME.pack(len(head), payload_len) + head, views


def parse_header(head: bytes, payload_len: int) -> tuple[dict[str, Any], list[tuple[str, np.dtype, tuple[int, ...]]]]:
    """The JSON header and the arrays it announces; the announced sizes must add up to the payload."""
    try:
        header = json.loads(head)
    except (ValueError, RecursionError) as exc:  # RecursionError: a header nested deeper than the parser goes
        raise ProtocolError(f"malformed message: {type(exc).__name__}: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("malformed message: header is not an object")
    listing = header.pop(ARRAYS_KEY, [])
    layout, total = [], 0
    try:
        for name, dtype_str, shape in listing:
            if not isinstance(name, str) or not isinstance(dtype_str, str) or not isinstance(shape, list):
                raise ProtocolError(f"malformed message: bad array entry {name!r}")
            dtype = np.dtype(dtype_str)
            shape = tuple(int(n) for n in shape)
            if dtype.kind not in _ARRAY_KINDS or any(n < 0 for n in shape):
                raise ProtocolError(f"malformed message: array {name!r} is {dtype_str}{list(shape)}")
            layout.append((str(name), dtype, shape))
            total += math.prod(shape) * dtype.itemsize
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"malformed message: bad array listing: {exc}") from None
    if total != payload_len:
        raise ProtocolError(f"malformed message: arrays announce {total} bytes, the payload has {payload_len}")
    return header, layout


def read_arrays(layout: list[tuple[str, np.dtype, tuple[int, ...]]],
                read_into: Callable[[memoryview], None]) -> dict[str, np.ndarray]:
    """Allocate each announced array and let `read_into` fill its bytes (in chunks, so no reader builds a
    second copy of a large array)."""
    arrays = {}
    for name, dtype, shape in layout:
        array = np.empty(shape, dtype=dtype)
        if array.size:
            view = memoryview(array.reshape(-1).view(np.uint8))
            for start in range(0, view.nbytes, IO_CHUNK_BYTES):
                read_into(view[start:start + IO_CHUNK_BYTES])
        arrays[name] = array
    return arrays


def write_message(stream: BinaryIO, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
    head, views = frame_parts(header, arrays)
    stream.write(head)
    for view in views:
        for start in range(0, view.nbytes, IO_CHUNK_BYTES):
            stream.write(view[start:start + IO_CHUNK_BYTES])
    stream.flush()


def _read_exact_into(stream: BinaryIO, view: memoryview) -> None:
    filled = 0
    while filled < view.nbytes:
        count = stream.readinto(view[filled:])
        if not count:
            raise EOFError(f"stream closed with {view.nbytes - filled} of {view.nbytes} bytes still expected")
        filled += count


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    buffer = bytearray(size)
    _read_exact_into(stream, memoryview(buffer))
    return bytes(buffer)


def read_message(stream: BinaryIO, *, max_bytes: int = 1 << 40) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Blocking read of one frame (used by children; the parent reads with a deadline in sandbox.py)."""
    head_len, payload_len = _FRAME.unpack(_read_exact(stream, _FRAME.size))
    check_frame_sizes(head_len, payload_len, max_bytes)
    header, layout = parse_header(_read_exact(stream, head_len), payload_len)
    return header, read_arrays(layout, lambda view: _read_exact_into(stream, view))


def check_frame_sizes(head_len: int, payload_len: int, max_bytes: int) -> None:
    if head_len > 64 * 1024 * 1024 or head_len + payload_len > max_bytes:
        raise ProtocolError(f"message of {head_len + payload_len} bytes exceeds the limit of {max_bytes} bytes")


FRAME_HEADER_SIZE = _FRAME.size
unpack_frame_header = _FRAME.unpack

# The first frame every child writes, from our own code, before it reads a request (so before any kernel or
# reference code runs in it): the parent's evidence that the sandbox started. A child that dies after it sent
# this did not fail to start; on backends where only the kernel runs in the kernel's process, that death is
# the kernel's (pipeline.child_failed).
HELLO_HEADER = {"ready": True}


def hello_frame() -> bytes:
    head, _views = frame_parts(HELLO_HEADER, None)
    return head


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
