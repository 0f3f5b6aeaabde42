"""Arrays cross between the evaluator and its children as raw bytes described by the header."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from engine.evaluator import protocol


def round_trip(arrays: dict[str, np.ndarray]) -> tuple[dict, dict[str, np.ndarray]]:
    stream = io.BytesIO()
    protocol.write_message(stream, {"op": "run", "n": 3}, arrays)
    stream.seek(0)
    return protocol.read_message(stream)


def test_it_returns_every_array_with_its_dtype_shape_and_values() -> None:
    sent = {
        "in0": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "in1": np.array([True, False]),
        "in2": np.asfortranarray(np.arange(6, dtype=">i8").reshape(2, 3)),  # not C order, not native order
        "in3": np.float64(2.5) * np.ones(()),
        "in4": np.zeros((0, 5), dtype=np.complex64),
    }
    header, received = round_trip(sent)
    assert header == {"op": "run", "n": 3}
    assert list(received) == list(sent)
    for name, array in sent.items():
        assert received[name].dtype == array.dtype and received[name].shape == array.shape
        np.testing.assert_array_equal(received[name], array)


def test_it_refuses_to_send_an_object_array() -> None:
    with pytest.raises(TypeError, match="only numeric arrays"):
        protocol.write_message(io.BytesIO(), {}, {"bad": np.array([{"x": 1}], dtype=object)})


def frame(listing: list, payload: bytes) -> io.BytesIO:
    head = json.dumps({"ok": True, protocol.ARRAYS_KEY: listing}).encode()
    return io.BytesIO(protocol._FRAME.pack(len(head), len(payload)) + head + payload)


def test_it_rejects_a_message_announcing_an_object_dtype() -> None:
    with pytest.raises(protocol.ProtocolError, match="array 'x' is \\|O"):
        protocol.read_message(frame([["x", "|O", [1]]], b"\0" * 8))


def test_it_rejects_a_message_whose_arrays_do_not_add_up_to_its_payload() -> None:
    with pytest.raises(protocol.ProtocolError, match="announce 16 bytes, the payload has 8"):
        protocol.read_message(frame([["x", "<f4", [4]]], b"\0" * 8))
