"""The AccelOpt beam search, written against injected interfaces. Pure Python: no Django, no network.

One run optimizes one kernel for one problem. Per iteration:

    plan      for each kernel in the beam, the Planner proposes up to N plans (given memory + profile)
    write     for each plan, the Executor writes K kernels
    evaluate  every new kernel is evaluated (many at once; a kernel already evaluated is never re-run)
    fix       a kernel that failed (not "suspicious") goes to the Fixer, up to `fix_attempts` times,
              and is evaluated again
    select    the fastest correct kernels (old beam included) become the next beam; rewrite selection
              keeps the largest speedups (positive) and the worst slowdowns (negative)
    summarize each selected rewrite becomes a memory entry (Summarizer), added to the Memory

Injected (all async, so a Django layer can wrap its ORM with `sync_to_async`):

* `Agents` (planner, executor, fixer, summarizer; see `optimizer.agents.base` for the request records),
* `Evaluator.evaluate_many(sources) -> results` bound to the run's problem, platform and backend; each
  result has `correct`, `latency_ms`, `peak_fraction`, `error_kind`, `error_message`, `profile` (the shape
  of `benchmark.evaluation.EvaluationResult`); an `error_kind` of "suspicious" keeps a kernel out of the
  beam and out of the memory whatever its latency, and an optional `review_accepted` (a curator accepted
  the result) exempts it from the `suspicious_speedup` bound,
* `Memory.select(problem, k)` (the bounded Planner context) and `Memory.add(item)`, which must be
  idempotent on `item.key` (a step interrupted after `add` is redone on resume),
* `EventSink.emit(kind, payload)` with kinds in `EVENT_KINDS`; `agent.call` carries a `CallRecord` dict
  for the `AgentCall` table, and `llm.error` is emitted for each failed call,
* `CheckpointStore.load() / save(state_dict)`: `step()` saves the whole `RunState` (JSON-ready dict)
  after every unit of work, so a run killed at any point resumes from its last save and redoes at most
  that one unit. Evaluations are stored by kernel sha256 inside the state: nothing evaluated and saved is
  evaluated again.

Driving a run: `search = await BeamSearch.open(...)`, then `while await search.step(): ...` (the worker
checks cancel/pause between steps), or `await search.run()`. One step is one chunk of at most
`agent_batch` agent calls or `evaluation_batch` evaluations, run concurrently, or one bookkeeping
transition (selection, iteration end). Work items have deterministic keys ("<iteration>.<beam>.<plan>.
<sample>") and are processed in key order, and each agent request carries a seed derived from the run
seed and its key, so the same seed and the same agent answers give the same run, whatever the batch
sizes and wherever it was interrupted. Events of an interrupted step may be emitted twice (at least once);
each payload names its item key so a consumer can tell.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
from collections.abc import Awaitable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from optimizer.agents.base import (
    NEGATIVE,
    POSITIVE,
    AgentResult,
    CallRecord,
    FixRequest,
    KernelView,
    MemoryDraft,
    MemoryItem,
    PlanRequest,
    ProblemContext,
    SummaryRequest,
    WriteRequest,
)

SUSPICIOUS = "suspicious"
INFRASTRUCTURE = "infrastructure_error"  # says nothing about the kernel: never sent to the Fixer
INFRASTRUCTURE_RETRIES = 2  # evaluations of one kernel that fail for infrastructure reasons and are redone
STATE_VERSION = 1

EVENT_KINDS = (
    "run.started",
    "iteration.started",
    "plan.proposed",
    "candidate.written",
    "candidate.evaluated",
    "beam.selected",
    "memory.added",
    "iteration.finished",
    "run.finished",
    "run.failed",
    "llm.error",
    "agent.call",
    "agent.unusable",
)

# Run status values (the Django Run adds queued/paused/cancelled around these).
RUNNING, SUCCEEDED, FAILED = "running", "succeeded", "failed"


# ---------------------------------------------------------------------------------------------------
# Configuration


@dataclass(frozen=True)
class SearchConfig:
    """Search parameters. Defaults follow the public AccelOpt NKIBench experiment scripts."""

    iterations: int = 15
    beam_width: int = 6  # kernels kept per iteration (AccelOpt TOPK_CANDIDATES)
    plans_per_candidate: int = 12  # Planner breadth per beam kernel
    samples_per_plan: int = 2  # Executor samples per plan
    memory_size: int = 16  # entries shown to the Planner
    rewrites_per_iteration: int = 8  # memory entries written per iteration (at most half positive)
    positive_speedup: float = 1.04  # a positive rewrite must be faster than this
    negative_slowdown: float = 1.15  # a negative rewrite must be slower than this (speedup < 1/x)
    suspicious_speedup: float = 10.0  # a correct kernel this much faster than its parent is held for review
    fix_attempts: int = 1  # Fixer rounds per failing kernel (0 disables the Fixer)
    seed: int = 0
    agent_batch: int = 8  # agent calls started together in one step (execution only, not semantics)
    evaluation_batch: int = 8  # evaluations started together in one step (execution only)

    def __post_init__(self) -> None:
        for name in ("iterations", "beam_width", "plans_per_candidate", "samples_per_plan",
                     "agent_batch", "evaluation_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"SearchConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("memory_size", "rewrites_per_iteration", "fix_attempts"):
            if getattr(self, name) < 0:
                raise ValueError(f"SearchConfig.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("positive_speedup", "negative_slowdown", "suspicious_speedup"):
            if getattr(self, name) < 1.0:
                raise ValueError(f"SearchConfig.{name} must be >= 1.0, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, strict: bool = True) -> SearchConfig:
        """`strict=False` ignores keys that are not search parameters (a Run's config also names the
        platform, backend and models)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown and strict:
            raise ValueError(f"unknown search parameters {unknown}; known: {sorted(known)}")
        return cls(**{k: v for k, v in data.items() if k in known})


