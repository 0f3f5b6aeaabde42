"""A minimal RFC 6455 websocket client over asyncio streams, for the scale-out tests and measurements (no
client library is a dependency). Text messages only; answers pings; masks what it sends, as clients must.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import time
from typing import Any


class WebSocket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, host: str, port: int, path: str) -> WebSocket:
        reader, writer = await asyncio.open_connection(host, port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                      f"Origin: http://{host}:{port}\r\n\r\n").encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            writer.close()
            raise ConnectionError(f"websocket handshake for {path} refused: {head.splitlines()[0]!r}")
        return cls(reader, writer)

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        length = len(payload)
        if length < 126:
            header = bytes([0x80 | opcode, 0x80 | length])
        elif length < 65536:
            header = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack("!H", length)
        else:
            header = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack("!Q", length)
        self.writer.write(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    async def send_json(self, value: Any) -> None:
        self._send_frame(0x1, json.dumps(value).encode())
        await self.writer.drain()

    async def receive(self) -> str | None:
        """The next text message; None once the server closes the connection."""
        parts: list[bytes] = []
        while True:
            first, second = await self.reader.readexactly(2)
            length = second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
            payload = await self.reader.readexactly(length)
            opcode = first & 0x0F
            if opcode == 0x8:
                return None
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode in (0x0, 0x1):
                parts.append(payload)
                if first & 0x80:
                    return b"".join(parts).decode()

    def close(self) -> None:
        self.writer.close()


async def watch_run(host: str, port: int, run_id: int, received: list[dict[str, Any]],
                    connected: asyncio.Event | None = None) -> None:
    """Append each event of /ws/runs/<id>/ to `received` (with "received_at", the local clock) until the run
    ends (finished, failed or cancelled) or the server closes the connection."""
    socket = await WebSocket.connect(host, port, f"/ws/runs/{run_id}/")
    if connected is not None:
        connected.set()
    try:
        while True:
            text = await socket.receive()
            received_at = time.time()  # before decoding: with many clients in one process, decoding queues
            if text is None:
                return
            message = json.loads(text)
            if message.get("type") != "event":
                continue
            extra = {"trace": message["trace"]} if "trace" in message else {}  # optimizer.events.TRACE_DIR
            received.append({**message["event"], "received_at": received_at, **extra})
            if message["event"]["kind"] in ("run.finished", "run.failed", "run.cancelled"):
                return
    finally:
        socket.close()
