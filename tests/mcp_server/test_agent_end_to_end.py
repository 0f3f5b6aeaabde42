"""A scripted coding agent (no LLM) drives the studio over MCP the way docs/agents.md tells a real one to: write a
kernel, evaluate it, read the breakdown, pull a lesson from the memory, apply it, evaluate again, and find the
faster, correct kernel at the top of the leaderboard. Everything runs for real: the sandboxed simulator and the
performance model on adamw's mini shape.

With ACCELOPT_MCP_TRANSCRIPT=<file> the exchange is written out as JSON, call by call (docs/agents.md shows it).
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from benchmark import services
from benchmark.models import Kernel, Problem
from memory import services as memory
from tests.mcp_server.conftest import drive, http_client, payload

FAST_IMPORT = "import neuronxcc.nki.isa as nisa"
SLOW_LINE = "            denom = nl.add(nl.sqrt(nl.multiply(v_new, v_scale)), EPSILON)"
FAST_LINE = "            denom = nl.add(nisa.activation(op=nl.sqrt, data=v_new, scale=v_scale), EPSILON)"


def apply_lesson(source: str, slow: str, fast: str) -> str | None:
    """The lesson's slow -> fast change, replayed on `source` line by line (None when its lines are not there):
    what a careful agent does with a slow/fast pair before it asks for anything cleverer."""
    slow_lines, fast_lines, ours = slow.splitlines(), fast.splitlines(), source.splitlines()
    opcodes = difflib.SequenceMatcher(a=slow_lines, b=fast_lines, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(opcodes):
        if tag == "equal":
            continue
        old = slow_lines[i1:i2] if i1 < i2 else slow_lines[i1 - 1:i1]  # an insertion goes after its anchor line
        at = next((n for n in range(len(ours)) if ours[n:n + len(old)] == old), None)
        if at is None:
            return None
        if i1 < i2:
            ours[at:at + len(old)] = fast_lines[j1:j2]
        else:
            ours[at + 1:at + 1] = fast_lines[j1:j2]
    return "\n".join(ours) + "\n"


def _elided(value: Any) -> Any:
    """The transcript without whole kernels in it: a kernel's source reads as its line count."""
    if isinstance(value, dict):
        return {k: f"<{len(v.splitlines())} lines>" if k in ("source", "slow_kernel", "fast_kernel") else _elided(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_elided(item) for item in value]
    return value


@dataclass
class ScriptedAgent:
    client: Any
    transcript: list[dict[str, Any]] = field(default_factory=list)

    async def call(self, tool: str, arguments: dict[str, Any], keep: tuple[str, ...]) -> dict[str, Any]:
        result = payload(await self.client.call_tool(tool, arguments))
        self.transcript.append({"tool": tool, "arguments": _elided(arguments),
                                "result": _elided({k: result.get(k) for k in keep})})
        return result

    async def optimize(self, problem: str, draft: str) -> dict[str, Any]:
        described = await self.call("describe_problem", {"problem": problem},
                                    ("shapes", "baselines", "theoretical_peak_ms"))
        first = await self.call("evaluate_kernel", {"source": draft, "problem": problem},
                                ("kernel_id", "verdict", "latency_ms", "peak_fraction", "bound"))
        explained = await self.call("explain_kernel", {"kernel_id": first["kernel_id"]},
                                    ("verdict", "bound", "explanation", "bottleneck", "breakdown"))
        lessons = await self.call("search_memory", {"kernel_id": first["kernel_id"]}, ("ranked_by", "lessons"))
        for lesson in lessons["lessons"]:
            rewritten = apply_lesson(draft, lesson["slow_kernel"], lesson["fast_kernel"])
            if lesson["polarity"] == "positive" and rewritten is not None:
                break
        else:
            raise AssertionError("no lesson in the memory applies to the draft")
        self.transcript.append({"agent": f"applies lesson {lesson['id']}: {lesson['title']}"})
        second = await self.call("evaluate_kernel", {"source": rewritten, "problem": problem},
                                 ("kernel_id", "verdict", "latency_ms", "peak_fraction", "bound"))
        board = await self.call("leaderboard", {"platform": "trn1", "case": "mini", "problem": problem}, ("rows",))
        return {"described": described, "first": first, "explained": explained, "lesson": lesson,
                "second": second, "board": board}


def test_a_scripted_agent_gets_a_faster_correct_kernel_onto_the_board(engineer, curator, make_token,
                                                                     inline_evaluations, nkibench):
    problem = Problem.objects.get(suite="nkibench", slug="adamw", case="mini")
    baseline = problem.baseline_kernel.source
    services.request_evaluation(problem.baseline_kernel, "trn1")  # the site evaluates baselines in the background
    # What the team learned before: the sqrt's scale folded into one Scalar Engine activation (a curator's entry).
    fast = baseline.replace("import neuronxcc.nki.language as nl\n", f"import neuronxcc.nki.language as nl\n{FAST_IMPORT}\n")
    fast = fast.replace(SLOW_LINE, FAST_LINE)
    assert fast.count(FAST_LINE) == 1
    lesson = memory.add_entry(title="Fold a scale into the activation that follows it",
                              summary="nl.sqrt(nl.multiply(x, s)) is two instructions; nisa.activation(op=nl.sqrt, "
                                      "data=x, scale=s) is one Scalar Engine pass.",
                              slow_kernel=baseline, fast_kernel=fast, speedup=1.06, problem=problem, user=curator)
    draft = f"# adamw, first draft by a scripted agent\n{baseline}"
    token = make_token(engineer)

    async def scenario():
        async with http_client(token) as client:
            agent = ScriptedAgent(client)
            return agent, await agent.optimize("adamw:mini", draft)

    agent, seen = drive(scenario)
    if os.environ.get("ACCELOPT_MCP_TRANSCRIPT"):
        with open(os.environ["ACCELOPT_MCP_TRANSCRIPT"], "w") as handle:
            json.dump(agent.transcript, handle, indent=1)

    first, second = seen["first"], seen["second"]
    assert first["verdict"] == "correct" and second["verdict"] == "correct"
    assert seen["explained"]["breakdown"].startswith("Where the time goes")
    assert seen["lesson"]["id"] == lesson.pk
    assert second["latency_ms"] < first["latency_ms"]  # the lesson held on this kernel
    new_kernel = Kernel.objects.get(pk=second["kernel_id"])
    assert new_kernel.author == engineer and FAST_LINE in new_kernel.source
    (row,) = seen["board"]["rows"]
    assert row["simulated"]["kernel_id"] == new_kernel.pk  # the top of the board is the agent's kernel
    assert row["simulated"]["speedup"] > 1.0 and row["simulated"]["author"] == engineer.get_username()
