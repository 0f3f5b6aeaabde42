"""The product's offline search on a real GPU (issue 24): a FlashInfer-Bench Triton solution, optimized by the
same OfflineAgents, Triton rewrite catalog and beam search a run uses (through the pure layers: no Django), with
every candidate evaluated by the cuda backend's method (correctness on seeded inputs at the workload, then
CUDA-event timing with the L2 flushed, and the roofline), and the search tree printed.

Needs only Python 3, numpy, PyTorch and Triton. Our own script on our own machine, so kernels run in this
process (engine.platforms.triton.local.evaluate_case, as measurements/gpu_check.py), not in the evaluation sandbox.

    PYTHONUNBUFFERED=1 python3 measurements/gpu_offline_search.py \
        --solution .fib/solutions/rmsnorm/rmsnorm_h128/gpt-o3_triton_35b90e.json --out search.json
    python3 measurements/gpu_offline_search.py --out search.json            # our sample rmsnorm_h128
    python3 measurements/gpu_offline_search.py --interpret --iterations 1   # no GPU: correctness only

Without --solution it starts from our sample solution of --sample (default rmsnorm_h128). The definition and
workload come from --definitions / --workloads (default engine/platforms/triton/samples/...): on a GPU the largest
workload of the definition (or --workload UUID), on the interpreter the smallest with its var axes cut to 16,
and the search then runs correctness_only (no latency: nothing is ranked by speed) and says so.
--budget-s (default 180, counted from the start) stops the search cleanly between steps, and the best kernel
found so far is still reported; --max-evaluations caps the candidates evaluated. On a GPU, the start and the
best kernel are timed again side by side at the end (the speedup printed as "confirmed").
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import difflib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SAMPLES = ROOT / "engine" / "platforms" / "triton" / "samples"
CONFIRM_RESERVE_S = 15.0  # kept out of the search's wall-time budget on a GPU: the side-by-side timing


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--solution", type=Path, help="FlashInfer-Bench solution JSON to start from (default: our sample)")
    parser.add_argument("--sample", default="rmsnorm_h128", help="without --solution: our sample solution of this definition")
    parser.add_argument("--definitions", type=Path, default=SAMPLES / "definitions", help="definition JSONs")
    parser.add_argument("--workloads", type=Path, default=SAMPLES / "workloads", help="workload JSONs")
    parser.add_argument("--workload", default="", help="the workload's uuid (default: largest on a GPU, smallest interpreted)")
    parser.add_argument("--iterations", type=int, default=4, help="search iterations (default 4)")
    parser.add_argument("--beam", type=int, default=2, help="kernels kept per iteration (default 2)")
    parser.add_argument("--plans", type=int, default=4, help="plans per beam kernel (default 4)")
    parser.add_argument("--max-evaluations", type=int, default=40, help="candidates evaluated at most (default 40)")
    parser.add_argument("--budget-s", type=float, default=180.0, help="stop the search past this (default 180)")
    parser.add_argument("--seeds", type=int, default=3, help="correctness seeds per candidate (default 3, as the cuda backend)")
    parser.add_argument("--seed", type=int, default=0, help="the search's seed (default 0)")
    parser.add_argument("--gpu-spec", choices=("auto", "h100", "h200"), default="auto",
                        help="whose documented peaks the roofline uses (default: from the device name)")
    parser.add_argument("--interpret", action="store_true",
                        help="no GPU: Triton's CPU interpreter on a small workload, correctness only")
    parser.add_argument("--out", type=Path, help="write the search tree and the best kernel as JSON here")
    args = parser.parse_args(argv)
    for name in ("iterations", "beam", "plans", "max_evaluations", "seeds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.budget_s <= 0:
        parser.error("--budget-s must be > 0")
    if args.solution is not None and not args.solution.is_file():
        parser.error(f"--solution {args.solution}: no such file")
    for name in ("definitions", "workloads"):
        if not getattr(args, name).is_dir():
            parser.error(f"--{name} {getattr(args, name)}: not a folder")
    return args


@dataclass
class CandidateEvaluation:
    """One kernel's evaluation as the search reads it (the shape of engine.evaluator.EvaluationResult)."""

    correct: bool
    latency_ms: float | None
    peak_fraction: float | None
    error_kind: str | None
    error_message: str | None
    profile: dict[str, float] = field(default_factory=dict)


