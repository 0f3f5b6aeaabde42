from __future__ import annotations

from channels.generic.websocket import JsonWebsocketConsumer


class PingConsumer(JsonWebsocketConsumer):
    """/ws/ping/: a health socket. Proves the websocket path (proxy, origin check, auth) end to end."""

    def connect(self) -> None:
        self.accept()
        user = self.scope.get("user")
        self.send_json({"type": "pong", "authenticated": bool(user and user.is_authenticated)})

    def receive_json(self, content: object, **kwargs: object) -> None:
        self.send_json({"type": "pong", "echo": content})
