"""`manage.py mcp --user NAME` (or `--token aos_...`): the studio's MCP server over stdio, for a local agent.

The agent starts this command itself (docs/agents.md has the client configurations) and every tool runs as
that user, with that user's roles and visibility, exactly as over HTTP with their token.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import user_for_token
from mcp_server.server import build_server


class Command(BaseCommand):
    help = "Serve the studio's MCP tools over stdio, as a user (--user) or a token's owner (--token)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", default="", help="act as this username")
        parser.add_argument("--token", default="", help="act as this API token's owner (or ACCELOPT_MCP_TOKEN)")

    def handle(self, *args: Any, **options: Any) -> None:
        user = self._user(options["user"], options["token"] or os.environ.get("ACCELOPT_MCP_TOKEN", ""))
        # stdout carries the protocol: nothing else may be printed there.
        anyio.run(build_server(stdio_user=user).run_stdio_async)

    def _user(self, username: str, token: str) -> Any:
        if bool(username) == bool(token):
            raise CommandError("give exactly one of --user NAME or --token TOKEN (or set ACCELOPT_MCP_TOKEN)")
        if token:
            user = user_for_token(token)
            if user is None:
                raise CommandError("the API token is not valid (unknown or revoked)")
            return user
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {username!r}")
        return user
