"""What an agent is refused over /mcp, and how it reads: the REST API's rules (tokens, roles, visibility) and its
messages (unknown problem, kernel too large), as HTTP 401s before MCP or as tool errors it can read."""

from __future__ import annotations

import json

import httpx2
import pytest
from mcp import MCPError

from accounts.models import ApiToken
from accounts.services import revoke_token
from benchmark import services
from benchmark.models import Kernel
from engine.evaluator.static_check import MAX_SOURCE_BYTES
from mcp_server.models import ToolCall
from tests.mcp_server.conftest import BASE, asgi_app, drive, error_text, http_client, payload

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}


def _post(headers: dict[str, str], content: bytes | None = None) -> httpx2.Response:
    async def scenario():
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=asgi_app()), base_url=BASE) as http:
            sent = {"content": content} if content is not None else {"json": INITIALIZE}
            return await http.post("/mcp", **sent, headers={"Accept": "application/json, text/event-stream", **headers})

    return drive(scenario)


@pytest.mark.parametrize("headers, detail", [
    ({}, "needs a personal API token"),
    ({"Authorization": "Token abc"}, "must be 'Bearer <token>'"),
    ({"Authorization": "Bearer aos_not-a-real-token"}, "not valid (unknown or revoked)"),
])
def test_a_request_without_a_valid_token_is_refused_before_mcp(db, headers, detail):
    response = _post(headers)
    assert response.status_code == 401
    assert detail in response.json()["detail"]
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_a_revoked_token_is_refused_and_the_sdk_client_cannot_connect(engineer, make_token):
    token = make_token(engineer)
    assert _post({"Authorization": f"Bearer {token}"}).status_code == 200
    revoke_token(engineer, ApiToken.objects.get(user=engineer).pk)
    assert _post({"Authorization": f"Bearer {token}"}).status_code == 401

    async def scenario():
        async with http_client(token) as client:
            await client.list_tools()

    with pytest.raises(BaseExceptionGroup) as raised:  # the SDK's client fails to connect at all
        drive(scenario)
    assert raised.group_contains(MCPError, depth=None)
    assert not ToolCall.objects.exists()  # refused before any tool ran


def test_a_viewer_may_read_problems_but_not_evaluate(viewer, make_token, fake_pipeline, silu_mini):
    token = make_token(viewer)

    async def scenario():
        async with http_client(token) as client:
            problems = payload(await client.call_tool("list_problems", {"case": "mini"}))
            refused = error_text(await client.call_tool("evaluate_kernel", {"source": "x", "problem": "silu:mini"}))
            memory = error_text(await client.call_tool("search_memory", {"problem": "silu:mini"}))
            return problems, refused, memory

    problems, refused, memory = drive(scenario)
    assert problems["problems"]
    assert "evaluating a kernel needs the engineer role" in refused
    assert "needs the engineer role" in memory
    assert not fake_pipeline.calls


def test_another_users_private_kernel_is_not_visible(engineer, teammate, make_token, fake_pipeline, silu_mini):
    # Uploaded against the teammate's own reference: a private problem, and so a private kernel.
    kernel, _, _ = services.upload_kernel(teammate, kernel_source=silu_mini.baseline_kernel.source + "\n# private\n",
                                          reference_source=silu_mini.reference_source, evaluate=True)
    token, theirs = make_token(engineer), make_token(teammate)

    async def scenario():
        async with http_client(token) as client:
            texts = [
                error_text(await client.call_tool("explain_kernel", {"kernel_id": kernel.pk})),
                error_text(await client.call_tool("search_memory", {"kernel_id": kernel.pk})),
                error_text(await client.call_tool("describe_problem", {"problem": str(kernel.problem_id)})),
                error_text(await client.call_tool("launch_run", {"problem": "silu:mini",
                                                                 "start_kernel_id": kernel.pk})),
            ]
            try:
                await client.read_resource(f"studio://kernels/{kernel.pk}")
            except MCPError as error:
                texts.append(str(error))
            return texts

    async def owner():
        async with http_client(theirs) as client:
            explained = payload(await client.call_tool("explain_kernel", {"kernel_id": kernel.pk}))
            source = await client.read_resource(f"studio://kernels/{kernel.pk}")
            return explained, source.contents[0].text

    texts = drive(scenario)
    assert len(texts) == 5
    assert all(f"no kernel with id {kernel.pk}" in text or f"no problem with id {kernel.problem_id}" in text
               for text in texts), texts
    explained, source = drive(owner)
    assert explained["kernel_id"] == kernel.pk and source == kernel.source