class CaseEvaluator:
    """The search's Evaluator over engine.platforms.triton.local.evaluate_case: one kernel at a time (one GPU), the
    start solution's entry file replaced by the candidate's source, statuses mapped onto the failure taxonomy
    as the sandboxed cuda backend maps them (engine.platforms.triton.machine.ERROR_KINDS)."""

    def __init__(self, definition: Any, workload: Any, solution: Any, *, device: str, seeds: tuple[int, ...],
                 spec: Any, workdir: Path) -> None:
        self.definition, self.workload, self.solution = definition, workload, solution
        self.device, self.seeds, self.spec, self.workdir = device, seeds, spec, workdir
        self.cases: dict[str, dict[str, Any]] = {}  # source sha -> the last CaseResult, as a dict
        self.count = 0

    def evaluate(self, source: str) -> Any:
        from engine.platforms.triton.local import evaluate_case
        from engine.search import source_sha

        self.count += 1
        solution = replace(self.solution, sources={**self.solution.sources, self.solution.entry_file: source})
        result = evaluate_case(self.definition, self.workload, solution, workdir=self.workdir / str(self.count),
                               device=self.device, seeds=self.seeds, gpu=self.spec,
                               time_it=self.device.startswith("cuda"), name=f"candidate{self.count}")
        self.cases[source_sha(source)] = result.to_dict()
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()
        return result

    async def evaluate_many(self, sources: list[str]) -> list[CandidateEvaluation]:
        from engine.platforms.triton.machine import CHECKED_CORRECT, ERROR_KINDS

        evaluations = []
        for source in sources:
            r = self.evaluate(source)
            kind, message = ERROR_KINDS.get(r.status, "runtime_error"), r.message or None
            if kind is None and r.peak_fraction is not None and r.peak_fraction > 1.0:
                kind = "suspicious"  # faster than the roofline floor: held, as the cuda backend holds it
                message = f"latency {r.latency_ms:.4g} ms is below the roofline floor {r.floor_ms:.4g} ms"
            profile = {k: float(v) for k, v in (("latency_ms", r.latency_ms), ("spread", r.spread),
                       ("reference_ms", r.reference_ms), ("floor_ms", r.floor_ms)) if v is not None}
            evaluations.append(CandidateEvaluation(correct=r.status in CHECKED_CORRECT, latency_ms=r.latency_ms,
                                                   peak_fraction=r.peak_fraction, error_kind=kind,
                                                   error_message=message, profile=profile))
        return evaluations


def load_problem(args: argparse.Namespace) -> tuple[Any, Any, Any, str]:
    """(definition, workload, start solution, label), or SystemExit naming what is missing."""
    from engine.platforms.triton import catalog
    from engine.platforms.triton.flashinfer import FormatError, load_solution
    from engine.platforms.triton.machine import elements, read_problem_files, shrink

    if args.solution is not None:
        try:
            solution = load_solution(args.solution)
        except (FormatError, KeyError, TypeError) as exc:
            raise SystemExit(f"gpu_offline_search: {args.solution} is not a FlashInfer-Bench solution: {exc}") from None
        if solution.language != "triton":
            raise SystemExit(f"gpu_offline_search: {args.solution} is a {solution.language!r} solution, not triton")
        label = f"{solution.author or 'fib'}:{solution.name}"
    else:
        if args.sample not in catalog.SOLUTION_FILES:
            raise SystemExit(f"gpu_offline_search: no sample solution for {args.sample!r}; have {sorted(catalog.SOLUTION_FILES)}")
        solution, label = catalog.solution(args.sample), f"ours:{args.sample}"
    definitions, workloads, problems = read_problem_files(args.definitions, args.workloads)
    for problem in problems:
        print(f"  not read: {problem}", flush=True)
    definition = definitions.get(solution.definition)
    if definition is None:
        raise SystemExit(f"gpu_offline_search: no definition {solution.definition!r} under {args.definitions}")
    candidates = workloads.get(solution.definition, [])
    if args.workload:
        candidates = [w for w in candidates if w.uuid == args.workload]
    if not candidates:
        raise SystemExit(f"gpu_offline_search: no workload {args.workload or ''} of {solution.definition!r} under "
                         f"{args.workloads}")
    ranked = sorted(candidates, key=lambda w: elements(definition, w))
    workload = shrink(ranked[0]) if args.interpret else ranked[-1]
    return definition, workload, solution, label


