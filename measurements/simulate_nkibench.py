"""Run NKIBench kernels through the NKI CPU simulator and compare with their numpy references.

    .venv/bin/python measurements/simulate_nkibench.py /path/to/AccelOpt/NKIBench [--problems silu,matmul] [--workers 1]

NKIBench's layout: `summary.json` maps each problem to a reference file (get_inputs, forward,
transform_to_nki_inputs, transform_nki_outputs) and a kernel file. Each problem runs in two child
processes (simulation, reference) so their wall time and peak RSS are measured separately; the
simulation splits top-level affine loops across two processes unless `--workers 1` (its CPU time then
includes the forked children). Prints one JSON line per problem and a Markdown table at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 2e-5  # NKIBench's relative L2 tolerance for fp32


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cases(root: Path) -> list[tuple[str, Path, Path]]:
    summary = json.loads((root / "summary.json").read_text())
    out = []
    for problem, entry in summary.items():
        for case in entry["cases"].values():
            for impl in case["impls"]:
                out.append((problem, root / impl["task"], root / impl["kernel"]))
    return out


def _peak_rss_mb() -> float:
    """The process's peak resident set (VmHWM, which `_warm_memory` resets), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _warm_memory(gib: float) -> None:
    """Touch and free `gib` GiB before the timed part, then reset the peak-RSS mark.

    On this VM the first process to touch memory the guest has not used for a while pays for the host
    backing it: 2 s per GiB, against 0.13 s per GiB for memory another process freed a moment before
    (measured: the same 1 GiB fill, three processes in a row, 2.02 s then 0.16 s then 0.13 s wall). The
    simulation child runs first and the reference child right after it, so without this the simulator
    paid for the host's page faults and the reference mostly did not. Warming both makes them equal."""
    if gib <= 0:
        return
    buf = np.ones(int(gib * 2**30), dtype=np.uint8)
    del buf
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM
    except OSError:
        pass


