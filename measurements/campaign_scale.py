"""Campaign scale (issue 38): evaluations per CPU-hour, and the wall time of one NKIBench problem at AccelOpt's
published configuration (beam 6, 12 plans, 2 samples, 16 iterations) with the offline agent, with the local
executor and on Ray with one and with two local worker nodes.

    nice -n 10 .venv/bin/python measurements/campaign_scale.py rate [--case full] [--problems silu,matmul]
    nice -n 10 .venv/bin/python measurements/campaign_scale.py search --problem rmsnorm_matmul:full \\
        [--executor local|ray1|ray2] [--minutes 15] [--iterations 16 --beam 6 --plans 12 --samples 2]

`rate`: each problem's baseline evaluated as the product does it (3 fixed seeds, sandboxed, verified), one at
a time; the CPU seconds of the parent and of every sandboxed child (read from /proc before each is killed,
measurements/evaluation_phases.py) give evaluations per CPU-hour; the wall seconds are reported beside them.

`search`: a fresh SQLite database (migrated, the NKIBench problems loaded, no baseline evaluated), then
`manage.py optimize` with the offline agent and the configuration given, timed from start to end. `--minutes`
caps it with the run's own wall-time budget (it stops cleanly between steps), so what a slow machine can do
is measured, not projected: the run's own lines say how far each iteration got (one the budget cut short is
reported with the candidates judged before the stop), the SUMMARY line how many evaluations ran. `ray1`/`ray2` start a Ray head that runs nothing (--num-cpus=0) and one or two worker nodes
of one CPU each on this machine (deploy/local.py) and point the run at them (ACCELOPT_RAY_ADDRESS); `local`
uses the local executor (ACCELOPT_EVALUATION_WORKERS, 2 by default). Run the three one after the other and
divide: the speed-up per added node.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from deploy.local import PYTHON, prepare_database, site_environment, start_ray_head, start_ray_worker  # noqa: E402

# AccelOpt's published configuration (their paper's NKIBench runs).
ACCELOPT = {"iterations": 16, "beam": 6, "plans": 12, "samples": 2}


def rate(case: str, problems: list[str]) -> None:
    from engine.platforms.nki.suites import load_suite
    from measurements.evaluation_phases import PhaseClock, evaluation

    specs = load_suite("nkibench").problems
    if problems:
        unknown = set(problems) - {s.slug for s in specs}
        if unknown:
            raise SystemExit(f"unknown problems {sorted(unknown)}; known: {sorted(s.slug for s in specs)}")
        specs = [s for s in specs if s.slug in problems]
    clock = PhaseClock()
    clock.install()
    cpu, wall = [], []
    for spec in specs:
        row = evaluation(spec, case, "trn1", clock)
        if "unknown for" in row["cpu"]:
            raise SystemExit(f"could not read the CPU time of {row['cpu']['unknown for']} for {spec.slug}")
        cpu.append(row["cpu_s"])
        wall.append(row["wall_s"])
        print(json.dumps({"problem": spec.slug, "case": case, "correct": row["correct"], "wall_s": row["wall_s"],
                          "cpu_s": row["cpu_s"], "cpu_by_process": row["cpu"]}), flush=True)
    print(f"{len(cpu)} {case} evaluations: {sum(cpu):.1f} CPU s in all (median {statistics.median(cpu):.2f} s, "
          f"{min(cpu):.2f}-{max(cpu):.2f}), {sum(wall):.1f} s wall one at a time: "
          f"{3600 * len(cpu) / sum(cpu):.0f} evaluations per CPU-hour; load average {os.getloadavg()[0]:.1f}")


def search(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="campaign-scale-"))
    servers = []
    try:
        ray_address = ""
        nodes = {"local": 0, "ray1": 1, "ray2": 2}[args.executor]
        if nodes:
            head, ray_address = start_ray_head(workdir / "ray", num_cpus=0)
            servers.append(head)
            for n in range(nodes):
                servers.append(start_ray_worker(ray_address, workdir / f"ray-worker-{n}.log", num_cpus=1))
        env = site_environment(workdir / "var", f"sqlite:///{workdir / 'db.sqlite3'}", "", ray_address)
        (workdir / "var").mkdir(mode=0o750)
        prepare_database(env)
        command = [PYTHON, "manage.py", "optimize", "--problem", args.problem, "--agent", "offline",
                   "--iterations", str(args.iterations), "--beam", str(args.beam), "--plans", str(args.plans),
                   "--samples", str(args.samples), "--seed", str(args.seed)]
        if args.minutes:
            command += ["--max-wall-time-s", str(args.minutes * 60)]
        started = time.monotonic()
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(f"optimize failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        print(done.stdout.strip(), flush=True)
        # An iteration the budget cut short is reported too, with the candidates judged before the stop.
        iterations = len(re.findall(r"^\s*iteration \d+/\d+:", done.stdout, re.M))
        counts = re.search(r"evaluations: (\d+) at full size, (\d+) on the mini shapes; (\d+) answered from the cache",
                           done.stdout)
        summary = {"problem": args.problem, "executor": args.executor, "ray_worker_nodes": nodes,
                   "configuration": {k: getattr(args, k) for k in ACCELOPT}, "wall_s": round(wall, 1),
                   "iterations_reported": iterations, "stopped_by_budget": "stopped: budget" in done.stdout,
                   "load_average_end": round(os.getloadavg()[0], 1)}
        if counts:
            full, mini, cached = (int(c) for c in counts.groups())
            summary.update(evaluations=full + mini, of_them_on_mini_shapes=mini, answered_from_cache=cached,
                           evaluations_per_minute=round(60 * (full + mini) / wall, 2))
        print("SUMMARY " + json.dumps(summary), flush=True)
    finally:
        for server in reversed(servers):
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parts = parser.add_subparsers(dest="part", required=True)
    rate_parser = parts.add_parser("rate", help="evaluations per CPU-hour")
    rate_parser.add_argument("--case", choices=("mini", "full"), default="mini")
    rate_parser.add_argument("--problems", default="", help="comma-separated slugs (default: all 14)")
    search_parser = parts.add_parser("search", help="one problem at a configuration, timed")
    search_parser.add_argument("--problem", default="rmsnorm_matmul:full")
    search_parser.add_argument("--executor", choices=("local", "ray1", "ray2"), default="local")
    search_parser.add_argument("--minutes", type=float, default=0, help="wall-time budget (0: none)")
    search_parser.add_argument("--seed", type=int, default=0)
    for name, value in ACCELOPT.items():
        search_parser.add_argument(f"--{name}", type=int, default=value)
    args = parser.parse_args()
    if args.part == "rate":
        rate(args.case, [p for p in args.problems.split(",") if p])
    else:
        search(args)


if __name__ == "__main__":
    main()
