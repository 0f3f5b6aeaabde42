"""The beam search loop: `BeamSearch.open`, `step` and `run`, with one method per phase. Pure Python.

One run optimizes one kernel for one problem. Per iteration:

    plan      for each kernel in the beam, the Planner proposes up to N plans (given memory + profile)
    write     for each plan, the Executor writes K kernels
    evaluate  every new kernel is evaluated (many at once; a kernel already evaluated is never re-run)
    fix       a kernel that failed (not "suspicious") goes to the Fixer, up to `fix_attempts` times,
              and is evaluated again
    select    the fastest correct kernels (old beam included) become the next beam; rewrite selection
              keeps the largest speedups (positive) and the worst slowdowns (negative)
    summarize each selected rewrite becomes a memory entry (Summarizer), added to the optimization memory

`step()` saves the whole `RunState` after every unit of work, so a run killed at any point resumes from
its last save and redoes at most that one unit. One step is one chunk of at most `agent_batch` agent
calls or `evaluation_batch` evaluations, run concurrently, or one bookkeeping transition (selection,
iteration end). Work items have deterministic keys ("<iteration>.<beam>.<plan>.<sample>") and are
processed in key order, and each agent request carries a seed derived from the run seed and its key, so
the same seed and the same agent answers give the same run, whatever the batch sizes and wherever it was
interrupted. Events of an interrupted step may be emitted twice (at least once); each payload names its
item key so a consumer can tell.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Sequence
from dataclasses import asdict
from typing import Any

from engine.agents.base import (
    NEGATIVE,
    POSITIVE,
    AgentResult,
    CallRecord,
    FixRequest,
    KernelView,
    MemoryItem,
    PlanRequest,
    ProblemContext,
    SummaryRequest,
    WriteRequest,
)
from engine.memory.lessons import profile_bottleneck
from engine.search.budget import Budget, Usage, budget_reached, remaining_evaluations
from engine.search.cascade import STAGES
from engine.search.config import REPEATED_SAMPLING, SearchConfig
from engine.search.interfaces import Agents, CheckpointStore, Evaluator, EventSink, OptimizationMemory
from engine.search.state import (
    FAILED,
    INFRASTRUCTURE,
    STOPPED,
    SUCCEEDED,
    SUSPICIOUS,
    BeamMember,
    CandidateRecord,
    Evaluation,
    PlanRecord,
    RewriteRecord,
    RunState,
    source_sha,
)
from engine.search.unmeasured import admitted, beam_key, failed_rewrites, start_refusal

INFRASTRUCTURE_RETRIES = 2  # evaluations of one kernel that fail for infrastructure reasons and are redone


def derive_seed(run_seed: int, key: str) -> int:
    """A per-task seed that depends only on the run seed and the task key (not on execution order)."""
    digest = hashlib.sha256(f"{run_seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


class BeamSearch:
    def __init__(
        self,
        *,
        state: RunState,
        problem: ProblemContext,
        agents: Agents,
        evaluator: Evaluator,
        memory: OptimizationMemory,
        events: EventSink,
        store: CheckpointStore,
        budget: Budget | None = None,
    ) -> None:
        self.state = state
        self.budget = budget  # checked between steps; not part of the state (a resumed run takes the current one)
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
        memory: OptimizationMemory,
        events: EventSink,
        store: CheckpointStore,
        run_key: str = "",
        budget: Budget | None = None,
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
                   events=events, store=store, budget=budget)

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
        started = time.monotonic()
        try:
            reached = budget_reached(self.budget, Usage.from_totals(self.state.totals))
            if reached is not None:
                self._stop_for_budget(reached.to_dict(), reached.describe())
            else:
                handler = getattr(self, f"_step_{self.state.phase}")
                await handler()
        except Exception as exc:  # an evaluator or memory failure ends the run, with the reason
            self.state.status = FAILED
            self.state.error = f"{type(exc).__name__} during {self.state.phase} of iteration {self.state.iteration}: {exc}"
            self._event("run.failed", {"error": self.state.error, "phase": self.state.phase})
        self.state.totals.wall_time_s += time.monotonic() - started
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
        refusal = start_refusal(ev, self.config.correctness_only)
        if refusal:
            st.status = FAILED
            st.error = refusal
            self._event("run.failed", {"error": st.error, "phase": "start"})
            return
        st.beam = [BeamMember(sha=st.start_sha, latency_ms=None if ev.latency_ms is None else float(ev.latency_ms),
                              origin="start", correct=ev.correct)]
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
        pending = [(i, m) for i, m in enumerate(self._expanded()) if f"plan:{st.iteration}.{i}" not in st.done]
        if not pending:
            st.phase = "write"
            return
        chunk = pending[: self.config.agent_batch]
        requests = []
        for index, member in chunk:
            key = f"{st.iteration}.{index}"
            view = self._view(member.sha)
            # Chosen for this kernel (its operations, its profile's bottleneck): beam members get different ones.
            memory = tuple(await self.memory.select(self.problem, self.config.memory_size, kernel=view))
            requests.append(PlanRequest(problem=self.problem, kernel=view, memory=memory,
                                        count=self.config.plans_per_candidate,
                                        seed=derive_seed(self.config.seed, f"plan:{key}"), key=key))
        results = await self._call_all("planner", [self.agents.plan(r) for r in requests], requests)
        for (_, member), request, result in zip(chunk, requests, results, strict=True):
            plans = [p for p in (result.value or []) if p.strip()][: self.config.plans_per_candidate]
            for p_index, text in enumerate(plans):
                record = PlanRecord(key=f"{request.key}.{p_index}", parent_sha=member.sha, text=text)
                st.plans.append(record)
                self._event("plan.proposed", {"iteration": st.iteration, "plan_key": record.key,
                                              "parent_sha": member.sha, "plan": text,
                                              "memory": _memory_shown(request.memory)})
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
        # The Executor sees the memory only when asked (AccelOpt's does not: it would double that prompt).
        memory = (tuple(await self.memory.select(self.problem, self.config.memory_size))
                  if self.config.executor_memory else ())
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
        left = remaining_evaluations(self.budget, Usage.from_totals(st.totals))
        batch = self.config.evaluation_batch if left is None else min(self.config.evaluation_batch, left)
        await self._evaluate(shas[:batch], candidate_of)  # a batch of 0: the next step stops on the budget

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
        self._select()

    def _select(self, *, final: bool = False) -> None:
        """The next beam from the old one and this iteration's correct kernels; `final` (a budget stop):
        no rewrites are chosen for the memory, since summarizing them would spend more."""
        st = self.state
        for c in st.candidates:
            ev = st.evaluations.get(c.sha or "")
            if ev is not None and ev.usable:
                c.speedup = self._parent_latency(c.parent_sha) / float(ev.latency_ms or 0.0)
        # Next beam: the fastest distinct correct kernels among the old beam and the new candidates (correct,
        # unmeasured ones in a correctness-only run: unmeasured.py).
        pool: dict[str, BeamMember] = {m.sha: m for m in st.beam}
        for c in st.candidates:
            ev = st.evaluations.get(c.sha or "")
            if admitted(ev, self.config.correctness_only) and c.sha not in pool:
                latency = ev.latency_ms if ev is not None else None
                pool[c.sha or ""] = BeamMember(sha=c.sha or "", latency_ms=None if latency is None else float(latency),
                                               origin=c.key)
        order = {sha: i for i, sha in enumerate(pool)}
        st.beam = sorted(pool.values(), key=lambda m: beam_key(m, order[m.sha]))[: self.config.beam_width]
        chosen = {m.sha for m in st.beam}
        for c in st.candidates:
            c.chosen = (admitted(st.evaluations.get(c.sha or ""), self.config.correctness_only) and c.sha in chosen
                        and any(m.origin == c.key for m in st.beam))
        if final:
            st.rewrites = []
        elif self.config.correctness_only:
            st.rewrites = failed_rewrites(st.candidates, st.evaluations, self.config.rewrites_per_iteration)
        else:
            st.rewrites = self._select_rewrites()
        self._event("beam.selected", {
            "iteration": st.iteration,
            "beam": [asdict(m) for m in st.beam],
            "best_latency_ms": st.best.latency_ms if st.best else None,
            "best_speedup": st.best_speedup,
            "rewrites": [asdict(r) for r in st.rewrites],
        })
        if not final:
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
                                   seed=derive_seed(self.config.seed, f"summarize:{r.candidate_key}"),
                                   failure=r.failure)
                    for r in chunk]
        results = await self._call_all("summarizer", [self.agents.summarize(r) for r in requests], requests)
        for rewrite, request, result in zip(chunk, requests, results, strict=True):
            if result.value is not None:
                item = MemoryItem(
                    key=f"{st.run_key}:{rewrite.candidate_key}",
                    title=result.value.title, summary=result.value.summary, polarity=rewrite.polarity,
                    speedup=request.speedup, slow_kernel=request.slow_source, fast_kernel=request.fast_source,
                    problem=self.problem.slug, family=self.problem.family,
                    # What bounded the kernel the rewrite was applied to (its parent): when the lesson holds.
                    bottleneck=profile_bottleneck(st.evaluations[rewrite.slow_sha if rewrite.polarity == POSITIVE
                                                                  else rewrite.fast_sha].profile),
                    provenance={"run": st.run_key, "candidate": rewrite.candidate_key, "iteration": st.iteration,
                                "speedup_over_parent": rewrite.speedup, "agents": self.agents.label,
                                **({"failure": rewrite.failure} if rewrite.failure else {})},
                )
                await self.memory.add(item)
                self._event("memory.added", {"iteration": st.iteration, "candidate_key": rewrite.candidate_key,
                                             "key": item.key, "title": item.title, "polarity": item.polarity,
                                             "speedup": item.speedup})
            st.done.append(f"summarize:{rewrite.candidate_key}")

    async def _step_next(self) -> None:
        st = self.state
        summary = self._iteration_summary()
        st.history.append(summary)
        self._event("iteration.finished", summary)
        if st.iteration >= self.config.iterations:
            st.status, st.phase = SUCCEEDED, "finished"
            self._event("run.finished", self._result())
        else:
            self._start_iteration(st.iteration + 1)

    def _iteration_summary(self) -> dict[str, Any]:
        st = self.state
        evaluated = [c for c in st.candidates if c.sha and c.sha in st.evaluations]
        return {
            "iteration": st.iteration,
            "plans": len(st.plans),
            "candidates": len(st.candidates),
            "correct": sum(1 for c in st.candidates if admitted(st.evaluations.get(c.sha or ""), self.config.correctness_only)),
            "evaluated": len(evaluated),
            "unusable": sum(1 for c in st.candidates if c.unusable),
            "fixes": sum(c.fixes for c in st.candidates),
            "rewrites": len(st.rewrites),
            "best_latency_ms": st.best.latency_ms if st.best else None,
            "best_speedup": st.best_speedup,
            "best_sha": st.best.sha if st.best else None,
        }

    def _result(self) -> dict[str, Any]:
        st, best = self.state, self.state.best
        return {
            "best_sha": best.sha if best else None,
            "best_latency_ms": best.latency_ms if best else None,
            "best_speedup": st.best_speedup,
            "best_peak_fraction": st.evaluations[best.sha].peak_fraction if best else None,
            # Without the wall time: events stay a function of the seed and the agents' answers.
            "totals": {k: v for k, v in asdict(st.totals).items() if k != "wall_time_s"},
        }

    def _stop_for_budget(self, reached: dict[str, Any], reason: str) -> None:
        """End the run cleanly on a budget: what this iteration evaluated still enters the beam (so the best
        kernel is the best found), the iteration is closed, and nothing more is asked of agents or evaluators."""
        st = self.state
        # Where the search was, so a run continued with more budget picks up there (state.reopen_stopped).
        resume = {"phase": st.phase, "beam": [asdict(m) for m in st.beam]}
        if st.iteration >= 1 and st.phase in ("plan", "write", "evaluate", "fix", "select"):
            self._select(final=True)
        if st.iteration >= 1 and not any(h.get("iteration") == st.iteration for h in st.history):
            summary = {**self._iteration_summary(), "stopped": reached["budget"]}
            st.history.append(summary)
            self._event("iteration.finished", summary)
        st.status, st.phase, st.stop = STOPPED, "finished", {**reached, "resume": resume}
        self._event("run.stopped", {**self._result(), "reason": "budget", "budget": reached, "message": reason})

    def _expanded(self) -> list[BeamMember]:
        """The kernels this iteration plans from: the beam, or for repeated sampling the start kernel as many
        times as beam search would expand its beam (independent samples, the same budget)."""
        st = self.state
        if self.config.strategy != REPEATED_SAMPLING:
            return st.beam
        start = BeamMember(sha=st.start_sha, latency_ms=float(st.start_latency_ms or 0.0), origin="start")
        return [start] * len(st.beam)

    def _parent_latency(self, sha: str) -> float:
        ev = self.state.evaluations[sha]  # a parent was evaluated (and usable) before anything was planned from it
        return float(ev.latency_ms or 0.0)

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
            stage = getattr(result, "cascade_stage", None)
            if stage in STAGES:  # what the evaluator's cascade saved (or, passed at mini, spent) on it
                setattr(st.totals, stage, getattr(st.totals, stage) + 1)
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
        bound = self.config.suspicious_speedup
        for c in candidates:
            parent = self.state.evaluations.get(c.parent_sha)
            parent_ms = parent.latency_ms if parent is not None else None
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
            if call.cost_usd is None:
                totals.unpriced_calls += 1  # unknown, not free
            else:
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
        failure = f"{ev.error_kind or 'incorrect'}: {ev.error_message or ''}".strip(": ") if ev and not ev.correct else ""
        return KernelView(source=self.state.kernels[sha], latency_ms=ev.latency_ms if ev else None,
                          peak_fraction=ev.peak_fraction if ev else None,
                          profile=dict(ev.profile) if ev else {}, failure=failure,
                          breakdown=dict(ev.breakdown) if ev else {})

    def _remember(self, source: str) -> str:
        sha = source_sha(source)
        st = self.state
        if sha in st.evaluations or any(sha in c.attempts for c in st.candidates):
            st.totals.repeated += 1  # one evaluation answers every candidate with this source
        st.kernels.setdefault(sha, source)
        return sha

    def _event(self, kind: str, payload: dict[str, Any]) -> None:
        self._pending_events.append((kind, payload))


def _ratio(speedup: float) -> float:
    return speedup if speedup >= 1.0 else 1.0 / speedup


def _neg_key(key: str) -> tuple[int, ...]:
    # Ties between equal speedups go to the earlier key under max().
    return tuple(-int(p) for p in key.split("."))


def _memory_shown(memory: Sequence[MemoryItem]) -> list[dict[str, Any]]:
    """What the Planner was shown, for the search tree: each entry's key, title, polarity and speedup."""
    return [{"key": m.key, "title": m.title, "polarity": m.polarity, "speedup": m.speedup} for m in memory]


def _call_dict(call: CallRecord) -> dict[str, Any]:
    return call.to_dict()

