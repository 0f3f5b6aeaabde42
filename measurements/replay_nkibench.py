"""Record each NKIBench kernel's program once, then replay it: size of the program, time to record and replay.

    .venv/bin/python measurements/replay_nkibench.py                       # the 14 mini cases of our suite
    .venv/bin/python measurements/replay_nkibench.py /path/to/AccelOpt/NKIBench [--problems silu,mamba]

Per problem, in this process, one after another: a plain simulation; a simulation that records the program
(engine.platforms.nki.simulator.verification.program); the checks the verifier runs once per evaluation (structure, bounds, hardware rules
and the cost trace against the program, replay.check_program) with the first replay; a second replay on
other inputs (what every further seed costs); and the program's wire size (JSON header plus constant arrays,
what the kernel child sends). Both replays are compared bit for bit with simulations on the same inputs.
Prints one JSON line per problem and a Markdown table.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _mini_cases(only: set[str]) -> list[tuple[str, Any, Any]]:
    from engine.platforms.nki.suites import load_suite
    from tests.versions.digests import _module

    cases = []
    for spec in load_suite("nkibench").problems:
        if only and spec.slug not in only:
            continue
        reference = _module(spec.reference_source("mini"), f"reference_{spec.slug}")
        kernel = _module(spec.baseline_for("mini"), f"baseline_{spec.slug}").kernel
        cases.append((spec.slug, reference, kernel))
    return cases


def _full_cases(root: Path, only: set[str]) -> list[tuple[str, Any, Any]]:
    from measurements.simulate_nkibench import _cases, _load

    cases = []
    for problem, reference, kernel in _cases(root):
        if only and problem not in only:
            continue
        cases.append((problem, _load(reference, f"reference_{problem}"), _load(kernel, f"kernel_{problem}").kernel))
    return cases


def _inputs(reference: Any, seed: int) -> list[Any]:
    np.random.seed(seed)
    random.seed(seed)
    raw = list(reference.get_inputs())
    to_nki = getattr(reference, "transform_to_nki_inputs", None)
    return list(to_nki(raw)) if to_nki else raw


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(np.asarray(x).dtype == np.asarray(y).dtype and np.asarray(x).shape == np.asarray(y).shape
                                    and np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes()
                                    for x, y in zip(a, b, strict=True))


def measure(problem: str, reference: Any, kernel: Any) -> dict[str, Any]:
    from engine.platforms.nki.simulator import simulate
    from engine.platforms.nki.simulator.verification.program import wire
    from engine.platforms.nki.simulator.verification.replay import check_program, replay

    first, second = _inputs(reference, 0), _inputs(reference, 1)
    started = time.perf_counter()
    simulate(kernel, first)
    plain_s = time.perf_counter() - started
    gc.collect()
    started = time.perf_counter()
    sim = simulate(kernel, first, record_program=True)
    record_s = time.perf_counter() - started
    header, arrays = wire(sim.program)
    text = json.dumps(header, allow_nan=True)
    started = time.perf_counter()
    check_program(sim.program, "trn1", sim.trace)
    check_s = time.perf_counter() - started
    started = time.perf_counter()
    replayed = replay(sim.program, first, trace=sim.trace, checked=True)
    first_replay_s = time.perf_counter() - started
    same_first = _same(sim.outputs, replayed.outputs)
    del replayed
    started = time.perf_counter()
    replayed = replay(sim.program, second, checked=True)
    replay_s = time.perf_counter() - started
    same_second = _same(simulate(kernel, second).outputs, replayed.outputs)
    return {"problem": problem, "instructions": len(sim.program), "buffers": len(sim.program.buffers),
            "program_json_bytes": len(text), "program_array_bytes": int(sum(a.nbytes for a in arrays.values())),
            "simulate_s": round(plain_s, 3), "record_s": round(record_s, 3), "check_s": round(check_s, 3),
            "first_replay_s": round(first_replay_s, 3), "replay_s": round(replay_s, 3),
            "bit_identical": bool(same_first and same_second)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("nkibench", nargs="?", type=Path, help="AccelOpt's NKIBench directory (full cases)")
    parser.add_argument("--problems", default="", help="comma-separated problems")
    args = parser.parse_args()
    from engine.platforms.nki.simulator.semantics import namespaces

    namespaces.install()
    only = {p for p in args.problems.split(",") if p}
    cases = _full_cases(args.nkibench, only) if args.nkibench else _mini_cases(only)
    rows = []
    for problem, reference, kernel in cases:
        row = measure(problem, reference, kernel)
        print(json.dumps(row), flush=True)
        rows.append(row)
        gc.collect()
    print("\n| Problem | Instructions | Program (JSON + arrays) | Simulate | Record | Check + first replay | Replay | "
          "Bit-identical |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        size = (r["program_json_bytes"] + r["program_array_bytes"]) / 2**20
        print(f"| {r['problem']} | {r['instructions']:,} | {size:.2f} MiB | {r['simulate_s']:.2f} s | "
              f"{r['record_s']:.2f} s | {r['check_s'] + r['first_replay_s']:.2f} s | {r['replay_s']:.2f} s | "
              f"{'yes' if r['bit_identical'] else 'NO'} |")


if __name__ == "__main__":
    main()
