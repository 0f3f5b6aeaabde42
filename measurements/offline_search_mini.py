"""The offline agent (search over known rewrites) on the NKIBench mini cases, through the real pipeline.

    .venv/bin/python measurements/offline_search_mini.py [--problems silu,adamw] [--iterations 3] [--beam 2]
        [--plans 8] [--workers 2]

Per problem: one beam search from the baseline with the simulator backend (trn1, fixed seeds), no
Fixer. Prints one JSON line per problem and a Markdown table: baseline and best latency as the
performance model predicts them, the speedup, evaluations run and wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.agents.base import ProblemContext  # noqa: E402
from engine.agents.offline import OfflineAgents  # noqa: E402
from engine.evaluator import LocalExecutor  # noqa: E402
from engine.platforms.nki.suites.loader import load_suite  # noqa: E402
from engine.search import (  # noqa: E402
    BeamSearch,
    InMemoryCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    PipelineEvaluator,
    SearchConfig,
)

SEEDS = (11, 12, 13)


def lineage(events: ListEventSink, sha: str) -> list[str]:
    """The rewrites that led from the baseline to `sha`, oldest first (read back from the events)."""
    plans = {p["plan_key"]: p["plan"].split(" [")[0] for k, p in events.events if k == "plan.proposed"}
    made = {}
    for kind, p in events.events:
        if kind == "candidate.written" and p["sha"] and p["sha"] not in made:
            made[p["sha"]] = (p["parent_sha"], plans.get(p["plan_key"], "?"))
    chain = []
    while sha in made:
        sha, title = made[sha]
        chain.append(title)
    return chain[::-1]


async def optimize(problem, config: SearchConfig, executor: LocalExecutor, memory: ListOptimizationMemory) -> dict:
    reference = problem.reference_source("mini")
    context = ProblemContext(slug=problem.slug, reference_source=reference, family=problem.family)
    evaluator = PipelineEvaluator(reference, seeds=SEEDS, peak_counts=problem.peak_counts("mini").as_dict(),
                                  executor=executor)
    started = time.monotonic()
    events = ListEventSink()
    search = await BeamSearch.open(problem=context, start_source=problem.baseline_for("mini"), config=config,
                                   agents=OfflineAgents(), evaluator=evaluator, memory=memory,
                                   events=events, store=InMemoryCheckpoint())
    state = await search.run()
    best = state.best
    origin = best.origin if best else ""
    return {
        "problem": problem.slug,
        "status": state.status,
        "error": state.error[:200],
        "baseline_ms": state.start_latency_ms,
        "best_ms": best.latency_ms if best else None,
        "speedup": state.best_speedup,
        "best_origin": origin,
        "rewrites": lineage(events, best.sha if best else ""),
        "evaluations": state.totals.evaluations,
        "correct_candidates": sum(h["correct"] for h in state.history),
        "candidates": sum(h["candidates"] for h in state.history),
        "wall_s": round(time.monotonic() - started, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default="")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--beam", type=int, default=2)
    parser.add_argument("--plans", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    suite = load_suite("nkibench")
    wanted = [s for s in args.problems.split(",") if s] or [p.slug for p in suite.problems]
    config = SearchConfig(iterations=args.iterations, beam_width=args.beam, plans_per_candidate=args.plans,
                          samples_per_plan=1, fix_attempts=0, seed=0, evaluation_batch=8)
    rows = []
    with LocalExecutor(max_workers=args.workers) as executor:
        for slug in wanted:
            row = await optimize(suite.problem(slug), config, executor, ListOptimizationMemory())
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\nconfig: iterations={args.iterations} beam={args.beam} plans={args.plans} samples=1 fix=0 workers={args.workers}")
    print("| problem | baseline (ms) | best (ms) | speedup | correct / candidates | evaluations | wall (s) | rewrites in the best kernel |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if r["status"] != "succeeded":
            print(f"| {r['problem']} | — | — | — | — | {r['evaluations']} | {r['wall_s']} | failed: {r['error']} |")
            continue
        print(f"| {r['problem']} | {r['baseline_ms']:.5f} | {r['best_ms']:.5f} | {r['speedup']:.3f} | "
              f"{r['correct_candidates']} / {r['candidates']} | {r['evaluations']} | {r['wall_s']} | "
              f"{'; '.join(r['rewrites']) or '—'} |")
    faster = sum(1 for r in rows if r["status"] == "succeeded" and (r["speedup"] or 0) > 1.0)
    print(f"\nfaster than the baseline: {faster} of {len(rows)}")


if __name__ == "__main__":
    asyncio.run(main())
