"""`manage.py mcp` over stdio, started by the SDK's own client as a local agent starts it: the tools act as the user
named on the command line, and the calls are recorded as stdio calls. The server is a child process, so it gets
its own SQLite database (migrated and filled once for this module), not the test's transaction."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from engine.platforms.nki.suites.loader import SUITES_DIR
from tests.mcp_server.conftest import error_text, payload

ROOT = Path(__file__).resolve().parents[2]
SETUP = """
from accounts.roles import ENGINEER, grant_role
from accounts.services import create_token
from benchmark import services
from django.contrib.auth import get_user_model
erin = get_user_model().objects.create_user("erin")
grant_role(erin, ENGINEER)
get_user_model().objects.create_user("vera")
services.load_suite("nkibench", evaluate_cases=())
print(create_token(erin, "stdio test").secret)
"""


def _environment(database: Path) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "ACCELOPT_EVALUATION_INLINE": "1",
            "ACCELOPT_EMBEDDED_WORKER": "0"}


def _manage(database: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=_environment(database),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A migrated database with the suite, an engineer (erin, and her token) and a viewer (vera)."""
    database = tmp_path_factory.mktemp("mcp-stdio") / "studio.sqlite3"
    migrated = _manage(database, "migrate", "-v0")
    assert migrated.returncode == 0, migrated.stderr
    filled = _manage(database, "shell", "-c", SETUP)
    assert filled.returncode == 0, filled.stderr
    return database, filled.stdout.strip().splitlines()[-1]


def _serve(database: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["manage.py", "mcp", *args], cwd=str(ROOT),
                                 env=_environment(database))


def _run(scenario: Any) -> Any:
    return anyio.run(scenario)


def test_a_local_agent_evaluates_a_kernel_as_the_user_it_was_started_for(site):
    database, _ = site
    source = (SUITES_DIR / "nkibench" / "baselines" / "silu.py").read_text() + "\n# over stdio\n"

    async def scenario():
        async with Client(_serve(database, "--user", "erin"), cache=None) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            evaluated = payload(await client.call_tool("evaluate_kernel", {"source": source,
                                                                           "problem": "silu:mini"}))
            unknown = error_text(await client.call_tool("describe_problem", {"problem": "nosuch:mini"}))
            kernel = await client.read_resource(f"studio://kernels/{evaluated['kernel_id']}")
            return names, evaluated, unknown, kernel.contents[0].text

    names, evaluated, unknown, kernel_source = _run(scenario)
    assert {"evaluate_kernel", "search_memory", "propose_lesson", "leaderboard"} <= set(names)
    assert evaluated["verdict"] == "correct" and evaluated["latency_ms"] > 0 and evaluated["breakdown"]
    assert "nosuch" in unknown
    assert kernel_source == source
    with sqlite3.connect(database) as db:
        author = db.execute("select u.username from benchmark_kernel k join auth_user u on u.id = k.author_id "
                            "where k.id = ?", (evaluated["kernel_id"],)).fetchone()
        calls = db.execute("select u.username, c.tool, c.transport, c.ok from mcp_server_toolcall c "
                           "join auth_user u on u.id = c.user_id order by c.id").fetchall()
    assert author == ("erin",)
    assert calls == [("erin", "evaluate_kernel", "stdio", 1), ("erin", "describe_problem", "stdio", 0)]


def test_a_token_works_too_and_a_viewer_is_refused_what_needs_the_engineer_role(site):
    database, token = site

    async def as_token():
        async with Client(_serve(database, "--token", token), cache=None) as client:
            return payload(await client.call_tool("list_problems", {"case": "mini"}))

    async def as_viewer():
        async with Client(_serve(database, "--user", "vera"), cache=None) as client:
            return error_text(await client.call_tool("search_memory", {"problem": "silu:mini"}))

    assert "silu:mini" in [p["address"] for p in _run(as_token)["problems"]]
    assert "needs the engineer role" in _run(as_viewer)


@pytest.mark.parametrize("args, message", [
    (("--token", "aos_not-a-real-token"), "the API token is not valid (unknown or revoked)"),
    (("--user", "nobody"), "no active user 'nobody'"),
    ((), "give exactly one of --user NAME or --token TOKEN"),
])
def test_the_command_refuses_to_start_without_a_valid_user(site, args, message):
    database, _ = site
    refused = _manage(database, "mcp", *args, timeout=120)
    assert refused.returncode != 0
    assert message in refused.stderr
    assert refused.stdout == ""  # stdout is the protocol's: nothing else is written there
