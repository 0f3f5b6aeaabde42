"""GPU check (issue 24; the issue says benchmarks/gpu_check.py, our folder is measurements/ since issue 17):
evaluate FlashInfer-Bench problems' references and Triton solutions on one NVIDIA GPU with the cuda backend's
method, and print latency, spread, fraction of peak and speedup per kernel.

Needs only Python 3, numpy, PyTorch and Triton (no Django, no sandbox: our own script, run on our own machine,
so the reference and the kernels share this process). The repository root is put on sys.path and
`engine.platforms.triton` imported directly.

    PYTHONUNBUFFERED=1 python3 measurements/gpu_check.py --out gpu.json
    python3 measurements/gpu_check.py --solutions DIR --out gpu.json   # also FIB solution JSONs under DIR
    python3 measurements/gpu_check.py --interpret                      # no GPU: correctness, small shapes

Built in: rmsnorm_h128 (batch 520,128), fused_add_rmsnorm_h7168 (batch 14,521), gemm_n28672_k4096 (M 8,192,
fp16; the reference is torch.matmul, i.e. cuBLAS), each with our Triton solution and the torch reference.
`--solutions DIR` adds every FlashInfer-Bench solution JSON under DIR whose definition we have (ours, or
DIR/../definitions and DIR/../workloads as in FlashInfer-Bench's and AccelOpt's layouts).
`--budget-s` (default 200) bounds the run: once past it, the remaining items are skipped and listed.
The JSON (--out) is rewritten after every item, so an interrupted run leaves what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--budget-s", type=float, default=200.0, help="skip the remaining items past this (default 200)")
    parser.add_argument("--solutions", type=Path, help="also evaluate the FlashInfer-Bench solution JSONs under this folder")
    parser.add_argument("--definitions", type=Path, help="definition JSONs for --solutions (default: DIR/../definitions)")
    parser.add_argument("--workloads", type=Path, help="workload JSONs for --solutions (default: DIR/../workloads)")
    parser.add_argument("--only", default="", help="only items whose definition name contains this")
    parser.add_argument("--seeds", type=int, default=1, help="correctness seeds per item (default 1)")
    parser.add_argument("--gpu-spec", choices=("auto", "h100", "h200"), default="auto",
                        help="whose documented peaks the roofline uses (default: from the device name)")
    parser.add_argument("--interpret", action="store_true",
                        help="no GPU: Triton's CPU interpreter on small workloads, correctness only")
    args = parser.parse_args(argv)
    if args.budget_s <= 0:
        parser.error("--budget-s must be > 0")
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    if args.solutions is not None and not args.solutions.is_dir():
        parser.error(f"--solutions {args.solutions}: not a folder")
    return args


def build_items(args: argparse.Namespace) -> tuple[list[tuple], list[str]]:
    """(definition, workload, solution, label) per item, and what could not be set up (with why)."""
    from engine.platforms.triton import catalog
    from engine.platforms.triton.flashinfer import FormatError, load_solution
    from engine.platforms.triton.machine import json_files, read_problem_files, shrink

    names = catalog.SMALL_WORKLOADS if args.interpret else catalog.GPU_WORKLOADS
    definitions = {}
    workloads: dict[str, list] = {}
    items: list[tuple] = []
    problems: list[str] = []
    for name in names:
        workload = catalog.workload(name)
        definition = catalog.definition(workload.definition)
        definitions[definition.name] = definition
        workloads.setdefault(definition.name, []).append(workload)
        items.append((definition, workload, catalog.solution(definition.name), f"ours:{definition.name}"))
    if args.solutions is not None:
        root = args.solutions.resolve()
        found, found_workloads, unreadable = read_problem_files(args.definitions or root.parent / "definitions",
                                                                args.workloads or root.parent / "workloads")
        problems.extend(unreadable)
        for name, d in found.items():
            definitions.setdefault(name, d)
        for name, listed in found_workloads.items():
            workloads.setdefault(name, []).extend(listed)
        for path in json_files(root):
            try:
                solution = load_solution(path)
            except (FormatError, KeyError, TypeError) as exc:
                problems.append(f"{path}: not a solution ({exc})")
                continue
            if solution.language != "triton":
                problems.append(f"{path.name}: language {solution.language!r}, not triton")
            elif solution.definition not in definitions or not workloads.get(solution.definition):
                problems.append(f"{path.name}: no definition or workload for {solution.definition!r}")
            else:
                workload = workloads[solution.definition][0]
                if args.interpret:
                    workload = shrink(workload)
                items.append((definitions[solution.definition], workload, solution,
                              f"{solution.author or 'fib'}:{solution.name}"))
    if args.only:
        items = [item for item in items if args.only in item[0].name]
    return items, problems


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_row(label: str, r) -> None:
    peak = None if r.peak_fraction is None else 100 * r.peak_fraction
    ref_peak = None if r.reference_peak_fraction is None else 100 * r.reference_peak_fraction
    print(f"{label[:44]:44} {r.status:18} {_fmt(r.latency_ms, '9.4f')} {_fmt(r.spread, '7.2%')} "
          f"{_fmt(r.reference_ms, '9.4f')} {_fmt(r.speedup, '7.2f')} {_fmt(r.floor_ms, '9.4f')} "
          f"{_fmt(peak, '6.1f')} {_fmt(ref_peak, '6.1f')}  {r.seconds:5.1f}s", flush=True)
    if r.message and r.status != "correct":
        print(f"    {r.message.splitlines()[0][:200]}", flush=True)


HEADER = (f"{'kernel':44} {'status':18} {'lat ms':>9} {'spread':>7} {'ref ms':>9} {'speedup':>7} "
          f"{'floor ms':>9} {'%peak':>6} {'ref%pk':>6}  time")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    started = time.monotonic()
    try:
        import torch
    except ImportError:
        print("gpu_check: PyTorch is not installed; it needs numpy, torch and triton", file=sys.stderr)
        return 2
    if not args.interpret and not torch.cuda.is_available():
        print("gpu_check: no NVIDIA GPU visible to PyTorch (torch.cuda.is_available() is False; torch "
              f"{torch.__version__}). Run it on a GPU machine, or pass --interpret for a CPU correctness check.",
              file=sys.stderr)
        return 2
    import tempfile

    from engine.platforms.triton.local import evaluate_case
    from engine.platforms.triton.machine import roofline_spec
    from engine.platforms.triton.timing import gpu_environment

    device = "cpu" if args.interpret else "cuda"
    environment = {"mode": "interpret" if args.interpret else "cuda", "python": sys.version.split()[0]}
    spec = None
    if not args.interpret:
        environment.update(gpu_environment())
        spec, notes = roofline_spec(environment["gpu"], args.gpu_spec)
        environment.update(notes)
    print(f"gpu_check: {json.dumps(environment)}", flush=True)
    items, problems = build_items(args)
    for problem in problems:
        print(f"  not evaluated: {problem}", flush=True)
    report: dict = {"environment": environment, "budget_s": args.budget_s, "results": [], "skipped": [],
                    "not_evaluated": problems}

    def save() -> None:
        report["elapsed_s"] = round(time.monotonic() - started, 1)
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")

    print(HEADER, flush=True)
    print("  (ref = the definition's torch reference, for gemm torch.matmul, i.e. cuBLAS; %peak = roofline floor "
          "/ latency)", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as scratch:
        for index, (definition, workload, solution, label) in enumerate(items):
            if time.monotonic() - started > args.budget_s:
                report["skipped"] = [item[3] for item in items[index:]]
                print(f"budget of {args.budget_s:.0f} s spent: skipped {', '.join(report['skipped'])}", flush=True)
                break
            try:
                result = evaluate_case(definition, workload, solution, workdir=Path(scratch) / str(index),
                                       device=device, seeds=tuple(range(args.seeds)), gpu=spec,
                                       time_it=not args.interpret, name=label)
            except Exception as exc:  # one broken item must not end the run
                print(f"{label}: crashed: {type(exc).__name__}: {exc}", flush=True)
                report["results"].append({"solution": label, "status": "crashed", "message": str(exc)})
                save()
                continue
            print_row(label, result)
            report["results"].append(result.to_dict())
            save()
            if device == "cuda":
                torch.cuda.empty_cache()
    save()
    print(f"gpu_check: {len(report['results'])} evaluated, {len(report['skipped'])} skipped in "
          f"{report['elapsed_s']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