def test_a_private_runs_kernel_and_progress_are_not_visible(engineer, teammate, make_token, fake_pipeline, silu_mini):
    """What the teammate's private run wrote is as private as the run over MCP too (issue 36): no tool or resource
    reads it, starts from it or ranks lessons for it; the teammate's own token reads all of it."""
    from benchmark.models import KernelOrigin
    from optimizer.models import Run

    baseline = silu_mini.baseline_kernel
    run = Run.objects.create(problem=silu_mini, start_kernel=baseline, owner=teammate, is_public=False)
    source = baseline.source + "\n# the teammate's private run wrote this\n"
    kernel = Kernel.objects.create(problem=silu_mini, source=source, sha256=services.source_sha256(source),
                                   origin=KernelOrigin.GENERATED, run_id=run.pk, author=teammate, parent=baseline)
    services.request_evaluation(kernel, "trn1", user=teammate, wait=True)

    async def scenario(token: str) -> list[str]:  # each answer's text, a tool error's or a result's
        async with http_client(token) as client:
            calls = [("explain_kernel", {"kernel_id": kernel.pk}), ("search_memory", {"kernel_id": kernel.pk}),
                     ("launch_run", {"problem": "silu:mini", "start_kernel_id": kernel.pk}),
                     ("run_progress", {"run_id": run.pk}), ("leaderboard", {"platform": "trn1", "case": "mini"})]
            answers = [(await client.call_tool(tool, arguments)).content[0].text for tool, arguments in calls]
            try:
                answers.append((await client.read_resource(f"studio://kernels/{kernel.pk}")).contents[0].text)
            except MCPError as error:
                answers.append(str(error))
            return answers

    mine, theirs = make_token(engineer), make_token(teammate)
    refused = drive(lambda: scenario(mine))
    assert [f"no kernel with id {kernel.pk}" in text for text in refused[:3]] == [True, True, True], refused
    assert f"no run with id {run.pk}" in refused[3]
    assert f'"kernel_id": {kernel.pk}' not in refused[4] and f"no kernel with id {kernel.pk}" in refused[5]
    answered = drive(lambda: scenario(theirs))
    assert f'"kernel_id": {kernel.pk}' in answered[0] and '"lessons"' in answered[1] and answered[5] == source
    assert f'"run_id": {run.pk}' in answered[3] and f'"kernel_id": {kernel.pk}' in answered[4]


def test_bad_input_gets_the_apis_messages_as_tool_errors(engineer, make_token, fake_pipeline, silu_mini):
    token = make_token(engineer)
    too_large = "# x\n" * (MAX_SOURCE_BYTES // 4 + 1)

    async def scenario():
        async with http_client(token) as client:
            return {
                "unknown problem": error_text(await client.call_tool("describe_problem", {"problem": "nosuch:mini"})),
                "too large": error_text(await client.call_tool("evaluate_kernel", {"source": too_large,
                                                                                   "problem": "silu:mini"})),
                "both": error_text(await client.call_tool("evaluate_kernel", {"source": "x"})),
                "wrong type": error_text(await client.call_tool("explain_kernel", {"kernel_id": "seven"})),
                "missing": error_text(await client.call_tool("evaluate_kernel", {"problem": "silu:mini"})),
                "bad case": error_text(await client.call_tool("leaderboard", {"case": "huge"})),
                "unknown tool": error_text(await client.call_tool("no_such_tool", {})),

            }

    errors = drive(scenario)
    assert "nosuch" in errors["unknown problem"]
    assert "the limit is 256 KiB" in errors["too large"]
    assert "give either 'problem'" in errors["both"]
    assert "kernel_id" in errors["wrong type"] and "integer" in errors["wrong type"]
    assert "source" in errors["missing"] and "required" in errors["missing"].lower()
    assert "unknown case 'huge'" in errors["bad case"]
    assert "no_such_tool" in errors["unknown tool"]
    assert not fake_pipeline.calls  # nothing was evaluated


def test_a_source_that_is_not_utf8_text_is_refused_before_any_tool_runs(engineer, make_token, fake_pipeline,
                                                                          silu_mini):
    # The SDK's client cannot even send such a source; a hand-made request can: the SDK's JSON-RPC parser refuses
    # it as a parse error naming the position, so no tool, and no kernel row, ever sees it.
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "evaluate_kernel", "arguments": {"source": "x = 1\ud800\n", "problem": "silu:mini"}}}
    headers = {"Authorization": f"Bearer {make_token(engineer)}", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-06-18"}
    lone_surrogate = json.dumps(call, ensure_ascii=True).encode()
    latin1 = json.dumps(call, ensure_ascii=True).replace("\\ud800", "\u00e9").encode("latin-1")  # one byte: not UTF-8
    assert b"\xe9" in latin1
    for body in (lone_surrogate, latin1):
        response = _post(headers, content=body)
        assert response.status_code == 400
        assert response.json()["error"]["message"].startswith("Parse error")
    assert not fake_pipeline.calls and not Kernel.objects.filter(source__startswith="x = 1").exists()


def test_a_quota_reached_is_a_tool_error_naming_the_limit(engineer, make_token, fake_pipeline, silu_mini, settings):
    quotas = pytest.importorskip("accounts.quotas")  # per-person quotas (issue 36): the services enforce them
    settings.ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 1
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            first = payload(await client.call_tool("launch_run", {"problem": "silu:mini"}))
            refused = error_text(await client.call_tool("launch_run", {"problem": "silu:mini"}))
            return first, refused

    first, refused = drive(scenario)
    assert first["status"] == "queued"
    assert "over the limit of 1 per person" in refused and quotas.RUNS_IN_FLIGHT in refused