# ---------------------------------------------------------------------------------------------------
# Injected interfaces


@runtime_checkable
class EvaluationLike(Protocol):
    correct: bool
    latency_ms: float | None
    peak_fraction: float | None
    error_kind: str | None
    error_message: str | None
    profile: Any


class Evaluator(Protocol):
    async def evaluate_many(self, sources: Sequence[str]) -> Sequence[EvaluationLike]:
        """Evaluate every source (concurrently if it can); one result per source, in order."""
        ...


class Agents(Protocol):
    label: str  # shown in the UI: e.g. "offline: search over known rewrites" or "llm: <models>"

    async def plan(self, request: PlanRequest) -> AgentResult[list[str]]: ...

    async def write(self, request: WriteRequest) -> AgentResult[str]: ...

    async def fix(self, request: FixRequest) -> AgentResult[str]: ...

    async def summarize(self, request: SummaryRequest) -> AgentResult[MemoryDraft]: ...


class Memory(Protocol):
    async def select(self, problem: ProblemContext, k: int) -> Sequence[MemoryItem]: ...

    async def add(self, item: MemoryItem) -> None:
        """Store `item`; adding a key that is already stored must not create a second entry."""
        ...


class EventSink(Protocol):
    async def emit(self, kind: str, payload: dict[str, Any]) -> None: ...


class CheckpointStore(Protocol):
    async def load(self) -> dict[str, Any] | None: ...

    async def save(self, state: dict[str, Any]) -> None: ...


# ---------------------------------------------------------------------------------------------------
# State (everything a resumed run needs; JSON-ready through to_dict/from_dict)


