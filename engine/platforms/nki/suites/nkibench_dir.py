"""Read a directory in the public AccelOpt `NKIBench/` layout into `ProblemSpec` records.

The layout (as published in the AccelOpt repository):

    summary.json     {slug: {"seed": "./seeds/<slug>.yaml",
                             "cases": {case_id: {"values": {param: int},
                                                 "impls": [{"task": "./reference/<file>.py",
                                                            "kernel": "./kernels/<file>.py"}]}}}}
    seeds/<slug>.yaml   test_name, parameters (ordered names), input and impl snippets
    reference/*.py      NKIBench reference files, specialised to their case's shape
    kernels/*.py        the kernel for that case (a function `kernel`)

Case names are the directory's case ids ("2", "3", ...). Only the first impl of a case is read. A slug
that is also a built-in NKIBench problem gets that problem's family, title, description and peak-count
formulas (same math); any other slug gets family "imported" and no peak counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from engine.platforms.nki.suites.loader import load_suite
from engine.platforms.nki.suites.specs import ProblemSpec, SuiteError


def read_nkibench_dir(path: Path | str) -> list[ProblemSpec]:
    root = Path(path).resolve()
    summary_path = root / "summary.json"
    if not summary_path.is_file():
        raise SuiteError(f"{root}: not an NKIBench directory (no summary.json)")
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise SuiteError(f"{summary_path}: line {error.lineno}: {error.msg}") from None
    if not isinstance(summary, dict):
        raise SuiteError(f"{summary_path}: expected an object mapping problem names to entries")
    built_in = {spec.slug: spec for spec in load_suite("nkibench").problems}
    return [
        _read_entry(root, summary_path, str(slug), entry, built_in.get(str(slug)))
        for slug, entry in sorted(summary.items())
    ]


def _read_entry(
    root: Path, summary_path: Path, slug: str, entry: Any, known: ProblemSpec | None
) -> ProblemSpec:
    where = f"{summary_path} [{slug!r}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("cases"), dict) or not entry["cases"]:
        raise SuiteError(f"{where}: expected a 'cases' object with at least one case")
    seed = _read_seed(root, entry.get("seed"), where)
    cases: dict[str, dict[str, int]] = {}
    references: dict[str, str] = {}
    kernels: dict[str, str] = {}
    for case_id, case in entry["cases"].items():
        case_where = f"{where} case {case_id!r}"
        if not isinstance(case, dict) or not isinstance(case.get("values"), dict):
            raise SuiteError(f"{case_where}: expected 'values' with the shape parameters")
        values = case["values"]
        bad = {key: value for key, value in values.items() if type(value) is not int}
        if bad:
            raise SuiteError(f"{case_where}: parameters must be integers; got {bad}")
        impls = case.get("impls")
        if not isinstance(impls, list) or not impls or not isinstance(impls[0], dict):
            raise SuiteError(f"{case_where}: expected 'impls' with a task and a kernel")
        references[str(case_id)] = _read_inside(root, impls[0].get("task"), f"{case_where} task")
        kernels[str(case_id)] = _read_inside(root, impls[0].get("kernel"), f"{case_where} kernel")
        cases[str(case_id)] = dict(values)

    # Parameter order: the seed's list when there is one, else the first case's keys.
    parameters = tuple(seed.get("parameters") or next(iter(cases.values())))
    for case_id, values in cases.items():
        if sorted(values) != sorted(parameters):
            raise SuiteError(f"{where} case {case_id!r}: values {sorted(values)} do not match {list(parameters)}")
        cases[case_id] = {name: values[name] for name in parameters}

    first_case = next(iter(cases))
    spec = ProblemSpec(
        slug=slug,
        family=known.family if known else "imported",
        title=known.title if known else slug.replace("_", " "),
        description=known.description if known else "",
        parameters=parameters,
        cases=cases,
        references=references,
        baseline_source=kernels[first_case],
        case_baselines=kernels,
        peak_formulas=dict(known.peak_formulas) if known and known.parameters_match(parameters) else {},
        origin=str(summary_path),
    )
    for case_id in cases:
        spec.reference_source(case_id)  # every reference must define its shape constants
    return spec


def _read_seed(root: Path, relative: Any, where: str) -> dict[str, Any]:
    if not relative:
        return {}
    text = _read_inside(root, relative, f"{where} seed")
    try:
        seed = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise SuiteError(f"{where} seed {relative}: {error}") from None
    if not isinstance(seed, dict):
        raise SuiteError(f"{where} seed {relative}: expected a mapping")
    return seed


def _read_inside(root: Path, relative: Any, where: str) -> str:
    """Read a file named relative to the directory, refusing paths that leave it."""
    if not isinstance(relative, str) or not relative:
        raise SuiteError(f"{where}: expected a relative file path, got {relative!r}")
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise SuiteError(f"{where}: {relative!r} points outside {root}")
    if not target.is_file():
        raise SuiteError(f"{where}: {relative!r} not found in {root}")
    return target.read_text(encoding="utf-8")
