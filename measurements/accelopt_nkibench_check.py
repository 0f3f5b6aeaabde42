"""Check our NKIBench suite against a checkout of AccelOpt's published NKIBench directory.

    .venv/bin/python measurements/accelopt_nkibench_check.py /path/to/AccelOpt/NKIBench [--refit]

These comparisons need files that are not ours to commit (AccelOpt's references, kernels and summary), so
they are not tests: `make test` must pass on any clone (issue 32). What they check:

1. the directory reads (engine.platforms.nki.suites.read_nkibench_dir) as our fourteen problems, each one case equal to
   our "full" case, with the same peak counts and a baseline kernel;
2. each of our mini references computes AccelOpt's math: their reference, rendered at our mini shapes, gives
   the same outputs on the same seeded inputs (relative L2 < 1e-6);
3. with --refit (minutes; needs the 14 full-size traces, cached by `manage.py calibrate --nkibench DIR` in
   var/perf_calibration): the doubles' calibration CSV (tests/neuron/recorded) refits to the current
   performance-model constants within their fitting tolerance.

Prints one line per check and exits 1 if any fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from io import StringIO
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def check_directory(directory: Path) -> list[str]:
    from engine.platforms.nki.suites import load_suite, read_nkibench_dir

    imported, suite, failures = read_nkibench_dir(directory), load_suite(), []
    if sorted(s.slug for s in imported) != sorted(p.slug for p in suite.problems):
        return [f"problems differ: {sorted(s.slug for s in imported)} vs ours {sorted(p.slug for p in suite.problems)}"]
    for spec in imported:
        (case,) = spec.case_names
        ours = suite.problem(spec.slug)
        if spec.case(case) != ours.case("full"):
            failures.append(f"{spec.slug}: case {spec.case(case)} is not our full case {ours.case('full')}")
        if spec.peak_counts(case) != ours.peak_counts("full"):
            failures.append(f"{spec.slug}: peak counts {spec.peak_counts(case)} vs ours {ours.peak_counts('full')}")
        if "def kernel(" not in spec.baseline_for(case):
            failures.append(f"{spec.slug}: the baseline defines no kernel()")
    return failures


def _module(source: str, name: str) -> object:
    import types

    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def _seeded_inputs(module: object) -> list:
    import random

    np.random.seed(0)
    random.seed(0)
    return list(module.get_inputs())  # type: ignore[attr-defined]


def check_references(directory: Path) -> list[str]:
    from engine.evaluator.checks import relative_l2
    from engine.platforms.nki.suites import load_suite, read_nkibench_dir
    from engine.platforms.nki.suites.specs import render_reference

    suite, failures = load_suite("nkibench"), []
    theirs_by_slug = {spec.slug: spec for spec in read_nkibench_dir(directory)}
    for ours in suite.problems:
        theirs = theirs_by_slug[ours.slug]
        mini = ours.case("mini")
        our_module = _module(ours.reference_source("mini"), "ours")
        their_module = _module(render_reference(theirs.references[theirs.case_names[0]], mini), "theirs")
        inputs = _seeded_inputs(our_module)
        if [np.shape(a) for a in inputs] != [np.shape(a) for a in _seeded_inputs(their_module)]:
            failures.append(f"{ours.slug}: input shapes differ")
            continue
        ours_out = our_module.forward(*[np.copy(a) for a in inputs])  # type: ignore[attr-defined]
        theirs_out = their_module.forward(*[np.copy(a) for a in inputs])  # type: ignore[attr-defined]
        error = relative_l2(ours_out, theirs_out)
        if not error < 1e-6:
            failures.append(f"{ours.slug}: relative L2 {error:.3g} between our mini reference and theirs")
    return failures


def check_refit(directory: Path) -> list[str]:
    from django.core.management import call_command

    from engine.platforms.nki.neuron.summary import parse_summary
    from engine.platforms.nki.perf import PERF_MODEL_VERSION
    from engine.platforms.nki.perf.calibration import (
        DEFAULT_CACHE,
        OBJECTIVE_TOLERANCE,
        calibration_row,
        write_calibration_csv,
    )
    from tests.neuron import recorded

    rows = [calibration_row(c["problem"], c["shape"], c["summary"]["total_time"] * 1e6 / 1000.0,
                            parse_summary({"kernel": c["summary"]})) for c in recorded.load()["cases"].values()]
    with tempfile.TemporaryDirectory() as scratch:
        csv = write_calibration_csv(rows, Path(scratch) / "doubles.csv")
        records = Path(scratch) / "records"
        out = StringIO()
        call_command("calibrate", "--nkibench", str(directory), "--measurements", str(csv), "--cache",
                     str(DEFAULT_CACHE), "--record-dir", str(records), stdout=out)
        record = json.loads(next(records.glob("*.json")).read_text())
    failures = []
    if not (record["reproduces"] and record["version"] == PERF_MODEL_VERSION):
        failures.append(f"the refit does not reproduce {PERF_MODEL_VERSION}: {out.getvalue()}")
    if record["start_objective"] - record["objective"] > OBJECTIVE_TOLERANCE:
        failures.append(f"the objective moved by {record['start_objective'] - record['objective']:.3g}")
    if len(record["cases"]) != 14:
        failures.append(f"{len(record['cases'])} cases refit, not 14")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nkibench", type=Path, help="AccelOpt's NKIBench directory (summary.json, reference/, kernels/)")
    parser.add_argument("--refit", action="store_true", help="also refit the doubles' CSV (needs cached traces)")
    args = parser.parse_args()
    if not (args.nkibench / "summary.json").is_file():
        parser.error(f"{args.nkibench} has no summary.json: not an NKIBench directory")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelopt_site.settings")
    import django

    django.setup()
    checks = [("directory reads as our 14 problems", check_directory),
              ("mini references match AccelOpt's", check_references)]
    if args.refit:
        checks.append(("doubles' CSV refits to the current constants", check_refit))
    failed = False
    for title, check in checks:
        failures = check(args.nkibench)
        failed |= bool(failures)
        print(f"{'FAIL' if failures else 'ok  '} {title}")
        for failure in failures:
            print(f"     {failure}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