async def search(args: argparse.Namespace, evaluator: CaseEvaluator, definition: Any, platform: str,
                 start_source: str, budget_s: float) -> tuple[Any, Any]:
    """The run: OfflineAgents over the platform's catalog, the beam search, a list memory; (state, events)."""
    from engine.agents.base import ProblemContext
    from engine.agents.offline import OfflineAgents
    from engine.search import (
        BeamSearch,
        Budget,
        InMemoryCheckpoint,
        ListEventSink,
        ListOptimizationMemory,
        SearchConfig,
    )

    # As create_run configures an offline run: no Fixer (the offline agent repairs nothing), correctness_only
    # on a backend that measures no latency; the breadth from the arguments.
    config = SearchConfig(iterations=args.iterations, beam_width=args.beam, plans_per_candidate=args.plans,
                          samples_per_plan=1, fix_attempts=0, seed=args.seed, evaluation_batch=1,
                          correctness_only=args.interpret)
    problem = ProblemContext(slug=definition.name, reference_source=definition.reference, platform=platform,
                             family=definition.op_type, description=definition.description)
    events = ListEventSink()
    run = await BeamSearch.open(problem=problem, start_source=start_source, config=config, agents=OfflineAgents(),
                                evaluator=evaluator, memory=ListOptimizationMemory(), events=events,
                                store=InMemoryCheckpoint(),
                                budget=Budget(max_wall_time_s=budget_s, max_evaluations=args.max_evaluations))
    return await run.run(), events


def search_tree(state: Any, events: Any, evaluator: CaseEvaluator) -> list[dict[str, Any]]:
    """Per iteration its candidates: rewrite, parent, status, latency, speedups, fraction of peak, chosen."""
    from engine.agents.offline import parse_plan

    start_ms = state.start_latency_ms
    plans: dict[str, tuple[str, str]] = {}
    evaluated: dict[str, dict[str, Any]] = {}
    chosen: dict[int, set[str]] = {}
    rows: dict[str, dict[str, Any]] = {}
    origin_of = {state.start_sha: "start"}
    for kind, p in events.events:
        if kind == "plan.proposed":
            parsed = parse_plan(p["plan"])
            plans[p["plan_key"]] = (f"{parsed[0].name} #{parsed[1]}" if parsed else "?", p["plan"].split(" [")[0])
        elif kind == "candidate.evaluated" and not p.get("retrying"):
            evaluated[p["sha"]] = p
        elif kind == "beam.selected":
            chosen[p["iteration"]] = {m["origin"] for m in p["beam"]}
        elif kind == "candidate.written" and p["candidate_key"] not in rows:
            rows[p["candidate_key"]] = {"iteration": p["iteration"], "key": p["candidate_key"], "sha": p["sha"],
                                        "parent": origin_of.get(p["parent_sha"], p["parent_sha"][:12]),
                                        "parent_sha": p["parent_sha"], "unusable": p["unusable"]}
            if p["sha"]:
                origin_of.setdefault(p["sha"], p["candidate_key"])
    tree: list[dict[str, Any]] = []
    for row in rows.values():
        rewrite, title = plans.get(row["key"].rsplit(".", 1)[0], ("?", "?"))
        ev = evaluated.get(row["sha"] or "")
        case = evaluator.cases.get(row["sha"] or "", {})
        parent_ms = (evaluated.get(row["parent_sha"]) or {}).get("latency_ms")
        if row["parent_sha"] == state.start_sha:
            parent_ms = start_ms
        latency = ev.get("latency_ms") if ev else None
        status = ("unusable" if row["unusable"] else "not evaluated" if ev is None
                  else ev.get("error_kind") or "correct")
        tree.append({**row, "rewrite": rewrite, "title": title, "status": status,
                     "message": (ev or {}).get("error_message") or row["unusable"] or "",
                     "latency_ms": latency, "spread": case.get("spread"),
                     "speedup_vs_start": start_ms / latency if start_ms and latency else None,
                     "speedup_vs_parent": parent_ms / latency if parent_ms and latency else None,
                     "peak_fraction": ev.get("peak_fraction") if ev else None,
                     "chosen": row["key"] in chosen.get(row["iteration"], set())})
    return tree