@dataclass
class Evaluation:
    """The part of an evaluation result the search keeps (by kernel sha256)."""

    correct: bool
    latency_ms: float | None = None
    peak_fraction: float | None = None
    error_kind: str | None = None
    error_message: str | None = None
    profile: dict[str, float] = field(default_factory=dict)
    accepted: bool = False  # a curator accepted this result on review: the speedup bound no longer holds it

    @property
    def suspicious(self) -> bool:
        return self.error_kind == SUSPICIOUS

    @property
    def usable(self) -> bool:
        """Correct, timed and not suspicious: may enter the beam."""
        return self.correct and not self.suspicious and self.latency_ms is not None and self.latency_ms > 0

    @classmethod
    def from_result(cls, result: EvaluationLike) -> Evaluation:
        profile = getattr(result, "profile", None) or {}
        if not isinstance(profile, dict):  # a typed profile record: keep its fields
            profile = asdict(profile) if hasattr(profile, "__dataclass_fields__") else dict(vars(profile))
        numeric = {k: float(v) for k, v in profile.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        kind = getattr(result, "error_kind", None)
        return cls(
            correct=bool(result.correct),
            latency_ms=None if result.latency_ms is None else float(result.latency_ms),
            peak_fraction=None if getattr(result, "peak_fraction", None) is None else float(result.peak_fraction),
            error_kind=str(getattr(kind, "value", kind)) if kind else None,  # an ErrorKind enum becomes its code
            error_message=getattr(result, "error_message", None) or None,
            profile=numeric,
            accepted=bool(getattr(result, "review_accepted", False)),
        )


@dataclass
class BeamMember:
    sha: str
    latency_ms: float
    origin: str  # "start" or the key of the candidate that produced it


@dataclass
class PlanRecord:
    key: str  # "<iteration>.<beam index>.<plan index>"
    parent_sha: str
    text: str


@dataclass
class CandidateRecord:
    key: str  # "<plan key>.<sample>"
    plan_key: str
    parent_sha: str
    attempts: list[str] = field(default_factory=list)  # sha of the written source, then each fix
    unusable: str = ""  # why the Executor produced nothing
    fixes: int = 0  # Fixer calls made (successful or not)
    speedup: float | None = None  # parent latency / own latency, when correct
    chosen: bool = False  # entered the next beam

    @property
    def sha(self) -> str | None:
        return self.attempts[-1] if self.attempts else None


@dataclass
class RewriteRecord:
    candidate_key: str
    polarity: str
    speedup: float  # candidate speedup over its parent (< 1 for negative rewrites)
    slow_sha: str
    fast_sha: str


@dataclass
class Totals:
    calls: int = 0
    failed_calls: int = 0
    unusable_replies: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    evaluations: int = 0


@dataclass
class RunState:
    config: SearchConfig
    start_sha: str
    kernels: dict[str, str]  # sha256 -> source
    run_key: str = ""  # names the run in memory keys and provenance (the Django Run id)
    status: str = RUNNING
    phase: str = "start"  # start, plan, write, evaluate, fix, select, summarize, next
    iteration: int = 0  # 0 until the first iteration starts
    beam: list[BeamMember] = field(default_factory=list)
    evaluations: dict[str, Evaluation] = field(default_factory=dict)
    plans: list[PlanRecord] = field(default_factory=list)  # current iteration only
    candidates: list[CandidateRecord] = field(default_factory=list)  # current iteration only
    rewrites: list[RewriteRecord] = field(default_factory=list)  # current iteration only
    done: list[str] = field(default_factory=list)  # finished task keys of the current iteration
    history: list[dict[str, Any]] = field(default_factory=list)  # one summary per finished iteration
    totals: Totals = field(default_factory=Totals)
    infrastructure_retries: dict[str, int] = field(default_factory=dict)  # sha -> evaluations redone
    error: str = ""

    # -- derived --------------------------------------------------------------------------------------
    @property
    def start_latency_ms(self) -> float | None:
        ev = self.evaluations.get(self.start_sha)
        return ev.latency_ms if ev else None

    @property
    def best(self) -> BeamMember | None:
        return min(self.beam, key=lambda m: m.latency_ms) if self.beam else None

    @property
    def best_speedup(self) -> float | None:
        best, start = self.best, self.start_latency_ms
        return start / best.latency_ms if best and start else None

    @property
    def finished(self) -> bool:
        return self.status in (SUCCEEDED, FAILED)

    # -- serialization --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["version"] = STATE_VERSION
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"run state version {data.get('version')!r} is not {STATE_VERSION}")
        return cls(
            config=SearchConfig.from_dict(data["config"]),
            start_sha=data["start_sha"],
            kernels=dict(data["kernels"]),
            run_key=data.get("run_key", ""),
            status=data["status"],
            phase=data["phase"],
            iteration=data["iteration"],
            beam=[BeamMember(**m) for m in data["beam"]],
            evaluations={k: Evaluation(**v) for k, v in data["evaluations"].items()},
            plans=[PlanRecord(**p) for p in data["plans"]],
            candidates=[CandidateRecord(**c) for c in data["candidates"]],
            rewrites=[RewriteRecord(**r) for r in data["rewrites"]],
            done=list(data["done"]),
            history=list(data["history"]),
            totals=Totals(**data["totals"]),
            infrastructure_retries=dict(data.get("infrastructure_retries", {})),
            error=data.get("error", ""),
        )


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def derive_seed(run_seed: int, key: str) -> int:
    """A per-task seed that depends only on the run seed and the task key (not on execution order)."""
    digest = hashlib.sha256(f"{run_seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


# ---------------------------------------------------------------------------------------------------
# The search


class BeamSearch:
    def __init__(
        self,
        *,
        state: RunState,
        problem: ProblemContext,
        agents: Agents,
        evaluator: Evaluator,
        memory: Memory,
        events: EventSink,
        store: CheckpointStore,
    ) -> None:
        self.state = state
        self.problem = problem
        self.agents = agents
        self.evaluator = evaluator
        self.memory = memory
        self.events = events
        self.store = store

    @classmethod
    async def open(
        cls,
        *,
        problem: ProblemContext,
        start_source: str,
        config: SearchConfig,
        agents: Agents,
        evaluator: Evaluator,
        memory: Memory,
        events: EventSink,
        store: CheckpointStore,
        run_key: str = "",
    ) -> BeamSearch:
        """Resume the run saved in `store`, or start a new one from `start_source` and `config`.

        `run_key` names the run inside memory-entry keys (give the Django Run id); by default it is
        derived from the starting kernel and the seed."""
        saved = await store.load()
        if saved is not None:
            state = RunState.from_dict(saved)
        else:
            sha = source_sha(start_source)
            state = RunState(config=config, start_sha=sha, kernels={sha: start_source},
                             run_key=run_key or f"{sha[:12]}-seed{config.seed}")
        return cls(state=state, problem=problem, agents=agents, evaluator=evaluator, memory=memory,
                   events=events, store=store)

    @property
    def config(self) -> SearchConfig:
        return self.state.config

    async def run(self) -> RunState:
        while await self.step():
            pass
        return self.state

    async def step(self) -> bool:
        """Do one unit of work and checkpoint it. Returns False once the run has finished."""
        if self.state.finished:
            return False
        self._pending_events: list[tuple[str, dict[str, Any]]] = []
        try:
            handler = getattr(self, f"_step_{self.state.phase}")
            await handler()
        except Exception as exc:  # an evaluator or memory failure ends the run, with the reason
            self.state.status = FAILED
            self.state.error = f"{type(exc).__name__} during {self.state.phase} of iteration {self.state.iteration}: {exc}"
            self._event("run.failed", {"error": self.state.error, "phase": self.state.phase})
        # Events go out before the checkpoint: an interrupted step repeats events rather than losing them.
        for kind, payload in self._pending_events:
            await self.events.emit(kind, payload)
        await self.store.save(self.state.to_dict())
        return True

    # -- phases -----------------------------------------------------------------------------------------
    async def _step_start(self) -> None:
        st = self.state
        if st.start_sha not in st.evaluations:
            self._event("run.started", {"config": self.config.to_dict(), "agents": self.agents.label,
                                        "start_sha": st.start_sha})
            await self._evaluate([st.start_sha], candidate_of={})
            return
        ev = st.evaluations[st.start_sha]
        if not ev.usable:
            st.status = FAILED
            st.error = (f"the starting kernel cannot be optimized: it is not a correct, timed kernel "
                        f"({ev.error_kind or 'incorrect'}: {ev.error_message or 'no latency'})")
            self._event("run.failed", {"error": st.error, "phase": "start"})
            return
        st.beam = [BeamMember(sha=st.start_sha, latency_ms=float(ev.latency_ms or 0.0), origin="start")]
        self._start_iteration(1)

    def _start_iteration(self, iteration: int) -> None:
        st = self.state
        st.iteration, st.phase = iteration, "plan"
        st.plans, st.candidates, st.rewrites, st.done = [], [], [], []
        # Sources of kernels that left the beam are not needed again (their evaluations stay, by sha, so a
        # kernel that is written again is still not re-evaluated); this keeps each checkpoint small.
        keep = {st.start_sha} | {m.sha for m in st.beam}
        st.kernels = {sha: src for sha, src in st.kernels.items() if sha in keep}
        self._event("iteration.started", {"iteration": iteration, "beam": [asdict(m) for m in st.beam]})

    async def _step_plan(self) -> None:
        st = self.state
        pending = [(i, m) for i, m in enumerate(st.beam) if f"plan:{st.iteration}.{i}" not in st.done]
        if not pending:
            st.phase = "write"
            return
        memory = tuple(await self.memory.select(self.problem, self.config.memory_size))
        chunk = pending[: self.config.agent_batch]
        requests = []
        for index, member in chunk:
            key = f"{st.iteration}.{index}"
            requests.append(PlanRequest(problem=self.problem, kernel=self._view(member.sha), memory=memory,
                                        count=self.config.plans_per_candidate,
                                        seed=derive_seed(self.config.seed, f"plan:{key}"), key=key))
        results = await self._call_all("planner", [self.agents.plan(r) for r in requests], requests)
        for (_, member), request, result in zip(chunk, requests, results, strict=True):
            plans = [p for p in (result.value or []) if p.strip()][: self.config.plans_per_candidate]
            for p_index, text in enumerate(plans):
                record = PlanRecord(key=f"{request.key}.{p_index}", parent_sha=member.sha, text=text)
                st.plans.append(record)
                self._event("plan.proposed", {"iteration": st.iteration, "plan_key": record.key,
                                              "parent_sha": member.sha, "plan": text})
            st.done.append(f"plan:{request.key}")

    async def _step_write(self) -> None:
        st = self.state
        existing = {c.key for c in st.candidates}
        pending = [(plan, s) for plan in st.plans for s in range(self.config.samples_per_plan)
                   if f"{plan.key}.{s}" not in existing]
        if not pending:
            st.phase = "evaluate"
            return
        chunk = pending[: self.config.agent_batch]
        memory = tuple(await self.memory.select(self.problem, self.config.memory_size))
        requests = [WriteRequest(problem=self.problem, kernel=self._view(plan.parent_sha), plan=plan.text,
                                 memory=memory, sample=s, key=f"{plan.key}.{s}",
                                 seed=derive_seed(self.config.seed, f"write:{plan.key}.{s}"))
                    for plan, s in chunk]
        results = await self._call_all("executor", [self.agents.write(r) for r in requests], requests)
        for (plan, _), request, result in zip(chunk, requests, results, strict=True):
            candidate = CandidateRecord(key=request.key, plan_key=plan.key, parent_sha=plan.parent_sha)
            if result.value is not None:
                candidate.attempts.append(self._remember(result.value))
            else:
                candidate.unusable = result.unusable or "no kernel in the reply"
            st.candidates.append(candidate)
            self._event("candidate.written", {"iteration": st.iteration, "candidate_key": candidate.key,
                                              "plan_key": plan.key, "parent_sha": plan.parent_sha,
                                              "sha": candidate.sha, "source": result.value,
                                              "unusable": candidate.unusable})

    async def _step_evaluate(self) -> None:
        st = self.state
        shas: list[str] = []
        candidate_of: dict[str, list[CandidateRecord]] = {}
        for c in st.candidates:
            if c.sha and c.sha not in st.evaluations:
                if c.sha not in candidate_of:
                    shas.append(c.sha)
                candidate_of.setdefault(c.sha, []).append(c)
        if not shas:
            st.phase = "fix" if self.config.fix_attempts else "select"
            return
        await self._evaluate(shas[: self.config.evaluation_batch], candidate_of)

    async def _step_fix(self) -> None:
        st = self.state
        pending = [c for c in st.candidates if self._needs_fix(c)]
        if not pending:
            # Fixed sources still waiting for evaluation go back to evaluate; otherwise on to selection.
            waiting = any(c.sha and c.sha not in st.evaluations for c in st.candidates)
            st.phase = "evaluate" if waiting else "select"
            return
        chunk = pending[: self.config.agent_batch]
        plans = {p.key: p for p in st.plans}
        requests = []
        for c in chunk:
            ev = st.evaluations[c.sha or ""]
            key = f"{c.key}#fix{c.fixes + 1}"
            requests.append(FixRequest(problem=self.problem, kernel=self._view(c.parent_sha),
                                       plan=plans[c.plan_key].text, failing_source=st.kernels[c.sha or ""],
                                       error_kind=ev.error_kind or "incorrect",
                                       error_message=ev.error_message or "the output does not match the reference",
                                       attempt=c.fixes + 1, seed=derive_seed(self.config.seed, f"fix:{key}"),
                                       key=key))
        results = await self._call_all("fixer", [self.agents.fix(r) for r in requests], requests)
        for c, result in zip(chunk, results, strict=True):
            c.fixes += 1
            if result.value is not None:
                c.attempts.append(self._remember(result.value))
                self._event("candidate.written", {"iteration": st.iteration, "candidate_key": c.key,
                                                  "plan_key": c.plan_key, "parent_sha": c.parent_sha,
                                                  "sha": c.sha, "source": result.value, "fix": c.fixes,
                                                  "unusable": ""})
        if not any(self._needs_fix(c) for c in st.candidates):
            st.phase = "evaluate"

    def _needs_fix(self, c: CandidateRecord) -> bool:
        if not c.sha or c.fixes >= self.config.fix_attempts or len(c.attempts) != c.fixes + 1:
            return False  # nothing written, out of attempts, or the last fix produced nothing
        ev = self.state.evaluations.get(c.sha)
        return ev is not None and not ev.correct and not ev.suspicious and ev.error_kind != INFRASTRUCTURE

    async def _step_select(self) -> None:
        st = self.state
        parents = {m.sha: m for m in st.beam}
        for c in st.candidates:
            ev = st.evaluations.get(c.sha or "")
            if ev is not None and ev.usable:
                c.speedup = parents[c.parent_sha].latency_ms / float(ev.latency_ms or 0.0)
        # Next beam: the fastest distinct correct kernels among the old beam and the new candidates.
        pool: dict[str, BeamMember] = {m.sha: m for m in st.beam}
        for c in st.candidates:
            if c.speedup is not None and c.sha not in pool:
                pool[c.sha or ""] = BeamMember(sha=c.sha or "", latency_ms=float(st.evaluations[c.sha or ""].latency_ms or 0.0),
                                               origin=c.key)
        order = {sha: i for i, sha in enumerate(pool)}
        st.beam = sorted(pool.values(), key=lambda m: (m.latency_ms, order[m.sha]))[: self.config.beam_width]
        chosen = {m.sha for m in st.beam}
        for c in st.candidates:
            c.chosen = c.speedup is not None and c.sha in chosen and any(m.origin == c.key for m in st.beam)
        st.rewrites = self._select_rewrites()
        self._event("beam.selected", {
            "iteration": st.iteration,
            "beam": [asdict(m) for m in st.beam],
            "best_latency_ms": st.best.latency_ms if st.best else None,
            "best_speedup": st.best_speedup,
            "rewrites": [asdict(r) for r in st.rewrites],
        })
        st.phase = "summarize"

    def _select_rewrites(self) -> list[RewriteRecord]:
        """Per plan, its best sample if any sped up, else its worst; then the top speedups (at most half of
        the budget) and the worst slowdowns past their thresholds."""
        cfg, st = self.config, self.state
        by_plan: dict[str, list[CandidateRecord]] = {}
        for c in st.candidates:
            if c.speedup is not None:
                by_plan.setdefault(c.plan_key, []).append(c)
        representatives = []
        for group in by_plan.values():
            best = max(group, key=lambda c: (c.speedup or 0.0, _neg_key(c.key)))
            worst = min(group, key=lambda c: (c.speedup or 0.0, c.key))
            representatives.append(best if (best.speedup or 0.0) > 1.0 else worst)
        positives = sorted((c for c in representatives if (c.speedup or 0.0) > cfg.positive_speedup),
                           key=lambda c: (-(c.speedup or 0.0), c.key))[: cfg.rewrites_per_iteration // 2]
        negatives = sorted((c for c in representatives if (c.speedup or 0.0) < 1.0 / cfg.negative_slowdown),
                           key=lambda c: (c.speedup or 0.0, c.key))[: cfg.rewrites_per_iteration - len(positives)]
        rewrites = []
        for c in positives:
            rewrites.append(RewriteRecord(c.key, POSITIVE, c.speedup or 0.0, slow_sha=c.parent_sha, fast_sha=c.sha or ""))
        for c in negatives:
            rewrites.append(RewriteRecord(c.key, NEGATIVE, c.speedup or 0.0, slow_sha=c.sha or "", fast_sha=c.parent_sha))
        return rewrites

    async def _step_summarize(self) -> None:
        st = self.state
        pending = [r for r in st.rewrites if f"summarize:{r.candidate_key}" not in st.done]
        if not pending:
            st.phase = "next"
            return
        chunk = pending[: self.config.agent_batch]
        plans = {p.key: p for p in st.plans}
        plan_of = {c.key: plans[c.plan_key].text for c in st.candidates}
        requests = [SummaryRequest(problem=self.problem, slow_source=st.kernels[r.slow_sha],
                                   fast_source=st.kernels[r.fast_sha], speedup=_ratio(r.speedup),
                                   polarity=r.polarity, plan=plan_of[r.candidate_key], key=r.candidate_key,
                                   seed=derive_seed(self.config.seed, f"summarize:{r.candidate_key}"))
                    for r in chunk]
        results = await self._call_all("summarizer", [self.agents.summarize(r) for r in requests], requests)
        for rewrite, request, result in zip(chunk, requests, results, strict=True):
            if result.value is not None:
                item = MemoryItem(
                    key=f"{st.run_key}:{rewrite.candidate_key}",
                    title=result.value.title, summary=result.value.summary, polarity=rewrite.polarity,
                    speedup=request.speedup, slow_kernel=request.slow_source, fast_kernel=request.fast_source,
                    problem=self.problem.slug, family=self.problem.family,
                    provenance={"run": st.run_key, "candidate": rewrite.candidate_key, "iteration": st.iteration,
                                "speedup_over_parent": rewrite.speedup, "agents": self.agents.label},
                )
                await self.memory.add(item)
                self._event("memory.added", {"iteration": st.iteration, "candidate_key": rewrite.candidate_key,
                                             "key": item.key, "title": item.title, "polarity": item.polarity,
                                             "speedup": item.speedup})
            st.done.append(f"summarize:{rewrite.candidate_key}")

    async def _step_next(self) -> None:
        st = self.state
        evaluated = [c for c in st.candidates if c.sha and c.sha in st.evaluations]
        summary = {
            "iteration": st.iteration,
            "plans": len(st.plans),
            "candidates": len(st.candidates),
            "correct": sum(1 for c in st.candidates if c.speedup is not None),
            "evaluated": len(evaluated),
            "unusable": sum(1 for c in st.candidates if c.unusable),
            "fixes": sum(c.fixes for c in st.candidates),
            "rewrites": len(st.rewrites),
            "best_latency_ms": st.best.latency_ms if st.best else None,
            "best_speedup": st.best_speedup,
            "best_sha": st.best.sha if st.best else None,
        }
        st.history.append(summary)
        self._event("iteration.finished", summary)
        if st.iteration >= self.config.iterations:
            st.status, st.phase = SUCCEEDED, "finished"
            best = st.best
            self._event("run.finished", {
                "best_sha": best.sha if best else None,
                "best_latency_ms": best.latency_ms if best else None,
                "best_speedup": st.best_speedup,
                "best_peak_fraction": st.evaluations[best.sha].peak_fraction if best else None,
                "totals": asdict(st.totals),
            })
        else:
            self._start_iteration(st.iteration + 1)

    # -- helpers ----------------------------------------------------------------------------------------
    async def _evaluate(self, shas: list[str], candidate_of: dict[str, list[CandidateRecord]]) -> None:
        st = self.state
        results = await self.evaluator.evaluate_many([st.kernels[s] for s in shas])
        if len(results) != len(shas):
            raise RuntimeError(f"evaluator returned {len(results)} results for {len(shas)} kernels")
        for sha, result in zip(shas, results, strict=True):
            ev = Evaluation.from_result(result)
            st.totals.evaluations += 1
            keys = [c.key for c in candidate_of.get(sha, [])]
            retries = st.infrastructure_retries.get(sha, 0)
            if ev.error_kind == INFRASTRUCTURE and retries < INFRASTRUCTURE_RETRIES:
                # Our fault, not the kernel's: leave it unevaluated so the next step tries again.
                st.infrastructure_retries[sha] = retries + 1
                self._event("candidate.evaluated", {"iteration": st.iteration, "sha": sha, "candidate_keys": keys,
                                                    "correct": False, "error_kind": ev.error_kind,
                                                    "error_message": ev.error_message, "retrying": True})
                continue
            held = self._held_for_review(ev, candidate_of.get(sha, []))
            if held:
                ev = Evaluation(correct=ev.correct, latency_ms=ev.latency_ms, peak_fraction=ev.peak_fraction,
                                error_kind=SUSPICIOUS, error_message=held, profile=ev.profile)
            st.evaluations[sha] = ev
            self._event("candidate.evaluated", {"held_for_review": bool(held),
                "iteration": st.iteration, "sha": sha, "candidate_keys": keys, "correct": ev.correct,
                "latency_ms": ev.latency_ms, "peak_fraction": ev.peak_fraction, "error_kind": ev.error_kind,
                "error_message": ev.error_message, "profile": ev.profile,
            })

    def _held_for_review(self, ev: Evaluation, candidates: list[CandidateRecord]) -> str:
        """Why a correct kernel is held for review (a speedup over its parent above the bound), or ''."""
        if not ev.usable or ev.accepted:
            return ""
        parents = {m.sha: m.latency_ms for m in self.state.beam}
        bound = self.config.suspicious_speedup
        for c in candidates:
            parent_ms = parents.get(c.parent_sha)
            if parent_ms and parent_ms / float(ev.latency_ms or 0.0) > bound:
                return (f"held for review: speedup {parent_ms / float(ev.latency_ms or 0.0):.2f}x over its parent "
                        f"{c.parent_sha[:12]} exceeds suspicious_speedup={bound}")
        return ""

    async def _call_all(self, role: str, calls: list[Awaitable[AgentResult[Any]]], requests: Sequence[Any]) -> list[AgentResult[Any]]:
        """Run agent calls concurrently; an agent that raises counts as an unusable reply, never a crash."""
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        results: list[AgentResult[Any]] = []
        for request, outcome in zip(requests, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    raise outcome  # cancellation, KeyboardInterrupt: not the agent's fault
                outcome = AgentResult(None, unusable=f"{role} raised {type(outcome).__name__}: {outcome}")
            self._account(role, request.key, outcome)
            results.append(outcome)
        return results

    def _account(self, role: str, key: str, result: AgentResult[Any]) -> None:
        totals = self.state.totals
        for call in result.calls:
            totals.calls += 1
            totals.prompt_tokens += call.prompt_tokens
            totals.completion_tokens += call.completion_tokens
            totals.cost_usd += call.cost_usd
            context = {"iteration": self.state.iteration, "task_key": key}
            self._event("agent.call", {**context, "call": _call_dict(call)})
            if call.error:
                totals.failed_calls += 1
                self._event("llm.error", {**context, "role": call.role, "model": call.model,
                                          "error": call.error, "attempts": call.attempts})
        if result.value is None:
            totals.unusable_replies += 1
            self._event("agent.unusable", {"iteration": self.state.iteration, "task_key": key, "role": role,
                                           "reason": result.unusable})

    def _view(self, sha: str) -> KernelView:
        ev = self.state.evaluations.get(sha)
        return KernelView(source=self.state.kernels[sha], latency_ms=ev.latency_ms if ev else None,
                          peak_fraction=ev.peak_fraction if ev else None,
                          profile=dict(ev.profile) if ev else {})

    def _remember(self, source: str) -> str:
        sha = source_sha(source)
        self.state.kernels.setdefault(sha, source)
        return sha

    def _event(self, kind: str, payload: dict[str, Any]) -> None:
        self._pending_events.append((kind, payload))


def _ratio(speedup: float) -> float:
    return speedup if speedup >= 1.0 else 1.0 / speedup


def _neg_key(key: str) -> tuple[int, ...]:
    # Ties between equal speedups go to the earlier key under max().
    return tuple(-int(p) for p in key.split("."))


def _call_dict(call: CallRecord) -> dict[str, Any]:
    return call.to_dict()


# ---------------------------------------------------------------------------------------------------
# Small pure implementations of the interfaces (tests, the command line, the offline demo)


class PipelineEvaluator:
    """`Evaluator` over `benchmark.evaluation`: each source is one `EvaluationRequest` on an executor (the
    local process pool by default), all submitted at once and awaited together. Pass fixed `seeds` for a
    reproducible run (the same inputs for every candidate)."""

    def __init__(self, reference_source: str, *, platform: str = "trn1", backend: str = "simulator",
                 peak_counts: dict[str, float] | None = None, seeds: Sequence[int] | None = None,
                 kernel_name: str | None = None, executor: Any = None) -> None:
        from benchmark.evaluation import LocalExecutor

        self.reference_source = reference_source
        self.options = {"platform": platform, "backend": backend, "peak_counts": peak_counts,
                        "seeds": tuple(seeds) if seeds is not None else None, "kernel_name": kernel_name}
        self.executor = executor or LocalExecutor()

    async def evaluate_many(self, sources: Sequence[str]) -> Sequence[EvaluationLike]:
        from benchmark.evaluation import EvaluationRequest

        futures = [self.executor.submit(EvaluationRequest(kernel_source=s, reference_source=self.reference_source,
                                                          **self.options)) for s in sources]
        return await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))


class ListEventSink:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    async def emit(self, kind: str, payload: dict[str, Any]) -> None:
        self.events.append((kind, json.loads(json.dumps(payload))))  # what a JSON column would hold

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]


