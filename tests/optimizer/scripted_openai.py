"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests of the real client.

`ScriptedOpenAI(responder)` serves `POST /v1/chat/completions`. For each request, `responder(body)`
(the parsed JSON request) returns a `Reply`: a completion with given content and usage, an HTTP error
status, a malformed body, or a delay longer than the client's timeout. Every request is kept in
`requests` (body and headers) so a test can check what the model was shown.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    status: int = 200
    raw_body: str | None = None  # sent as is (a malformed reply)
    delay_s: float = 0.0  # wait before answering (a timeout when above the client's)
    retry_after: str | None = None
    reasoning: str = ""  # sent beside the content in `reasoning_field`, when set
    reasoning_field: str = "reasoning_content"
    usage: bool = True  # False: the completion carries no usage (a server that does not count tokens)


@dataclass
class Received:
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def text(self) -> str:
        return "\n".join(m.get("content", "") for m in self.body.get("messages", []))


def scripted(replies: Iterable[Reply]) -> Callable[[dict[str, Any]], Reply]:
    """A responder that answers requests with `replies` in order (and 500s once they run out)."""
    queue = list(replies)
    lock = threading.Lock()

    def respond(_: dict[str, Any]) -> Reply:
        with lock:
            return queue.pop(0) if queue else Reply(status=500, raw_body='{"error": "script exhausted"}')

    return respond


class ScriptedOpenAI:
    def __init__(self, responder: Callable[[dict[str, Any]], Reply]) -> None:
        self.responder = responder
        self.requests: list[Received] = []
        self.usage_served = {"prompt_tokens": 0, "completion_tokens": 0}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(Received(body=body, headers=dict(self.headers)))
                if not self.path.endswith("/chat/completions"):
                    self._send(404, '{"error": "unknown path"}')
                    return
                reply = server.responder(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.raw_body is not None or reply.status != 200:
                    extra = {"retry-after": reply.retry_after} if reply.retry_after else {}
                    self._send(reply.status, reply.raw_body or '{"error": {"message": "scripted"}}', extra)
                    return
                with server._lock:
                    server.usage_served["prompt_tokens"] += reply.prompt_tokens
                    server.usage_served["completion_tokens"] += reply.completion_tokens
                message = {"role": "assistant", "content": reply.content}
                if reply.reasoning:
                    message[reply.reasoning_field] = reply.reasoning
                payload = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", ""),
                    "choices": [{"index": 0, "finish_reason": reply.finish_reason, "message": message}],
                }
                if reply.usage:
                    payload["usage"] = {"prompt_tokens": reply.prompt_tokens,
                                        "completion_tokens": reply.completion_tokens,
                                        "total_tokens": reply.prompt_tokens + reply.completion_tokens}
                self._send(200, json.dumps(payload))

            def _send(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
                data = text.encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler
