"""Every MCP tool call is recorded (who, which tool, a digest of its arguments, how long, how it ended) and shown
to its caller and to admins: GET /api/mcp/calls, the my_tool_calls tool, the Django admin."""

from __future__ import annotations

from mcp_server.models import ToolCall
from mcp_server.records import arguments_digest
from tests.mcp_server.conftest import drive, error_text, http_client, payload


def test_each_call_is_recorded_with_its_digest_and_outcome_and_shown_to_its_caller_and_admins(
        engineer, teammate, site_admin, make_token, fake_pipeline, silu_mini, client):
    mine, theirs = make_token(engineer), make_token(teammate)

    async def scenario():
        async with http_client(mine) as agent:
            payload(await agent.call_tool("describe_problem", {"problem": "silu:mini"}))
            error_text(await agent.call_tool("describe_problem", {"problem": "nosuch:mini"}))
            error_text(await agent.call_tool("explain_kernel", {"kernel_id": "seven"}))
        async with http_client(theirs) as agent:
            payload(await agent.call_tool("list_problems", {}))
        async with http_client(mine) as agent:
            return payload(await agent.call_tool("my_tool_calls", {}))

    own = drive(scenario)
    calls = list(ToolCall.objects.filter(user=engineer).order_by("id"))
    assert [(c.tool, c.ok, c.transport) for c in calls] == [
        ("describe_problem", True, "http"), ("describe_problem", False, "http"), ("explain_kernel", False, "http"),
        ("my_tool_calls", True, "http")]
    assert calls[0].arguments_sha256 == arguments_digest({"problem": "silu:mini"})
    assert calls[0].arguments_sha256 != calls[1].arguments_sha256
    assert "nosuch" in calls[1].error and "kernel_id" in calls[2].error
    assert all(c.duration_ms > 0 for c in calls)
    # The tool shows the caller their own calls (the my_tool_calls call itself is recorded once it returns).
    assert [c["tool"] for c in own["calls"]] == ["explain_kernel", "describe_problem", "describe_problem"]

    def listed(user):
        response = client.get("/api/mcp/calls", headers={"Authorization": f"Bearer {make_token(user)}"})
        assert response.status_code == 200
        return [(c["user"], c["tool"]) for c in response.json()]

    assert {user for user, _ in listed(engineer)} == {"erin"}
    assert listed(teammate) == [("tom", "list_problems")]
    assert {user for user, _ in listed(site_admin)} == {"erin", "tom"}
    client.force_login(site_admin)
    page = client.get("/admin/mcp_server/toolcall/").content.decode()
    assert "describe_problem" in page and "list_problems" in page


def test_the_calls_page_shows_a_user_their_calls_and_an_admin_everyones(engineer, teammate, site_admin, make_token,
                                                                        fake_pipeline, silu_mini, client):
    async def scenario(token: str, tool: str):
        async with http_client(token) as agent:
            await agent.call_tool(tool, {"problem": "silu:mini"} if tool == "describe_problem" else {})

    mine, theirs = make_token(engineer), make_token(teammate)
    drive(lambda: scenario(mine, "describe_problem"))
    drive(lambda: scenario(theirs, "list_problems"))
    client.force_login(engineer)
    own = client.get("/agents/calls/").content.decode()
    assert "describe_problem" in own and "list_problems" not in own
    profile = client.get("/accounts/me/").content.decode()
    assert "/mcp</code>" in profile and 'href="/agents/calls/"' in profile and 'href="/docs/agents/"' in profile
    client.force_login(site_admin)
    everyone = client.get("/agents/calls/").content.decode()
    assert "describe_problem" in everyone and "list_problems" in everyone and "tom" in everyone
    client.logout()
    assert client.get("/agents/calls/").status_code == 302  # to the login page
