"""Where an evaluation's time goes, against bare simulations of the same kernel on the same seeds (issue 38).

    .venv/bin/python measurements/evaluation_phases.py                       # 14 mini baselines, 1 round
    .venv/bin/python measurements/evaluation_phases.py --case full --only silu,matmul --rounds 3
    .venv/bin/python measurements/evaluation_phases.py --case mini --trees OLD NEW --rounds 3   # two checkouts

Per problem and round, side by side (the order alternates each round, so load drift falls on both):

* bare: a fresh plain process renders the evaluation's seeds' inputs exactly as the reference child does
  (untimed) and runs `simulate(kernel, inputs, record_trace=True)` once per seed in one process (`workers=1`,
  as in the sandbox); its figure is the sum of the simulations;
* evaluation: `evaluate()` as the product calls it (static check, sandboxed reference, kernel, verifier and
  profile children, the same seeds), with the parent's time split by what it waited for: a child's start-up
  (its hello frame), each request by role and operation (render, record, verifier load, replay, transform,
  expected slices, profile), and the rest (the parent's own checks and bookkeeping).

Prints one JSON line per evaluation, then per problem the medians and the ratio evaluation / bare, and the
phase totals over all problems. A phase's time includes moving its arrays through the pipes.

`--trees OLD NEW` compares two checkouts (`git archive REV | tar -x -C DIR`) side by side: each round runs
every problem once in each tree's own copy of this script (bare simulation and evaluation, in a fresh
process), problem by problem, the trees' order swapped every round so load drift falls on both; then per
problem the medians of evaluation wall and CPU seconds in each tree, NEW/OLD, and each tree's evaluation /
bare. Both trees must reach the same verdicts (a problem that fails on a seed in both, as gqa_full's mini case
does on its scaled seed, did the same work in both and is timed).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.evaluator import Limits, evaluate  # noqa: E402
from engine.evaluator.sandbox import process as sandbox_process  # noqa: E402
from engine.platforms.nki.suites import load_suite  # noqa: E402

LIMITS = {
    "mini": Limits(wall_seconds=120, cpu_seconds=120, memory_bytes=4 * 1024**3),
    "full": Limits(wall_seconds=1800, cpu_seconds=1800, memory_bytes=12 * 1024**3),
}
SEEDS = (11, 22, 33)


def bare(case: str, slug: str, seeds: tuple[int, ...], platform: str) -> dict[str, Any]:
    """In this (fresh) process: the seeds' inputs as the reference child renders them, then one plain
    simulation per seed. Returns the simulations' wall times."""
    import random

    import numpy as np

    from engine.evaluator.child import ReferenceRole
    from engine.evaluator.inputs import DISTRIBUTIONS, apply_distribution, plan_distributions
    from engine.evaluator.protocol import join_inputs
    from engine.platforms.nki.simulator import simulate
    from engine.platforms.nki.simulator.semantics import namespaces
    from tests.versions.digests import _module

    spec = next(s for s in load_suite("nkibench").problems if s.slug == slug)
    role = ReferenceRole({"guards": {"audit": False}})
    loaded, _ = role.load({"source": spec.reference_source(case)}, {})
    plan = plan_distributions(len(seeds), loaded.get("distributions") or DISTRIBUTIONS)
    rendered, rendered_as = [], []  # rendered_as: the distributions rendered (a variant that broke the math became plain)
    started = time.perf_counter()
    for index, (seed, distribution) in enumerate(zip(seeds, plan, strict=True)):
        reply, arrays = role.render({"seed": seed, "distribution": distribution, "index": index}, {})
        rendered.append(join_inputs(reply["input_count"], arrays, reply.get("scalars", [])))
        rendered_as.append(reply["distribution"])
    render_s = time.perf_counter() - started  # inputs and expected outputs, as the reference child makes them
    # What a simulation needs of that: the inputs only (get_inputs, the seed's distribution, the NKI layout),
    # timed apart so a bare run can be charged for making its inputs but not for the expected outputs.
    reference = _module(spec.reference_source(case), f"bare_reference_{slug}")
    to_nki = getattr(reference, "transform_to_nki_inputs", None)
    started, used = time.perf_counter(), time.process_time()
    for seed, distribution in zip(seeds, rendered_as, strict=True):
        np.random.seed(seed)
        random.seed(seed)
        raw = apply_distribution(list(reference.get_inputs()), distribution, seed)
        _ = list(to_nki(raw)) if to_nki else raw
    inputs_s, inputs_cpu_s = time.perf_counter() - started, time.process_time() - used
    del role
    namespaces.install()
    kernel = _module(spec.baseline_for(case), f"bare_{slug}").kernel
    times, cpu = [], []
    for inputs in rendered:
        started, used = time.perf_counter(), time.process_time()
        simulate(kernel, list(inputs), platform=platform, record_trace=True, workers=1)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return {"simulate_s": times, "simulate_cpu_s": cpu, "render_s": render_s, "inputs_s": inputs_s,
            "inputs_cpu_s": inputs_cpu_s}


