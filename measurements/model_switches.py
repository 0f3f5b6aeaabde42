"""The performance model's five fidelity numbers under spec variants: each switch of NeuronCoreSpec turned off alone.

    PYTHONPATH=$PWD .venv/bin/python measurements/model_switches.py --nkibench <AccelOpt>/NKIBench \
        --kernel-source neuron-sdk=<aws-neuron-sdk> [--cached-pairs] [--loo] [VARIANT ...]

A VARIANT is FIELD=VALUE[,FIELD=VALUE...] (a JSON value: `psum_reads_on_scalar=false`, `dma_queue_assignment="kind"`);
none: the shipped spec, then every boolean switch of the trn1 spec turned off alone. One JSON line per variant:
training median |log error| and Spearman, leave-one-out (with --loo; minutes per variant), pairs within ±15% and
with the right sign, HBM and engine-share counts, and each problem's log error and pair's predicted / measured.
Traces come from calibrate's cache (var/perf_calibration/, simulated on first use); `--cached-pairs` predicts only
the pairs whose two traces are cached (a full-size pair trace takes minutes to simulate).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platforms.nki.hardware import get_core_spec  # noqa: E402
from engine.platforms.nki.perf import pairs as P  # noqa: E402
from engine.platforms.nki.perf import prepare  # noqa: E402
from engine.platforms.nki.perf.calibration import (  # noqa: E402
    DEFAULT_CACHE,
    DEFAULT_CSV,
    cached_trace,
    compare_case,
    counter_goals,
    discover_cases,
    load_measurements,
    summarize,
)
from engine.platforms.nki.perf.validation import leave_one_out  # noqa: E402


def _variant(text: str) -> dict:
    out = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        out[name] = json.loads(value)
    return out


def _pair_cached(pair: P.Pair, roots: dict[str, Path], cache: Path) -> bool:
    for ref in (pair.slow, pair.fast):
        key = P._trace_key(P.kernel_source(ref, roots), ref, pair, "trn1")
        if not (cache / f"{Path(ref.path).stem}_{ref.function}_{key}.pkl").exists():
            return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nkibench", type=Path, required=True)
    parser.add_argument("--kernel-source", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--cached-pairs", action="store_true", help="only the pairs whose traces are cached")
    parser.add_argument("--loo", action="store_true", help="also leave-one-out (2 rounds)")
    parser.add_argument("variants", nargs="*", help="FIELD=VALUE[,FIELD=VALUE...]")
    args = parser.parse_args()
    base = get_core_spec("trn1")
    roots = {"accelopt": args.nkibench.resolve().parent}
    for item in args.kernel_source:
        name, _, path = item.partition("=")
        roots[name] = Path(path)
    measured = load_measurements(DEFAULT_CSV)
    cases = [c for c in discover_cases(args.nkibench) if c.key in measured]
    prepared = [prepare(cached_trace(c, "trn1", args.cache)[0]) for c in cases]
    pair_cache = args.cache / "pairs"
    chosen = [p for p in P.load_pairs() if p.status == P.SIMULATED
              and (not args.cached_pairs or _pair_cached(p, roots, pair_cache))]
    traces = P.PairTraces(chosen, roots, "trn1", pair_cache, log=lambda m: print(m, file=sys.stderr, flush=True))
    switches = [f.name for f in fields(base) if isinstance(getattr(base, f.name), bool) and getattr(base, f.name)]
    variants = args.variants or ["", *(f"{name}=false" for name in switches)]
    for text in variants:
        t0 = time.perf_counter()
        spec = replace(base, **_variant(text)) if text else base
        results = [compare_case(c, p, spec, measured[c.key]) for c, p in zip(cases, prepared, strict=True)]
        hbm, engines, compared = counter_goals(results)
        train, rho = summarize(results)
        predicted = [r for r in P.predict_pairs(traces, spec) if r.predicted is not None]
        row = {"variant": text or "shipped", "training": [round(train, 3), round(rho, 3)],
               "pairs_within_15pct": sum(abs(r.ratio - 1) <= 0.15 for r in predicted),
               "pairs_sign_right": sum(bool(r.sign_right) for r in predicted), "pairs": len(predicted),
               "pairs_median": round(float(np.median([abs(math.log(r.ratio)) for r in predicted])), 3)
               if predicted else None,
               "hbm": hbm, "engines": engines, "compared": compared,
               "log_errors": {r.problem: round(r.log_error, 3) for r in results},
               "pair_ratios": {r.name: round(r.ratio, 3) for r in predicted}}
        if args.loo:
            v = leave_one_out([c.problem for c in cases], prepared, [measured[c.key]["latency_ms"] for c in cases], spec)
            row["leave_one_out"] = [round(x, 3) for x in v.leave_one_out]
        row["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
