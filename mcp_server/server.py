"""The MCP server: the tools of mcp_server/tools.py and three resources, on the official SDK's MCPServer.

One builder serves both transports. Over HTTP (mcp_server/http.py) the caller is the owner of the bearer
token, found on the request's ASGI scope; over stdio (`manage.py mcp`) it is the user the command was started
as. Every tools/call, malformed ones included, is recorded by `_record_calls` (mcp_server/records.py).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

from benchmark import services as benchmark
from mcp_server import tools
from mcp_server.models import Transport
from mcp_server.records import record_call

SCOPE_USER_KEY = "accelopt_user"  # where mcp_server/http.py puts the token's owner on the ASGI scope
COVERAGE_DOC = Path(settings.BASE_DIR) / "docs" / "nki-coverage.md"

INSTRUCTIONS = (
    "AccelOpt Studio: correctness, latency and where the time goes for NKI kernels on trn1/trn2 with no hardware, "
    "a curated memory of rewrites that worked, and a leaderboard. Loop: describe_problem -> evaluate_kernel -> read "
    "the verdict and breakdown (explain_kernel) -> search_memory for lessons on that bottleneck -> rewrite -> "
    "evaluate_kernel again. Propose what you learned with propose_lesson (curators review it). docs/agents.md."
)

# Each tool, with what an agent is told about it (its description in tools/list).
TOOLS: tuple[tuple[Callable[..., dict[str, Any]], str], ...] = (
    (tools.list_problems, "List the problems you may see (address, title, family, language, platforms, shapes). "
                          "Filter by suite (nkibench) and case (mini: seconds to evaluate, full: the published shape)."),
    (tools.describe_problem, "One problem by address (silu:mini) or id: its shapes, description, tolerance, "
                             "reference source, platforms, the baseline's latency per platform and the theoretical "
                             "peak (ms)."),
    (tools.evaluate_kernel, "Store and evaluate a kernel's source against a problem (address) or your own "
                            "reference_source, and wait for the result: verdict (correct, incorrect, compile_error, "
                            "...), latency_ms, peak_fraction, what bounds it, the time breakdown, and on failure the "
                            "error with its line."),
    (tools.explain_kernel, "Why a kernel's number is what it is: the breakdown (busy, idle and critical-path share per "
                           "engine), what bounds it, its bottleneck, its profile; on failure the rule it broke and "
                           "the line."),
    (tools.search_memory, "Lessons from the team's optimization memory, each with its slow and fast kernel: ranked for "
                          "a kernel (kernel_id: its calls and bottleneck) or a problem as the Planner's memory is, or "
                          "matching a text."),
    (tools.propose_lesson, "Propose a lesson (a slow -> fast rewrite and what it teaches). It goes to the curators' "
                           "review and reaches no one until a curator accepts it."),
    (tools.launch_run, "Queue an optimization run on a problem (from its baseline or start_kernel_id); follow it "
                       "with run_progress."),
    (tools.run_progress, "A run's status, best latency and speedup, and its events after seq `after`."),
    (tools.launch_campaign, "Queue a campaign: one run per problem (a suite's case, or a list of addresses)."),
    (tools.campaign_progress, "A campaign's status, headline (geomean speedup, fractions of peak), usage and rows."),
    (tools.leaderboard, "The leaderboard of a platform (trn1, trn2) and case (mini, full): per problem the best "
                        "simulated and measured kernel, latency, speedup over the baseline, author and run."),
    (tools.migrate_legacy_kernel, "Migrate a legacy-namespace (neuronxcc.nki) kernel to NKI 0.6 (the nki package), "
                                  "following AWS's migration guides: a new kernel (each change with its guide "
                                  "section), evaluated on the same reference; a construct that needs a person is "
                                  "refused with its line."),
    (tools.my_tool_calls, "Your recent MCP tool calls as the studio recorded them (an admin sees everyone's)."),
)


# Tools that change nothing: a client may run them without asking its user each time.
READ_ONLY = frozenset({tools.list_problems, tools.describe_problem, tools.explain_kernel, tools.search_memory,
                       tools.run_progress, tools.campaign_progress, tools.leaderboard, tools.my_tool_calls})


def _message(error: Exception) -> str:
    """The text the REST API would answer with (accelopt_site/api.py's handlers)."""
    if isinstance(error, ValidationError):
        return " ".join(error.messages)
    return str(error) or type(error).__name__


def _request_user(context: ServerRequestContext[Any, Any] | Any, stdio_user: Any) -> Any:
    request = getattr(context, "request", None)
    if request is not None:
        return request.scope.get(SCOPE_USER_KEY)
    return stdio_user


def _as_tool(fn: Callable[..., dict[str, Any]], stdio_user: Any) -> Callable[..., Any]:
    """An async tool with `fn`'s arguments (less `user`) plus the SDK's Context, so the SDK builds the same
    input schema; it runs `fn` in Django's sync thread as the caller and turns refusals into tool errors."""
    signature = inspect.signature(fn, eval_str=True)
    arguments = list(signature.parameters.values())[1:]  # the first is the user

    async def call(ctx: Context, **kwargs: Any) -> dict[str, Any]:
        user = _request_user(ctx.request_context, stdio_user)
        try:
            return await sync_to_async(fn)(user, **kwargs)
        except (Http404, PermissionDenied, ValidationError, ValueError) as error:
            raise ToolError(_message(error)) from error

    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    call.__signature__ = signature.replace(parameters=[*arguments, context])  # type: ignore[attr-defined]
    call.__annotations__ = {**{p.name: p.annotation for p in arguments}, "ctx": Context,
                            "return": signature.return_annotation}
    call.__name__ = call.__qualname__ = fn.__name__
    return call


def _result_error(result: HandlerResult) -> str | None:
    """The tool error text of a tools/call result, or None when it succeeded."""
    data = result.model_dump(by_alias=True) if isinstance(result, BaseModel) else (result or {})
    if not data.get("isError"):
        return None
    return " ".join(part.get("text", "") for part in data.get("content") or [] if isinstance(part, dict))


def _recorder(stdio_user: Any, transport: str) -> Callable[..., Any]:
    async def record_calls(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = dict(ctx.params or {})
        started = time.perf_counter()
        error: str | None = "the call did not complete"
        try:
            result = await call_next(ctx)
            error = _result_error(result)
            return result
        except MCPError as refused:  # malformed params, an unknown tool
            error = str(refused)
            raise
        finally:
            await sync_to_async(record_call)(
                _request_user(ctx, stdio_user), params.get("name", ""), params.get("arguments"),
                transport=transport, duration_ms=(time.perf_counter() - started) * 1000, ok=error is None,
                error=error or "",
            )

    return record_calls


def build_server(*, stdio_user: Any = None) -> MCPServer:
    """The studio's MCP server. `stdio_user`: the caller of a stdio server; None for the HTTP one, whose caller
    comes with each request."""
    transport = Transport.HTTP if stdio_user is None else Transport.STDIO
    server = MCPServer("accelopt-studio", instructions=INSTRUCTIONS, middleware=[_recorder(stdio_user, transport)])
    for fn, description in TOOLS:
        hints = ToolAnnotations(read_only_hint=True) if fn in READ_ONLY else ToolAnnotations(
            read_only_hint=False, destructive_hint=False)  # they add rows (kernels, runs, proposals), never remove
        server.add_tool(_as_tool(fn, stdio_user), name=fn.__name__, description=description, annotations=hints)

    def resource_user(ctx: Context) -> Any:
        return _request_user(ctx.request_context, stdio_user)

    async def read(getter: Callable[[], str]) -> str:
        try:
            return await sync_to_async(getter)()
        except (Http404, PermissionDenied, ValidationError, ValueError) as error:
            raise ResourceError(_message(error)) from error

    @server.resource("studio://nki/coverage", name="nki_coverage", mime_type="text/markdown",
                     description="Which NKI operations the simulator runs, with their rules and limits.")
    def nki_coverage() -> str:
        return COVERAGE_DOC.read_text(encoding="utf-8")

    @server.resource("studio://problems/{problem}/reference", name="problem_reference", mime_type="text/x-python",
                     description="A problem's reference source (by id, or an address such as silu:mini).")
    async def problem_reference(problem: str, ctx: Context) -> str:
        user = resource_user(ctx)
        return await read(lambda: benchmark.get_problem_by_reference(user, problem).reference_source)

    @server.resource("studio://kernels/{kernel_id}", name="kernel_source", mime_type="text/x-python",
                     description="A kernel's source, if you may see it.")
    async def kernel_source(kernel_id: str, ctx: Context) -> str:
        user = resource_user(ctx)
        if not kernel_id.isdigit():
            raise ResourceError(f"a kernel id is a number, not {kernel_id!r}")
        return await read(lambda: benchmark.get_kernel_for_user(user, int(kernel_id)).source)

    return server