def run_child(part: str, reference: Path, kernel: Path, trace: bool, warm_gib: float = 0.0,
              workers: int = 1) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    ref = _load(reference, "nkibench_reference")
    np.random.seed(0)
    inputs = ref.get_inputs()
    _warm_memory(warm_gib)
    if part == "ref":
        start, cpu = time.perf_counter(), time.process_time()
        ref.forward(*inputs)
        return {"ref_s": time.perf_counter() - start, "ref_cpu_s": time.process_time() - cpu,
                "ref_rss_mb": _peak_rss_mb()}
    from engine.platforms.nki.simulator import install, simulate

    install()
    nki_inputs = list(ref.transform_to_nki_inputs(inputs))
    mod = _load(kernel, "nkibench_kernel")
    fn = getattr(mod, "optimized_kernel", None) or mod.kernel
    base_rss = _peak_rss_mb()
    start, cpu = time.perf_counter(), time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    sim = simulate(fn, nki_inputs, record_trace=trace, workers=workers)
    wall = time.perf_counter() - start
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of this process and of the split loops' children (`workers`): what the two cores did together.
    cpu = time.process_time() - cpu + (ended.ru_utime + ended.ru_stime - children.ru_utime - children.ru_stime)
    sim_rss = _peak_rss_mb()  # before the reference runs in this process: the simulator's own peak
    # A split loop's child starts as a copy of this process (pages shared until written): its peak
    # counts those shared pages again, so parent + child overstates the memory the two really used.
    child_rss = ended.ru_maxrss / 1024.0 if workers > 1 else 0.0
    outs = sim.outputs[0] if len(sim.outputs) == 1 else sim.outputs
    instructions, trace_mb = sim.instructions, sim.trace.nbytes() / 2**20
    rerun, fallback = sim.rerun_without_recycling, sim.parallel_fallback
    del sim, nki_inputs
    expected = ref.forward(*inputs)
    got = ref.transform_nki_outputs(outs, expected)
    refs = expected if isinstance(expected, tuple) else (expected,)
    errors = []
    for g, r in zip(got, refs, strict=False):
        g = np.asarray(g, dtype=np.float64)
        r = np.asarray(r, dtype=np.float64)
        errors.append(float(np.linalg.norm(g - r) / np.linalg.norm(r)))
    return {"sim_s": wall, "sim_cpu_s": cpu, "sim_rss_mb": sim_rss, "rss_before_sim_mb": base_rss,
            "instructions": instructions, "trace_mb": trace_mb, "rel_l2": max(errors), "rerun": rerun,
            "sim_child_rss_mb": child_rss, "parallel_fallback": fallback}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("nkibench", type=Path, help="the NKIBench directory (with summary.json)")
    parser.add_argument("--problems", default="", help="comma-separated problem names (default: all)")
    parser.add_argument("--no-trace", action="store_true", help="simulate without recording the trace")
    parser.add_argument("--warm-gib", type=float, default=4.0,
                        help="GiB each child touches and frees before timing, so that neither pays for the "
                             "VM's first-touch page faults (0: as before 2026-12-03, simulation child first and cold)")
    parser.add_argument("--workers", type=int, default=2,
                        help="processes the simulator may use (2: top-level affine loops run in two halves, as "
                             "the reference's BLAS uses both cores; 1: one process, as in the evaluation sandbox)")
    parser.add_argument("--child", nargs=3, metavar=("PART", "REFERENCE", "KERNEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        part, reference, kernel = args.child
        print(json.dumps(run_child(part, Path(reference), Path(kernel), not args.no_trace, args.warm_gib,
                                   args.workers)))
        return
    wanted = {p for p in args.problems.split(",") if p}
    rows = []
    for problem, reference, kernel in _cases(args.nkibench.resolve()):
        if wanted and problem not in wanted:
            continue
        row: dict[str, Any] = {"problem": problem}
        for part in ("sim", "ref"):
            cmd = [sys.executable, __file__, str(args.nkibench), "--child", part, str(reference), str(kernel)]
            if args.no_trace:
                cmd.append("--no-trace")
            cmd += ["--warm-gib", str(args.warm_gib), "--workers", str(args.workers)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                row[f"{part}_error"] = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
                continue
            row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        if "sim_s" in row and "ref_s" in row:
            row["ratio"] = row["sim_s"] / row["ref_s"]
            row["cpu_ratio"] = row["sim_cpu_s"] / row["ref_cpu_s"]
            row["ok"] = row["rel_l2"] <= TOLERANCE
        print(json.dumps(row), flush=True)
        rows.append(row)
    print()
    print("| problem | rel L2 | ok | instructions | sim wall s | ref wall s | wall ratio | sim CPU s | ref CPU s "
          "| CPU ratio | sim peak RSS MB | its child's MB | trace MB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "sim_s" not in r:
            print(f"| {r['problem']} | error: {r.get('sim_error', '')} | no | | | | | | | | | | |")
            continue
        print(f"| {r['problem']} | {r['rel_l2']:.2e} | {'yes' if r.get('ok') else 'no'} | {r['instructions']} | "
              f"{r['sim_s']:.2f} | {r.get('ref_s', float('nan')):.2f} | {r.get('ratio', float('nan')):.2f} | "
              f"{r['sim_cpu_s']:.2f} | {r.get('ref_cpu_s', float('nan')):.2f} | "
              f"{r.get('cpu_ratio', float('nan')):.2f} | {r['sim_rss_mb']:.0f} | {r.get('sim_child_rss_mb', 0):.0f} | "
              f"{r['trace_mb']:.1f} |")
    done = [r for r in rows if "sim_s" in r and "ref_s" in r]
    if done:
        for label, sim_key, ref_key in (("wall", "sim_s", "ref_s"), ("CPU", "sim_cpu_s", "ref_cpu_s")):
            sim_total = sum(r[sim_key] for r in done)
            ref_total = sum(r[ref_key] for r in done)
            print(f"\nsum over {len(done)} problems ({label}): simulator {sim_total:.1f} s, references "
                  f"{ref_total:.1f} s, ratio {sim_total / ref_total:.2f}")


if __name__ == "__main__":
    main()
