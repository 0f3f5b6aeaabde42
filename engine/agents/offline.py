"""The offline agent: a deterministic search over known rewrites, used when no model endpoint is set.

It is not a language model and does not pretend to be one (its label says so). It plays the roles with
the catalog of the problem's kernel language (the registry's "rewrites" part: NKI's, Triton's, any
registered language's):

* Planner: lists every (rewrite, site) that applies to the kernel, ordered by what the memory says
  (rewrites with positive entries first, rewrites with negative entries last, the catalog order in
  between), and takes `count` of them; ties are broken with the request's seed. Asked again about the same
  kernel (a beam that kept it), it proposes first what it has not proposed for it yet.
* Executor: applies the named rewrite at the named site (sample 0), or at every site it has (sample
  1 and up, for rewrites whose sites disappear once applied). Every result is validated by the
  evaluator like any other candidate.
* Fixer: none; it answers "unusable", so offline runs should set `fix_attempts=0`.
* Summarizer: writes the entry from the rewrite's lesson, the measured speedup and the before/after diff;
  for a rewrite that failed (`request.failure`), from the lesson and the failure.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import random
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from engine.agents.base import (
    NEGATIVE,
    AgentResult,
    FixRequest,
    MemoryDraft,
    MemoryItem,
    PlanRequest,
    SummaryRequest,
    WriteRequest,
)
from engine.agents.imports import in_target_generation
from engine.agents.prompting import generation_of
from engine.agents.rewrites import Rewrite, RewriteError, catalog_for, rewrite_named
from engine.platforms.registry import PREDICTED, get_backend_definition, get_definition

LABEL = "offline: search over known rewrites (no language model)"
_PLAN_TAG = re.compile(r"\[rewrite (?P<name>\w+) #(?P<site>\d+)\]")
_MEMORY_TAG = "rewrite: `{name}`"
DIFF_LINES = 30
# A run returning current-generation NKI from a legacy kernel: the offline agent migrates it first, as a
# candidate of its own (the same kernel in NKI 0.6), and applies its rewrites to the migrated source.
MIGRATE_PLAN = ("Migrate the kernel to NKI 0.6 (the nki package) and change nothing else [migrate]: the run returns "
                "current-generation kernels; the rewrite follows AWS's NKI migration guides.")


def plan_text(rewrite: Rewrite, site_index: int, description: str) -> str:
    return f"{rewrite.title} [rewrite {rewrite.name} #{site_index}]: {description}. {rewrite.lesson}"


def parse_plan(plan: str) -> tuple[Rewrite, int] | None:
    match = _PLAN_TAG.search(plan)
    rewrite = rewrite_named(match.group("name")) if match else None
    if rewrite is None:
        return None
    return rewrite, int(match.group("site"))


def memory_score(rewrite: Rewrite, memory: tuple[MemoryItem, ...]) -> int:
    tag = _MEMORY_TAG.format(name=rewrite.name)
    score = 0
    for item in memory:
        if tag in item.summary:
            # A lesson learned N times is one entry with evidence N (memory.learning): it weighs N, as N copies did.
            score += (-1 if item.polarity == NEGATIVE else 1) * max(1, item.evidence)
    return score


_AGENT_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="accelopt-offline-agents")


class OfflineAgents:
    label = LABEL

    def __init__(self, catalog: tuple[Rewrite, ...] | None = None) -> None:
        self.catalog = catalog  # None: the catalog of each problem's kernel language
        self._proposed: dict[str, set[tuple[str, int]]] = {}  # kernel source digest -> (rewrite, site) planned

    def catalog_for(self, platform: str) -> tuple[Rewrite, ...]:
        return self.catalog if self.catalog is not None else catalog_for(get_definition(platform).language)

    # plan and write parse and walk the kernel's AST for every rewrite in the catalog: seconds of CPU for a
    # large kernel. They run on a thread of their own, so the event loop they are awaited from (daphne's,
    # for the embedded run worker) keeps answering pages, websockets and /healthz meanwhile (it stalled up
    # to 3 s in the soak). One thread for the process, in the order asked: what plan proposes depends on
    # what it proposed before (_proposed), and a run's choices must not depend on thread timing; and no
    # thread is started from the loop per run (Thread.start waits there for the new thread to run).

    async def plan(self, request: PlanRequest) -> AgentResult[list[str]]:
        return await self._off_the_loop(self._plan, request)

    async def write(self, request: WriteRequest) -> AgentResult[str]:
        return await self._off_the_loop(self._write, request)

    async def _off_the_loop(self, function: Callable[[Any], Any], request: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(_AGENT_THREAD, function, request)

    def _plan(self, request: PlanRequest) -> AgentResult[list[str]]:
        try:
            source = in_target_generation(request.kernel.source, request.problem.target_generation,
                                  get_definition(request.problem.platform).language)
        except ValueError as error:
            return AgentResult(None, unusable=str(error))
        migrating = source != request.kernel.source
        options = []
        for order, rewrite in enumerate(self.catalog_for(request.problem.platform)):
            for index, site in enumerate(rewrite.sites(source)):
                options.append((memory_score(rewrite, request.memory), order, index, rewrite, site))
        if not options and not migrating:
            return AgentResult(None, unusable="no rewrite in the catalog applies to this kernel")
        tiebreak = random.Random(request.seed)
        # Asked again about a kernel (a beam that kept the same kernel), propose what it has not been given yet:
        # the same plan would only write the kernel already evaluated.
        given = self._proposed.setdefault(hashlib.sha256(request.kernel.source.encode()).hexdigest(), set())
        keyed = [((rewrite.name, index) in given, -score, order, tiebreak.random(), index, rewrite, site)
                 for score, order, index, rewrite, site in options]
        keyed.sort(key=lambda row: row[:5])
        chosen = keyed[: request.count]
        given.update((rewrite.name, index) for *_, index, rewrite, site in chosen)
        plans = [plan_text(rewrite, index, site.description) for *_, index, rewrite, site in chosen]
        if migrating and not given.intersection({("migrate", 0)}):
            given.add(("migrate", 0))
            plans = [MIGRATE_PLAN, *plans][: request.count]
        return AgentResult(plans)

    def _write(self, request: WriteRequest) -> AgentResult[str]:
        try:
            kernel = in_target_generation(request.kernel.source, request.problem.target_generation,
                                  get_definition(request.problem.platform).language)
        except ValueError as error:
            return AgentResult(None, unusable=str(error))
        if request.plan == MIGRATE_PLAN:
            return AgentResult(kernel)
        parsed = parse_plan(request.plan)
        if parsed is None:
            return AgentResult(None, unusable=f"the offline executor only applies catalog rewrites; plan: {request.plan[:80]!r}")
        rewrite, site = parsed
        try:
            source = rewrite.apply(kernel, site)
            if request.sample > 0 and rewrite.repeatable:
                source = rewrite.apply_everywhere(source)
        except (RewriteError, SyntaxError, ValueError) as exc:
            return AgentResult(None, unusable=f"rewrite {rewrite.name} failed: {exc}")
        # The catalog writes legacy (functional) NKI: in an NKI 0.6 kernel its lines are migrated to 0.6 too.
        language = get_definition(request.problem.platform).language
        goal = request.problem.target_generation or generation_of(kernel, language)
        try:
            return AgentResult(in_target_generation(source, goal, language))
        except ValueError as exc:
            return AgentResult(None, unusable=f"rewrite {rewrite.name}: {exc}")

    async def fix(self, request: FixRequest) -> AgentResult[str]:
        return AgentResult(None, unusable="the offline agent does not repair kernels (set fix_attempts=0)")

    async def summarize(self, request: SummaryRequest) -> AgentResult[MemoryDraft]:
        parsed = parse_plan(request.plan)
        if parsed is None:
            return AgentResult(None, unusable="the plan names no catalog rewrite")
        rewrite, _ = parsed
        changed_side = request.fast_source if request.polarity != NEGATIVE else request.slow_source
        other_side = request.slow_source if request.polarity != NEGATIVE else request.fast_source
        diff = list(difflib.unified_diff(other_side.splitlines(), changed_side.splitlines(), "before", "after",
                                         lineterm="", n=1))
        snippet = "\n".join(diff[:DIFF_LINES]) + ("\n…" if len(diff) > DIFF_LINES else "")
        where = request.problem.slug
        # How the platform's own backend knows a speed: predicted by a model ("simulated") or timed.
        default_backend = get_backend_definition(get_definition(request.problem.platform).default_backend)
        measured = "simulated" if default_backend.latency == PREDICTED else "measured"
        if request.failure:
            title = f"{rewrite.title}: failed on {where}"
            verdict = (f"Applied to {where}, this rewrite produced a kernel that failed its check "
                       f"({request.failure}); avoid it for kernels of this shape, or fix what it breaks.")
        elif request.polarity == NEGATIVE:
            title = f"{rewrite.title}: slower on {where}"
            verdict = (f"Applied to {where}, this rewrite made the kernel {request.speedup:.2f}x slower "
                       f"({measured}); avoid it for kernels of this shape.")
        else:
            title = rewrite.title
            verdict = f"Applied to {where}, it made the kernel {request.speedup:.2f}x faster ({measured})."
        summary = (f"{rewrite.lesson}\n\n{verdict} ({_MEMORY_TAG.format(name=rewrite.name)}, found by the offline "
                   f"rewrite search)\n\n```diff\n{snippet}\n```")
        return AgentResult(MemoryDraft(title=title, summary=summary))