def _tree_cpu_seconds(pid: int) -> float | None:
    """User and system CPU seconds of `pid` and its descendants, with their reaped children's."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, pending = 0.0, [pid]
    try:
        while pending:
            current = pending.pop()
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15]) / ticks  # utime stime cutime cstime
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError, IndexError):
        return None
    return total


class PhaseClock:
    """Splits the parent's wall time by what it waited for, by wrapping ChildProcess's messaging."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.cpu: dict[str, float] = collections.defaultdict(float)  # CPU seconds of each role's child
        self.cpu_unknown: set[str] = set()  # roles whose CPU time could not be read (no cgroup)
        self._pending: dict[int, tuple[str, float]] = {}

    def install(self) -> None:
        cls = sandbox_process.ChildProcess
        original_init, original_hello = cls.__init__, cls._await_hello
        original_send, original_receive = cls.send, cls.receive
        clock = self

        def init(child: Any, role: str, *args: Any, **kwargs: Any) -> None:
            started = time.perf_counter()
            original_init(child, role, *args, **kwargs)
            clock.seconds["spawn (parent)"] += time.perf_counter() - started

        def await_hello(child: Any) -> None:
            if child._started:
                return original_hello(child)
            started = time.perf_counter()
            try:
                return original_hello(child)
            finally:
                clock.seconds[f"start-up wait: {child.role}"] += time.perf_counter() - started
                clock.seconds["_hello"] += time.perf_counter() - started

        # The time inside send() and inside receive() goes to the request's role and operation; what the
        # parent does between them (another child's request, its checks) is counted where it belongs.
        def send(child: Any, header: dict[str, Any], arrays: Any = None) -> None:
            op = "run (record)" if header.get("record") else header.get("op", "?")
            name = f"{child.role}: {op}"
            clock._pending[id(child)] = name
            started = time.perf_counter()
            try:
                return original_send(child, header, arrays)
            finally:
                clock.seconds[name] += time.perf_counter() - started

        def receive(child: Any, **kwargs: Any) -> Any:
            clock.seconds.pop("_hello", None)
            started = time.perf_counter()
            try:
                return original_receive(child, **kwargs)
            finally:
                name = clock._pending.pop(id(child), f"{child.role}: ?")
                hello = clock.seconds.pop("_hello", 0.0)
                clock.seconds[name] += time.perf_counter() - started - hello

        original_kill = cls.kill

        def kill(child: Any) -> None:
            # A child's CPU time, read from /proc just before it is killed: every process under its sandbox's
            # leader, with what they reaped (a killed child is reaped by its PID namespace's end, not by us).
            if child.proc.returncode is None:
                seconds = _tree_cpu_seconds(child.proc.pid)
                if seconds is None:
                    clock.cpu_unknown.add(child.role)
                else:
                    clock.cpu[child.role] += seconds
            original_kill(child)

        cls.kill = kill
        cls.__init__, cls._await_hello, cls.send, cls.receive = init, await_hello, send, receive

    def take(self) -> tuple[dict[str, float], dict[str, float]]:
        out = {k: round(v, 3) for k, v in self.seconds.items() if not k.startswith("_")}
        cpu = {k: round(v, 3) for k, v in self.cpu.items()}
        if self.cpu_unknown:
            cpu["unknown for"] = sorted(self.cpu_unknown)  # type: ignore[assignment]
        self.seconds.clear()
        self.cpu.clear()
        self.cpu_unknown.clear()
        return out, cpu


