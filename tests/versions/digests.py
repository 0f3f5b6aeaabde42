"""What the simulator and the performance model compute for the 14 NKIBench mini cases, pinned to their versions.

Cached evaluations are keyed on the backend version (`nki-sim <SIMULATOR_VERSION> + perf <PERF_MODEL_VERSION>`),
so a change to what either computes must come with a version bump, or old cached numbers are served as if
the new code had produced them. tests/versions/test_versions.py compares `compute()` with digests.json,
which was recorded under the versions it names.

Per problem (the baseline kernel on the mini case, numpy's and `random`'s global generators seeded with
SEED before the reference's `get_inputs()`, as the evaluation child does for a seed):

* `case`: SHA-256 prefix of the baseline's source and the kernel's input arrays (the reference matters only
  through them). When it moves, the suite changed, not the simulator.
* `trace`: every column of the instruction and access tables (name, dtype, bytes), the op and dtype name
  tables, the tensor table, the loop table and the loop contexts (as plain values: enums as ints).
* `outputs`: each output's dtype, shape and raw bytes.
* `latency_ms` and `profile`: the performance model's prediction for that trace on trn1 (compared with a
  relative tolerance of 1e-9, so a last-bit difference in a float sum on another CPU is not a change).

Regenerate after a deliberate change (bump the version first, then record under it):

    .venv/bin/python -m tests.versions.digests --regenerate
    .venv/bin/python -m tests.versions.digests --check --workers 2    # split loops must not change anything
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import hashlib
import json
import linecache
import math
import random
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

DIGESTS_FILE = Path(__file__).resolve().parent / "digests.json"
REGENERATE = ".venv/bin/python -m tests.versions.digests --regenerate"
SUITE = "nkibench"
CASE = "mini"
PLATFORM = "trn1"
SEED = 0
REL_TOL = 1e-9


def _sha(chunks: Any) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk if isinstance(chunk, bytes) else str(chunk).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _plain(value: Any) -> Any:
    """A value as nested tuples of builtins: independent of class names and enum reprs."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(_plain(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _arrays(arrays: Any) -> list[Any]:
    chunks: list[Any] = []
    for array in arrays:
        if isinstance(array, np.ndarray):
            array = np.ascontiguousarray(array)
            chunks += [array.dtype.str, array.shape, array.tobytes()]
        else:
            chunks.append(repr(array))
    return chunks


def trace_digest(trace: Any) -> str:
    chunks: list[Any] = []
    for table in (trace.columns, trace.access):
        for name in sorted(table):
            column = np.asarray(table[name])
            chunks += [name, column.dtype.str, np.ascontiguousarray(column).tobytes()]
    for part in (trace.op_names, trace.dtype_names, trace.tensors, trace.loops, trace.loop_contexts):
        chunks.append(repr(_plain(part)))
    return _sha(chunks)


def _module(source: str, name: str) -> types.ModuleType:
    # In linecache, as the evaluation child does: `workers=2` reads a kernel's source to find loops to split.
    filename = f"<{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    module = types.ModuleType(name)
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def compute_problem(spec: Any, workers: int = 1) -> dict[str, Any]:
    """The record of one problem (see the module docstring). The NKI namespaces must be installed."""
    from engine.platforms.nki.perf import estimate
    from engine.platforms.nki.simulator import simulate

    reference_source, baseline_source = spec.reference_source(CASE), spec.baseline_for(CASE)
    reference = _module(reference_source, f"versions_reference_{spec.slug}")
    np.random.seed(SEED)
    random.seed(SEED)
    inputs = list(reference.get_inputs())
    to_nki = getattr(reference, "transform_to_nki_inputs", None)
    nki_inputs = list(to_nki(inputs)) if to_nki else inputs
    kernel = _module(baseline_source, f"versions_baseline_{spec.slug}").kernel
    case = _sha([baseline_source, *_arrays(nki_inputs)])
    simulation = simulate(kernel, nki_inputs, platform=PLATFORM, workers=workers)
    report = estimate(simulation.trace, PLATFORM)
    return {
        "case": case,
        "trace": trace_digest(simulation.trace),
        "outputs": _sha(_arrays(simulation.outputs)),
        "latency_ms": float(report.latency_ms),
        "profile": {name: float(value) for name, value in sorted(report.profile.items())},
    }


def compute(workers: int = 1, only: set[str] | None = None, suite_dir: Path | None = None) -> dict[str, Any]:
    """Records for every problem of the suite (or of the same suite in `suite_dir`, e.g. an older copy: to
    tell a suite edit from a simulator change), with the versions of the code that computed them."""
    import engine.platforms.nki.perf
    import engine.platforms.nki.simulator
    from engine.platforms.nki.simulator.semantics import namespaces
    from engine.platforms.nki.suites import load_suite

    installed_before = "neuronxcc.nki" in sys.modules
    namespaces.install()
    try:
        problems = {spec.slug: compute_problem(spec, workers) for spec in load_suite(SUITE, directory=suite_dir).problems
                    if only is None or spec.slug in only}
    finally:
        if not installed_before:
            namespaces.uninstall()
    return {
        "simulator_version": engine.platforms.nki.simulator.SIMULATOR_VERSION,
        "perf_model_version": engine.platforms.nki.perf.PERF_MODEL_VERSION,
        "suite": SUITE, "case": CASE, "platform": PLATFORM, "seed": SEED,
        "problems": problems,
    }


