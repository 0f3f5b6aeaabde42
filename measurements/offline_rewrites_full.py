"""What each offline rewrite is worth at full size: one level of the catalog on each NKIBench baseline.

    nice -n 10 .venv/bin/python measurements/offline_rewrites_full.py [--case full] [--problems silu,adamw]
        [--rewrites hoist_invariant_loads,...] [--sites 3] [--kernel path.py --problems silu]

For each problem: the baseline is simulated once (trn1, in a child process, one seed, the reference's
`get_inputs` after `np.random.seed(0)`) and priced by the performance model; then every site of every
rewrite (up to `--sites` per rewrite) is applied and simulated the same way. Prints one JSON line per
kernel and a Markdown table: per rewrite, its best predicted speedup on each problem and whether the
output still matches the reference (relative L2 within the problem's tolerance). This is a quick screen,
not the verified pipeline (no sandbox, one seed): the campaign's evaluations are the numbers that count.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from engine.platforms.nki.rewrites import CATALOG  # noqa: E402
from engine.platforms.nki.suites.loader import load_suite  # noqa: E402


def _module(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def run_child(slug: str, case: str, kernel_path: str) -> dict:
    """Simulate one kernel on one problem's case; its predicted latency and relative L2 error."""
    from engine.evaluator.checks import relative_l2
    from engine.platforms.nki.perf import estimate
    from engine.platforms.nki.simulator import install, simulate

    install()
    spec = load_suite("nkibench").problem(slug)
    ref = _module(spec.reference_source(case), "reference")
    np.random.seed(0)
    inputs = ref.get_inputs()
    kernel = _module(Path(kernel_path).read_text(), "kernel")
    fn = getattr(kernel, "optimized_kernel", None) or kernel.kernel
    started = time.perf_counter()
    sim = simulate(fn, list(ref.transform_to_nki_inputs(inputs)), platform="trn1", workers=1)
    sim_s = time.perf_counter() - started
    expected = ref.forward(*inputs)
    got = ref.transform_nki_outputs(sim.outputs[0] if len(sim.outputs) == 1 else sim.outputs, expected)
    refs = expected if isinstance(expected, tuple) else (expected,)
    error = max(relative_l2(np.asarray(g), np.asarray(r)) for g, r in zip(got, refs, strict=False))
    report = estimate(sim.trace, "trn1")
    return {"latency_ms": report.latency_ms, "rel_l2": error, "ok": error <= spec.tolerance,
            "instructions": sim.instructions, "sim_s": sim_s}


def measure(slug: str, case: str, source: str, timeout: float) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", slug, case, handle.name],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    finally:
        Path(handle.name).unlink(missing_ok=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="full")
    parser.add_argument("--problems", default="")
    parser.add_argument("--rewrites", default="", help="comma-separated rewrite names (default: the catalog)")
    parser.add_argument("--sites", type=int, default=3, help="sites tried per rewrite and problem")
    parser.add_argument("--kernel", default="", help="measure this kernel file instead of the baseline's rewrites")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(*args.child)))
        return
    problems = load_suite("nkibench").problems
    wanted = {p for p in args.problems.split(",") if p}
    names = {r for r in args.rewrites.split(",") if r}
    rewrites = [r for r in CATALOG if not names or r.name in names]
    table: dict[str, dict[str, str]] = {}
    started = time.monotonic()
    for spec in problems:
        if wanted and spec.slug not in wanted:
            continue
        if args.kernel:
            print(json.dumps({"problem": spec.slug, "kernel": args.kernel,
                              **measure(spec.slug, args.case, Path(args.kernel).read_text(), args.timeout)}), flush=True)
            continue
        source = spec.baseline_for(args.case)
        base = measure(spec.slug, args.case, source, args.timeout)
        print(json.dumps({"problem": spec.slug, "rewrite": "baseline", **base}), flush=True)
        row = table.setdefault(spec.slug, {})
        if "latency_ms" not in base:
            continue
        for rewrite in rewrites:
            best = ""
            for index, site in enumerate(rewrite.sites(source)[: args.sites]):
                result = measure(spec.slug, args.case, rewrite.apply(source, index), args.timeout)
                speedup = base["latency_ms"] / result["latency_ms"] if "latency_ms" in result else math.nan
                print(json.dumps({"problem": spec.slug, "rewrite": rewrite.name, "site": index,
                                  "where": site.description, "speedup": speedup, **result}), flush=True)
                cell = f"{speedup:.3f}" + ("" if result.get("ok") else " (wrong)" if "ok" in result else " (error)")
                if not best or (result.get("ok") and speedup > float(best.split()[0] or 0)):
                    best = cell
            row[rewrite.name] = best or "—"
    if table:
        print(f"\nwall {time.monotonic() - started:.0f} s\n")
        print("| problem | " + " | ".join(r.name for r in rewrites) + " |")
        print("| --- " * (len(rewrites) + 1) + "|")
        for slug, row in table.items():
            print(f"| {slug} | " + " | ".join(row.get(r.name, "—") for r in rewrites) + " |")


if __name__ == "__main__":
    main()
