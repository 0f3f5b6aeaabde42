"""What an agent learns from tools/list before calling anything: every tool, what it does, what each argument
means, and which tools only read (so a client may run them without asking its user)."""

from __future__ import annotations

from tests.mcp_server.conftest import drive, http_client

TOOLS = {"list_problems", "describe_problem", "evaluate_kernel", "explain_kernel", "search_memory", "propose_lesson",
         "launch_run", "run_progress", "launch_campaign", "campaign_progress", "leaderboard", "migrate_legacy_kernel",
         "my_tool_calls"}


def test_the_tools_describe_themselves_and_their_arguments(engineer, make_token, silu_mini):
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = drive(scenario)
    assert set(tools) == TOOLS
    assert all(tool.description for tool in tools.values())
    assert "silu:mini" in tools["describe_problem"].input_schema["properties"]["problem"]["description"]
    assert tools["evaluate_kernel"].input_schema["required"] == ["source"]
    assert tools["explain_kernel"].annotations.read_only_hint is True
    assert tools["evaluate_kernel"].annotations.read_only_hint is False
    assert tools["evaluate_kernel"].annotations.destructive_hint is False
