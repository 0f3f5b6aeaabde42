"""Read a built-in suite (`engine/platforms/nki/suites/<name>/suite.yaml`) into `Suite` and `ProblemSpec` records.

A suite directory holds `suite.yaml` (per problem: slug, family, title, description, parameter names,
cases and peak-count formulas), `references/<slug>.py` (NKIBench reference format: module-level shape
constants, `get_inputs()`, `forward(*inputs)`, `transform_to_nki_inputs(inputs)`,
`transform_nki_outputs(outputs, reference)`) and `baselines/<slug>.py` (an `@nki.jit` function `kernel`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from engine.platforms.nki.suites.specs import TOLERANCE, ProblemSpec, Suite, SuiteError

SUITES_DIR = Path(__file__).resolve().parent
PEAK_KEYS = ("vector_flops", "matmul_flops", "hbm_bytes")


def available_suites() -> list[str]:
    return sorted(path.parent.name for path in SUITES_DIR.glob("*/suite.yaml"))


def load_suite(name: str = "nkibench", *, directory: Path | str | None = None) -> Suite:
    """Load a suite by name (from this package) or from an explicit directory in the same layout."""
    root = Path(directory) if directory is not None else SUITES_DIR / name
    manifest = root / "suite.yaml"
    if not manifest.is_file():
        raise SuiteError(f"suite {name!r}: {manifest} not found; built-in suites are {available_suites()}")
    with manifest.open(encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    if not isinstance(data, dict) or not isinstance(data.get("problems"), list):
        raise SuiteError(f"{manifest}: expected a mapping with a 'problems' list")
    tolerance = float(data.get("tolerance", TOLERANCE))
    problems = [_read_problem(root, manifest, entry, tolerance) for entry in data["problems"]]
    slugs = [problem.slug for problem in problems]
    duplicates = sorted({slug for slug in slugs if slugs.count(slug) > 1})
    if duplicates:
        raise SuiteError(f"{manifest}: duplicate problem slugs {duplicates}")
    return Suite(
        name=str(data.get("name", name)),
        title=str(data.get("title", name)),
        description=str(data.get("description", "")).strip(),
        problems=problems,
    )


def _read_problem(root: Path, manifest: Path, entry: Any, tolerance: float) -> ProblemSpec:
    if not isinstance(entry, dict) or "slug" not in entry:
        raise SuiteError(f"{manifest}: every problem needs a 'slug'; got {entry!r}")
    slug = str(entry["slug"])
    where = f"{manifest} problem {slug!r}"
    parameters = tuple(str(name) for name in entry.get("parameters", []))
    cases = _read_cases(entry.get("cases"), parameters, where)
    peak = entry.get("peak") or {}
    missing = [key for key in PEAK_KEYS if key not in peak]
    if missing:
        raise SuiteError(f"{where}: peak is missing {missing}")
    reference = _read_text(root / "references" / f"{slug}.py", where)
    baseline = _read_text(root / "baselines" / f"{slug}.py", where)
    spec = ProblemSpec(
        slug=slug,
        family=str(entry.get("family", "")),
        title=str(entry.get("title", slug)),
        description=str(entry.get("description", "")).strip(),
        parameters=parameters,
        cases=cases,
        references={case: reference for case in cases},
        baseline_source=baseline,
        peak_formulas={key: str(peak[key]) for key in PEAK_KEYS},
        tolerance=float(entry.get("tolerance", tolerance)),
        origin=str(root / "references" / f"{slug}.py"),
    )
    # Fail at load time, not when a page first renders a case: every case must render and count.
    for case in cases:
        spec.reference_source(case)
        spec.peak_counts(case)
    return spec


def _read_cases(raw: Any, parameters: tuple[str, ...], where: str) -> dict[str, dict[str, int]]:
    if not isinstance(raw, dict) or not raw:
        raise SuiteError(f"{where}: 'cases' must map case names to parameter values")
    cases: dict[str, dict[str, int]] = {}
    for case, values in raw.items():
        if not isinstance(values, dict) or sorted(values) != sorted(parameters):
            raise SuiteError(f"{where}: case {case!r} must set exactly {list(parameters)}; got {values!r}")
        bad = {key: value for key, value in values.items() if type(value) is not int or value <= 0}
        if bad:
            raise SuiteError(f"{where}: case {case!r}: parameters must be positive integers; got {bad}")
        cases[str(case)] = {name: values[name] for name in parameters}
    return cases


def _read_text(path: Path, where: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SuiteError(f"{where}: {path} not found") from None
