"""Deterministic stand-ins for the search's injected interfaces.

A fake kernel is a few `key=value` lines: `latency=<ms>` plus optional `broken=1` / `suspicious=1` and
a `lineage` line, so a test reads speedups straight from the sources.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.agents.base import (
    AgentResult,
    CallRecord,
    FixRequest,
    MemoryDraft,
    PlanRequest,
    SummaryRequest,
    WriteRequest,
)


def fake_kernel(latency: float, lineage: str = "start", **flags: int) -> str:
    lines = [f"latency={latency:.6f}", f"lineage={lineage}"] + [f"{k}={v}" for k, v in sorted(flags.items())]
    return "\n".join(lines) + "\n"


def read_kernel(source: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in source.splitlines() if "=" in line)


@dataclass
class FakeResult:
    correct: bool
    latency_ms: float | None
    peak_fraction: float | None = None
    error_kind: str | None = None
    error_message: str | None = None
    profile: dict[str, float] = field(default_factory=dict)


class FakeEvaluator:
    """Correct unless `broken=1`; `suspicious=1` is correct-looking but flagged; counts every source."""

    def __init__(self, crash_after: int | None = None, infrastructure_failures: int = 0) -> None:
        self.evaluated: list[str] = []
        self.crash_after = crash_after
        self.infrastructure_failures = infrastructure_failures  # the first N evaluations fail on our side

    async def evaluate_many(self, sources):
        results = []
        for source in sources:
            if self.crash_after is not None and len(self.evaluated) >= self.crash_after:
                raise SimulatedCrash(f"killed after {len(self.evaluated)} evaluations")
            self.evaluated.append(source)
            if len(self.evaluated) <= self.infrastructure_failures:
                results.append(FakeResult(False, None, error_kind="infrastructure_error",
                                          error_message="the sandbox child died"))
                continue
            k = read_kernel(source)
            latency = float(k["latency"])
            if k.get("broken"):
                results.append(FakeResult(False, None, error_kind="incorrect",
                                          error_message="relative L2 error 0.5 > 2e-05"))
            elif k.get("infra"):
                results.append(FakeResult(False, None, error_kind="infrastructure_error",
                                          error_message="the sandbox child died"))
            elif k.get("suspicious"):
                results.append(FakeResult(True, latency / 100, error_kind="suspicious",
                                          error_message="output copied from the reference"))
            else:
                results.append(FakeResult(True, latency, peak_fraction=1.0 / latency,
                                          profile={"hbm_read_bytes": 1000.0 * latency}))
        return results


class SimulatedCrash(BaseException):
    """Stands for the worker process dying: not an Exception, so nothing inside the search catches it."""


PLAN_EFFECTS = {"faster": 0.8, "slower": 1.5, "broken": 1.0, "suspicious": 1.0, "same": 1.0, "infra": 1.0}


class FakeAgents:
    """Plans come from `plans`; the Executor applies a plan's effect to the parent latency (sample s adds
    a tiny s-dependent change so samples differ); the Fixer repairs broken kernels."""

    label = "fake"

    def __init__(self, plans=("faster", "slower", "broken"), usage=(100, 50)) -> None:
        self.plans = list(plans)
        self.usage = usage
        self.requests: list[object] = []

    def _call(self, role: str, prompt: str) -> list[CallRecord]:
        return [CallRecord(role=role, model="fake-model", prompt=[{"role": "user", "content": prompt}],
                           response="ok", prompt_tokens=self.usage[0], completion_tokens=self.usage[1],
                           cost_usd=0.001)]

    async def plan(self, request: PlanRequest) -> AgentResult[list[str]]:
        self.requests.append(request)
        return AgentResult(self.plans[: request.count], self._call("planner", request.kernel.source))

    async def write(self, request: WriteRequest) -> AgentResult[str]:
        self.requests.append(request)
        parent = read_kernel(request.kernel.source)
        if request.plan == "garbage":
            return AgentResult(None, self._call("executor", request.plan), unusable="no code block")
        latency = float(parent["latency"]) * PLAN_EFFECTS[request.plan] * (1 + 0.01 * request.sample)
        flags = {request.plan: 1} if request.plan in ("broken", "suspicious", "infra") else {}
        source = fake_kernel(latency, f"{parent['lineage']}>{request.key}", **flags)
        return AgentResult(source, self._call("executor", request.plan))

    async def fix(self, request: FixRequest) -> AgentResult[str]:
        self.requests.append(request)
        k = read_kernel(request.failing_source)
        source = fake_kernel(float(k["latency"]) * 0.9, f"{k['lineage']}>fix{request.attempt}")
        return AgentResult(source, self._call("fixer", request.error_message))

    async def summarize(self, request: SummaryRequest) -> AgentResult[MemoryDraft]:
        self.requests.append(request)
        return AgentResult(MemoryDraft(title=f"{request.polarity} {request.plan}",
                                       summary=f"The plan {request.plan!r} changed latency by {request.speedup:.3f}x."),
                           self._call("summarizer", request.plan))
