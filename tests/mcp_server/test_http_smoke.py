from __future__ import annotations

from tests.mcp_server.conftest import drive, http_client, payload


def test_list_problems(engineer, make_token, silu_mini):
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            tools = await client.list_tools()
            result = await client.call_tool("list_problems", {"case": "mini"})
            return [t.name for t in tools.tools], payload(result)

    names, data = drive(scenario)
    assert "evaluate_kernel" in names
    assert "silu:mini" in [p["address"] for p in data["problems"]]