def lineage(tree: list[dict[str, Any]], key: str) -> list[str]:
    """The rewrites from the start kernel to candidate `key`, oldest first."""
    by_key = {row["key"]: row for row in tree}
    chain = []
    while key in by_key:
        chain.append(by_key[key]["rewrite"])
        key = by_key[key]["parent"]
    return chain[::-1]


def _fmt(value: float | None, spec: str) -> str:
    width = spec.split(".")[0]
    return format("-", f">{width}") if value is None else format(value, spec)


def print_tree(tree: list[dict[str, Any]], start: dict[str, Any]) -> None:
    print(f"start: {_fmt(start.get('latency_ms'), '.4f')} ms, {_fmt(_pct(start.get('peak_fraction')), '.1f')}% of "
          f"peak, status {start.get('status')}", flush=True)
    iterations = sorted({row["iteration"] for row in tree})
    for iteration in iterations:
        print(f"iteration {iteration}:", flush=True)
        print(f"  {'cand':9} {'parent':9} {'rewrite':22} {'status':20} {'lat ms':>9} {'x start':>7} {'x parent':>8} "
              f"{'%peak':>6}  beam", flush=True)
        for row in (r for r in tree if r["iteration"] == iteration):
            print(f"  {row['key']:9} {row['parent'][:9]:9} {row['rewrite'][:22]:22} {row['status'][:20]:20} "
                  f"{_fmt(row['latency_ms'], '9.4f')} {_fmt(row['speedup_vs_start'], '7.3f')} "
                  f"{_fmt(row['speedup_vs_parent'], '8.3f')} {_fmt(_pct(row['peak_fraction']), '6.1f')}  "
                  f"{'*' if row['chosen'] else ''}", flush=True)
            if row["message"] and row["status"] != "correct":
                print(f"      {row['message'].splitlines()[0][:160]}", flush=True)


def _diff(before: str, after: str) -> str:
    return "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(), "start", "best", lineterm=""))


def _normalized(source: str) -> str:
    try:
        return ast.unparse(ast.parse(source))
    except SyntaxError:
        return source


def _pct(fraction: float | None) -> float | None:
    return None if fraction is None else 100 * fraction


