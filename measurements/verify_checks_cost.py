"""What the verifier's one-off work costs on full-size NKIBench programs, for the code of a given checkout.

    .venv/bin/python measurements/verify_checks_cost.py TREE PROBLEMS [NKIBENCH]
    .venv/bin/python measurements/verify_checks_cost.py TREE PROBLEMS mini      # our suite's mini cases

TREE: a checkout (or `git archive` of one) whose `benchmark` package is timed; PROBLEMS: comma-separated
slugs; NKIBENCH: AccelOpt's NKIBench folder (default /work/ext/AccelOpt/NKIBench). Per problem, in this
process: one recording simulation, then three times `check_program` plus the first replay with the cost trace
(what the verifier does once per evaluation) and a plain replay (what each further seed costs). Prints one
JSON line per problem with the medians. Run two trees alternately to compare them side by side (docs/benchmarks.md,
"Record, then verify").
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

TREE = str(Path(sys.argv[1]).resolve())
sys.path.insert(0, TREE)


def main() -> None:
    import benchmark
    from engine.platforms.nki.simulator import simulate
    from engine.platforms.nki.simulator.semantics import namespaces
    from engine.platforms.nki.simulator.verification.replay import check_program, replay
    from measurements.replay_nkibench import _full_cases, _inputs, _mini_cases

    if not benchmark.__file__.startswith(TREE):
        raise SystemExit(f"benchmark comes from {benchmark.__file__}, not {TREE}")
    namespaces.install()
    where = sys.argv[3] if len(sys.argv) > 3 else "/work/ext/AccelOpt/NKIBench"
    only = set(sys.argv[2].split(","))
    cases = _mini_cases(only) if where == "mini" else _full_cases(Path(where), only)
    try:  # the outputs check (issue 35) runs once per evaluation too, where the tree has it
        from engine.platforms.nki.simulator.verification.trace_check import check_outputs
    except ImportError:
        check_outputs = None
    for problem, reference, kernel in cases:
        inputs = _inputs(reference, 0)
        sim = simulate(kernel, list(inputs), record_program=True)
        first, plain = [], []
        for _ in range(3):
            started = time.perf_counter()
            check_program(sim.program, "trn1", sim.trace)
            if check_outputs is not None:
                check_outputs(sim.program)
            replay(sim.program, list(inputs), trace=sim.trace, checked=True)
            first.append(time.perf_counter() - started)
            started = time.perf_counter()
            replay(sim.program, list(inputs), checked=True)
            plain.append(time.perf_counter() - started)
        print(json.dumps({"tree": TREE, "problem": problem, "check_first_s": round(statistics.median(first), 3),
                          "replay_s": round(statistics.median(plain), 3)}), flush=True)


if __name__ == "__main__":
    main()
