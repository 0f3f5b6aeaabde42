"""Digests of the simulator's instruction traces and outputs for NKIBench problems, to compare two trees.

    .venv/bin/python measurements/trace_digest.py /path/to/AccelOpt/NKIBench [--problems gqa_full,lora] [--workers 2]

A speed change to the simulator must not change what it computes or what the performance model sees:
run this in both trees (e.g. a `git worktree` of the older commit) and compare the lines. Each line is
`problem trace-digest output-digest`, each a SHA-256 prefix over every trace column (instructions and
access rows), the op names, loop contexts and tensor table, and the raw output bytes. `--workers 2`
simulates with split loops (engine/platforms/nki/simulator/speed/parallel.py), which must print the same lines as `--workers 1`.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simulate_nkibench import _cases, _load  # noqa: E402


def digest(reference: Path, kernel: Path, workers: int = 1) -> tuple[str, str]:
    from engine.platforms.nki.simulator import install, simulate

    ref = _load(reference, "nkibench_reference")
    np.random.seed(0)
    inputs = ref.get_inputs()
    install()
    mod = _load(kernel, "nkibench_kernel")
    fn = getattr(mod, "optimized_kernel", None) or mod.kernel
    sim = simulate(fn, list(ref.transform_to_nki_inputs(inputs)), workers=workers)
    trace = hashlib.sha256()
    for table in (sim.trace.columns, sim.trace.access):
        for name in sorted(table):
            trace.update(name.encode())
            trace.update(np.ascontiguousarray(table[name]).tobytes())
    for part in (sim.trace.op_names, sim.trace.loop_contexts, sim.trace.tensors):
        trace.update(repr(part).encode())
    outputs = hashlib.sha256()
    for out in sim.outputs:
        outputs.update(np.ascontiguousarray(out).tobytes())
    return trace.hexdigest()[:16], outputs.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("nkibench", type=Path, help="the NKIBench directory of an AccelOpt checkout")
    parser.add_argument("--problems", default="", help="comma-separated problem names (default: all)")
    parser.add_argument("--workers", type=int, default=1, help="processes the simulator may use (default 1)")
    args = parser.parse_args()
    wanted = {p for p in args.problems.split(",") if p}
    for problem, reference, kernel in _cases(args.nkibench):
        if wanted and problem not in wanted:
            continue
        print(problem, *digest(reference, kernel, args.workers), flush=True)


if __name__ == "__main__":
    main()