def confirm(evaluator: CaseEvaluator, start_source: str, best_source: str) -> dict[str, Any]:
    """Time the start and the best kernel again, one after the other: the speedup from one sitting."""
    first, second = evaluator.evaluate(start_source), evaluator.evaluate(best_source)
    confirmed = {"start_ms": first.latency_ms, "best_ms": second.latency_ms, "start_status": first.status,
                 "best_status": second.status}
    if first.latency_ms and second.latency_ms:
        confirmed["speedup"] = first.latency_ms / second.latency_ms
    return confirmed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before Triton is first imported
    try:
        import torch
    except ImportError:
        print("gpu_offline_search: PyTorch is not installed; it needs numpy, torch and triton", file=sys.stderr)
        return 2
    if not args.interpret and not torch.cuda.is_available():
        print("gpu_offline_search: no NVIDIA GPU visible to PyTorch (torch.cuda.is_available() is False). Run it "
              "on a GPU machine, or pass --interpret for a CPU correctness-only search.", file=sys.stderr)
        return 2
    from engine.platforms.triton.machine import roofline_spec
    from engine.platforms.triton.timing import gpu_environment

    environment: dict[str, Any] = {"mode": "interpret" if args.interpret else "cuda", "python": sys.version.split()[0]}
    spec = None
    if not args.interpret:
        environment.update(gpu_environment())
        spec, notes = roofline_spec(environment["gpu"], args.gpu_spec)
        environment.update(notes)
    platform = spec.name if spec is not None else (args.gpu_spec if args.gpu_spec != "auto" else "h200")
    print(f"gpu_offline_search: {json.dumps(environment)}", flush=True)
    definition, workload, solution, label = load_problem(args)
    start_source = solution.sources[solution.entry_file]
    print(f"start: {label} on {definition.name} {workload.axes} (workload {workload.uuid or '-'}); platform "
          f"{platform}; iterations {args.iterations}, beam {args.beam}, plans {args.plans}, at most "
          f"{args.max_evaluations} evaluations, budget {args.budget_s:.0f} s", flush=True)
    if args.interpret:
        print("correctness only: no GPU (the Triton interpreter times nothing; the search runs correctness_only, "
              "so nothing is ranked by speed)", flush=True)
    report: dict[str, Any] = {"environment": environment, "solution": label, "definition": definition.name,
                              "workload": {"uuid": workload.uuid, "axes": workload.axes}, "platform": platform,
                              "correctness_only": args.interpret, "arguments": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory(prefix="gpu_offline_search_") as scratch:
        evaluator = CaseEvaluator(definition, workload, solution, device="cpu" if args.interpret else "cuda",
                                  seeds=tuple(range(args.seeds)), spec=spec, workdir=Path(scratch))
        reserve = 0.0 if args.interpret else CONFIRM_RESERVE_S
        left = max(args.budget_s - (time.monotonic() - started) - reserve, 1.0)
        state, events = asyncio.run(search(args, evaluator, definition, platform, start_source, left))
        tree = search_tree(state, events, evaluator)
        start_case = evaluator.cases.get(state.start_sha, {})
        start_ev = state.evaluations.get(state.start_sha)
        start = {"latency_ms": state.start_latency_ms, "peak_fraction": start_ev.peak_fraction if start_ev else None,
                 "status": start_case.get("status"), "reference_ms": start_case.get("reference_ms"),
                 "floor_ms": start_case.get("floor_ms"), "message": start_case.get("message")}
        print_tree(tree, start)
        best = state.best
        best_source = state.kernels.get(best.sha, "") if best else ""
        best_ev = state.evaluations.get(best.sha) if best else None
        report.update({
            "status": state.status, "error": state.error, "stop": state.stop, "history": state.history,
            "evaluations": state.totals.evaluations, "start": start, "tree": tree,
            "best": None if best is None else {
                "sha": best.sha, "origin": best.origin, "latency_ms": best.latency_ms,
                "peak_fraction": best_ev.peak_fraction if best_ev else None, "speedup_vs_start": state.best_speedup,
                "rewrites": lineage(tree, best.origin), "source": best_source,
                "diff": _diff(start_source, best_source),
                # The catalog rewrites through the AST, which drops comments and reformats: this diff shows
                # only what the rewrites changed.
                "diff_normalized": _diff(_normalized(start_source), _normalized(best_source))},
        })
        if best is not None and best.sha != state.start_sha and not args.interpret:
            report["confirmed"] = confirm(evaluator, start_source, best_source)
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    print_summary(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0 if report["status"] in ("succeeded", "stopped") else 1


def print_summary(report: dict[str, Any]) -> None:
    best, stop = report["best"], report["stop"]
    ended = f"stopped ({stop.get('budget')} budget reached)" if stop else report["status"]
    print(f"search {ended} after {report['evaluations']} evaluations in {report['elapsed_s']} s"
          + (f": {report['error']}" if report["error"] else ""), flush=True)
    if best is None:
        print("no correct kernel found", flush=True)
        return
    if best["origin"] == "start":
        why = ("correctness only: correct rewrites are kept, never ranked above the start by a speed nobody "
               "measured" if report["correctness_only"] else "no rewrite beat it")
        print(f"best: the start kernel ({why})", flush=True)
    else:
        measured = ("correctness only, unmeasured" if report["correctness_only"] else
                    f"{_fmt(best['latency_ms'], '.4f')} ms, {_fmt(best['speedup_vs_start'], '.3f')}x the start, "
                    f"{_fmt(_pct(best['peak_fraction']), '.1f')}% of peak")
        print(f"best: {best['origin']} ({measured}) via {' -> '.join(best['rewrites'])}", flush=True)
        confirmed = report.get("confirmed")
        if confirmed:
            print(f"confirmed side by side: start {_fmt(confirmed['start_ms'], '.4f')} ms, best "
                  f"{_fmt(confirmed['best_ms'], '.4f')} ms, {_fmt(confirmed.get('speedup'), '.3f')}x", flush=True)
        print("diff against the start (both as the AST prints them: comments and layout dropped):", flush=True)
        print(best["diff_normalized"], flush=True)


if __name__ == "__main__":
    sys.exit(main())