class InMemoryCheckpoint:
    def __init__(self, state: dict[str, Any] | None = None) -> None:
        self.state = state
        self.saves = 0

    async def load(self) -> dict[str, Any] | None:
        return None if self.state is None else json.loads(json.dumps(self.state))

    async def save(self, state: dict[str, Any]) -> None:
        self.state = json.loads(json.dumps(state))  # proves the state is JSON-ready
        self.saves += 1


class JsonFileCheckpoint:
    """The state in one JSON file, replaced atomically (a crash leaves the old or the new file)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    async def load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        return json.loads(self.path.read_text(encoding="utf-8"))

    async def save(self, state: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f)
        os.replace(tmp, self.path)


class InMemoryMemory:
    """The Planner's bounded context without a database: pinned first, then same problem, then same
    family, newest first within each group. Adding an existing key replaces nothing (idempotent)."""

    def __init__(self, items: Sequence[MemoryItem] = ()) -> None:
        self.items: list[MemoryItem] = list(items)

    async def select(self, problem: ProblemContext, k: int) -> Sequence[MemoryItem]:
        def rank(pair: tuple[int, MemoryItem]) -> tuple[int, int, int, int]:
            age, item = pair
            return (not item.pinned, item.problem != problem.slug,
                    not (problem.family and item.family == problem.family), -age)

        ordered = [item for _, item in sorted(enumerate(self.items), key=rank)]
        pinned = [i for i in ordered if i.pinned]
        rest = [i for i in ordered if not i.pinned]
        return (pinned + rest[: max(0, k - len(pinned))]) if k else pinned

    async def add(self, item: MemoryItem) -> None:
        if all(existing.key != item.key for existing in self.items):
            self.items.append(item)