def evaluation(spec: Any, case: str, platform: str, clock: PhaseClock) -> dict[str, Any]:
    counts = spec.peak_counts(case)
    started, parent_cpu = time.perf_counter(), time.process_time()
    result = evaluate(spec.baseline_for(case), spec.reference_source(case), platform=platform,
                      peak_counts=(counts.vector_flops, counts.matmul_flops, counts.hbm_bytes) if counts else None,
                      tolerance=spec.tolerance, seeds=SEEDS, limits=LIMITS[case])
    wall, parent_cpu = time.perf_counter() - started, time.process_time() - parent_cpu
    phases, cpu = clock.take()
    phases["parent's own work"] = round(wall - sum(phases.values()), 3)
    cpu["parent"] = round(parent_cpu, 3)
    return {"wall_s": round(wall, 3), "cpu_s": round(sum(v for v in cpu.values() if isinstance(v, float)), 3), "correct": result.correct,
            "error": result.error_message[:200], "phases": phases, "cpu": cpu}


def compare_trees(old: Path, new: Path, case: str, platform: str, slugs: list[str], rounds: int) -> None:
    """Both checkouts' evaluation_phases.py, one problem at a time, interleaved (see the module's doc)."""
    runs: dict[tuple[str, str], dict[str, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    verdicts: dict[str, set[tuple[bool, str]]] = collections.defaultdict(set)
    trees = {"old": old.resolve(), "new": new.resolve()}
    for round_ in range(rounds):
        for slug in slugs:
            for name in (("old", "new") if round_ % 2 == 0 else ("new", "old")):
                proc = subprocess.run([sys.executable, "measurements/evaluation_phases.py", "--case", case,
                                       "--platform", platform, "--only", slug], cwd=trees[name],
                                      capture_output=True, text=True)
                if proc.returncode != 0:
                    raise SystemExit(f"{name} tree, {slug}:\n{proc.stderr[-3000:]}")
                for line in proc.stdout.splitlines():
                    if not line.startswith("{"):
                        continue
                    row = json.loads(line)
                    got = runs[(slug, name)]
                    if "wall_s" in row:
                        verdicts[slug].add((row["correct"], row["error"]))
                        if len(verdicts[slug]) > 1:
                            raise SystemExit(f"{slug}: the trees' verdicts differ: {sorted(verdicts[slug])}")
                        got["eval"].append(row["wall_s"])
                        got["eval_cpu"].append(row["cpu_s"])
                    else:
                        got["bare"].append(sum(row["simulate_s"]))
                        got["bare_cpu"].append(sum(row["simulate_cpu_s"]))
                print(json.dumps({"round": round_ + 1, "tree": name, "problem": slug,
                                  **{k: v[-1] for k, v in runs[(slug, name)].items()}}), flush=True)
    print("\n| problem | old evaluation s (CPU s) | new evaluation s (CPU s) | new/old wall | new/old CPU "
          "| old / bare wall (CPU) | new / bare wall (CPU) |\n| --- | --- | --- | --- | --- | --- | --- |")
    sums: dict[str, float] = collections.defaultdict(float)
    for slug in slugs:
        m = {name: {k: statistics.median(v) for k, v in runs[(slug, name)].items()} for name in trees}
        for name in trees:
            for key, value in m[name].items():
                sums[f"{name} {key}"] += value
        mark = "" if next(iter(verdicts[slug]))[0] else " (incorrect in both)"
        print(f"| {slug}{mark} | {m['old']['eval']:.2f} ({m['old']['eval_cpu']:.2f}) | {m['new']['eval']:.2f} "
              f"({m['new']['eval_cpu']:.2f}) | {m['new']['eval'] / m['old']['eval']:.2f} | "
              f"{m['new']['eval_cpu'] / m['old']['eval_cpu']:.2f} | "
              + " | ".join(f"{m[n]['eval'] / m[n]['bare']:.2f} ({m[n]['eval_cpu'] / m[n]['bare_cpu']:.2f})"
                           for n in ("old", "new")) + " |")
    print(f"\nsums of per-problem medians over {len(slugs)} problems, {rounds} rounds: evaluation old "
          f"{sums['old eval']:.1f} s (CPU {sums['old eval_cpu']:.1f} s), new {sums['new eval']:.1f} s (CPU "
          f"{sums['new eval_cpu']:.1f} s): new/old wall {sums['new eval'] / sums['old eval']:.3f}, CPU "
          f"{sums['new eval_cpu'] / sums['old eval_cpu']:.3f}; evaluation / bare: old "
          f"{sums['old eval'] / sums['old bare']:.2f} (CPU {sums['old eval_cpu'] / sums['old bare_cpu']:.2f}), "
          f"new {sums['new eval'] / sums['new bare']:.2f} (CPU {sums['new eval_cpu'] / sums['new bare_cpu']:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", choices=sorted(LIMITS), default="mini")
    parser.add_argument("--platform", default="trn1")
    parser.add_argument("--only", default="", help="comma-separated slugs (default: all 14)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--bare", metavar="SLUG", help=argparse.SUPPRESS)
    parser.add_argument("--trees", nargs=2, type=Path, metavar=("OLD", "NEW"),
                        help="compare two checkouts side by side, interleaved (see above)")
    args = parser.parse_args()
    if args.bare:
        print(json.dumps(bare(args.case, args.bare, SEEDS, args.platform)))
        return
    specs = load_suite("nkibench").problems
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {s.slug for s in specs}
        if unknown:
            raise SystemExit(f"unknown problems {sorted(unknown)}; known: {sorted(s.slug for s in specs)}")
        specs = [s for s in specs if s.slug in wanted]
    if args.trees:
        compare_trees(*args.trees, args.case, args.platform, [s.slug for s in specs], args.rounds)
        return
    clock = PhaseClock()
    clock.install()
    rows = []
    for spec in specs:
        runs: dict[str, list[float]] = collections.defaultdict(list)
        phase_runs = []
        for round_ in range(args.rounds):
            for part in (("bare", "eval") if round_ % 2 == 0 else ("eval", "bare")):
                if part == "bare":
                    proc = subprocess.run([sys.executable, __file__, "--case", args.case, "--platform",
                                           args.platform, "--bare", spec.slug], capture_output=True, text=True)
                    if proc.returncode != 0:
                        raise SystemExit(f"bare simulation of {spec.slug} failed:\n{proc.stderr[-3000:]}")
                    bare_run = json.loads(proc.stdout.strip().splitlines()[-1])
                    runs["bare"].append(sum(bare_run["simulate_s"]))
                    runs["bare_cpu"].append(sum(bare_run["simulate_cpu_s"]))
                    runs["render"].append(bare_run["render_s"])
                    print(json.dumps({"problem": spec.slug, **{k: [round(t, 3) for t in v] if isinstance(v, list)
                                                               else round(v, 3) for k, v in bare_run.items()}}),
                          flush=True)
                else:
                    row = evaluation(spec, args.case, args.platform, clock)
                    runs["eval"].append(row["wall_s"])
                    runs["eval_cpu"].append(row["cpu_s"])
                    phase_runs.append(row["phases"])
                    print(json.dumps({"problem": spec.slug, **row}), flush=True)
        phases = {name: statistics.median(run.get(name, 0.0) for run in phase_runs)
                  for name in {n for run in phase_runs for n in run}}
        rows.append((spec.slug, {k: statistics.median(v) for k, v in runs.items()}, phases))
    print(f"\n| problem | bare: {len(SEEDS)} simulations s (CPU s) | rendering their inputs s | evaluation s (CPU s) "
          "| wall ratio | CPU ratio |\n| --- | --- | --- | --- | --- | --- |")
    for slug, m, _ in rows:
        print(f"| {slug} | {m['bare']:.2f} ({m['bare_cpu']:.2f}) | {m['render']:.2f} | {m['eval']:.2f} "
              f"({m['eval_cpu']:.2f}) | {m['eval'] / m['bare']:.2f} | {m['eval_cpu'] / m['bare_cpu']:.2f} |")
    total = {key: sum(m[key] for _, m, _ in rows) for key in ("bare", "bare_cpu", "render", "eval", "eval_cpu")}
    print(f"\nsum over {len(rows)} problems: bare {total['bare']:.1f} s (CPU {total['bare_cpu']:.1f} s), evaluation "
          f"{total['eval']:.1f} s (CPU {total['eval_cpu']:.1f} s): wall ratio {total['eval'] / total['bare']:.2f}, "
          f"CPU ratio {total['eval_cpu'] / total['bare_cpu']:.2f}; against the simulations plus rendering their "
          f"inputs: {total['eval'] / (total['bare'] + total['render']):.2f}")
    totals: dict[str, float] = collections.defaultdict(float)
    for *_, phases in rows:
        for name, seconds in phases.items():
            totals[name] += seconds
    print("\n| phase (sum of per-problem medians) | s | share of evaluation |\n| --- | --- | --- |")
    for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {seconds:.2f} | {seconds / total['eval']:.0%} |")

if __name__ == "__main__":
    main()