def load_recorded() -> dict[str, Any]:
    return json.loads(DIGESTS_FILE.read_text(encoding="utf-8"))


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-15)


def perf_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What moved in one problem's predictions: 'latency_ms', counter names, 'counters added/removed'."""
    moved = [] if _close(old["latency_ms"], new["latency_ms"]) else ["latency_ms"]
    if set(old["profile"]) != set(new["profile"]):
        moved.append(f"counters {sorted(set(old['profile']) ^ set(new['profile']))} added/removed")
    moved += [name for name in sorted(set(old["profile"]) & set(new["profile"]))
              if not _close(old["profile"][name], new["profile"][name])]
    return moved


def compare(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Every reason the current results contradict the recorded ones, each a sentence saying what to do."""
    problems: list[str] = []
    sim_old, sim_new = recorded["simulator_version"], current["simulator_version"]
    perf_old, perf_new = recorded["perf_model_version"], current["perf_model_version"]
    if sim_old != sim_new or perf_old != perf_new:
        return [f"{DIGESTS_FILE.name} was recorded under nki-sim {sim_old} + perf {perf_old}, but the code says "
                f"nki-sim {sim_new} + perf {perf_new}: regenerate it under the new versions with `{REGENERATE}` "
                f"(and check that its diff is what the bump was for)."]
    old_p, new_p = recorded["problems"], current["problems"]
    if set(old_p) != set(new_p):
        problems.append(f"the suite's problems changed (recorded {sorted(old_p)}, now {sorted(new_p)}): "
                        f"regenerate with `{REGENERATE}`.")
    common = sorted(set(old_p) & set(new_p))
    suite_changed = [s for s in common if old_p[s]["case"] != new_p[s]["case"]]
    if suite_changed:
        problems.append(f"the mini case (reference, baseline or inputs) of {', '.join(suite_changed)} changed: "
                        f"that is a suite edit, not a simulator change; regenerate with `{REGENERATE}`.")
    same_case = [s for s in common if s not in suite_changed]
    sim_changed = [s for s in same_case if old_p[s]["trace"] != new_p[s]["trace"]
                   or old_p[s]["outputs"] != new_p[s]["outputs"]]
    if sim_changed:
        what = "; ".join(
            f"{s} ({', '.join(k for k in ('trace', 'outputs') if old_p[s][k] != new_p[s][k])})" for s in sim_changed)
        problems.append(f"the simulator's results changed under SIMULATOR_VERSION {sim_new}: {what}. Cached "
                        f"evaluations are keyed on that version, so bump SIMULATOR_VERSION in "
                        f"engine/platforms/nki/simulator/__init__.py, then regenerate {DIGESTS_FILE.name} with `{REGENERATE}`.")
    # Predictions for an unchanged trace are the performance model's alone.
    perf_changed = {s: perf_differences(old_p[s], new_p[s]) for s in same_case if s not in sim_changed}
    perf_changed = {s: moved for s, moved in perf_changed.items() if moved}
    if perf_changed:
        what = "; ".join(f"{s} ({', '.join(moved)})" for s, moved in perf_changed.items())
        problems.append(f"the performance model's predictions changed under PERF_MODEL_VERSION {perf_new}: {what}. "
                        f"Cached evaluations are keyed on that version, so bump PERF_MODEL_VERSION in "
                        f"engine/platforms/nki/perf/__init__.py, then regenerate {DIGESTS_FILE.name} with `{REGENERATE}`.")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--regenerate", action="store_true", help=f"write {DIGESTS_FILE}")
    mode.add_argument("--check", action="store_true", help="compare with the recorded file; exit 1 on a difference")
    parser.add_argument("--workers", type=int, default=1, help="processes the simulator may use (default 1)")
    parser.add_argument("--only", default="", help="comma-separated problems (--check only)")
    parser.add_argument("--suite-dir", type=Path, default=None,
                        help="read the suite from this directory (e.g. a `git archive` of an older one; --check only)")
    args = parser.parse_args()
    started = time.monotonic()
    only = {p for p in args.only.split(",") if p} or None
    if args.regenerate and (only or args.suite_dir):
        parser.error("--regenerate records every problem of the built-in suite; --only and --suite-dir are for --check")
    current = compute(args.workers, only, args.suite_dir)
    elapsed = time.monotonic() - started
    if args.regenerate:
        DIGESTS_FILE.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {DIGESTS_FILE} for nki-sim {current['simulator_version']} + perf "
              f"{current['perf_model_version']} ({len(current['problems'])} problems, {elapsed:.1f} s)")
        return
    recorded = load_recorded()
    if only:
        recorded = {**recorded, "problems": {s: r for s, r in recorded["problems"].items() if s in only}}
    for slug, record in current["problems"].items():
        print(slug, record["case"], record["trace"], record["outputs"], f"{record['latency_ms']:.9g}")
    differences = compare(recorded, current)
    print("\n".join(differences) or f"same as {DIGESTS_FILE.name} ({elapsed:.1f} s)")
    sys.exit(1 if differences else 0)


if __name__ == "__main__":
    main()
