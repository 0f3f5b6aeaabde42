"""The recorded trn1 profiles the test doubles answer with, built from the real measurements.

`build()` turns each row of measurements/data/trn1_nkibench_baselines.csv (the trn1 measurements of the 14
NKIBench baselines, the calibration CSV) into the summary-json entry neuron-profile would print for it: the
CSV's field names and values, and `total_time` in seconds from its `latency_ms`. It also notes the shapes of
the problem's kernel inputs (full and mini case), by which the neuronxcc double recognises the problem. The result is
committed as tests/neuron/doubles/sdk/recorded/trn1_nkibench_summary.json (the doubles read it inside the
sandbox); test_recorded_fixture checks that the committed file is exactly what `build()` makes.

    .venv/bin/python -m tests.neuron.recorded    # rewrite the committed file
"""

from __future__ import annotations

import csv
import json
import types
from pathlib import Path
from typing import Any

import numpy as np

from engine.platforms.nki.suites.loader import load_suite

ROOT = Path(__file__).resolve().parents[2]
CSV_PATH = ROOT / "measurements" / "data" / "trn1_nkibench_baselines.csv"
FIXTURE = Path(__file__).resolve().parent / "doubles" / "sdk" / "recorded" / "trn1_nkibench_summary.json"
DOUBLES = Path(__file__).resolve().parent / "doubles"


def case_key(problem: str, shape: dict[str, int]) -> str:
    """NKIBench's case name, as engine.platforms.nki.perf.calibration keys a CSV row: silu_M4096_N7168."""
    return problem + "_" + "_".join(f"{k}{v}" for k, v in sorted(shape.items()))


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def input_shapes(reference_source: str) -> list[Any]:
    """The shapes of the kernel's inputs for a reference (seed 0), scalars as "scalar"."""
    module = types.ModuleType("recorded_reference")
    exec(compile(reference_source, "<reference>", "exec"), module.__dict__)
    np.random.seed(0)
    raw = list(module.get_inputs())
    to_nki = getattr(module, "transform_to_nki_inputs", None)
    inputs = list(to_nki(raw)) if to_nki else raw
    return [list(np.shape(a)) if isinstance(a, np.ndarray) else "scalar" for a in inputs]


def build(full_shapes: bool = True) -> dict[str, Any]:
    """The fixture; `full_shapes=False` leaves the full cases' input shapes out (they take seconds to render)."""
    suite = load_suite("nkibench")
    cases: dict[str, Any] = {}
    with CSV_PATH.open(newline="") as handle:
        for row in csv.DictReader(handle):
            shape = json.loads(row["shape"])
            summary: dict[str, Any] = {"total_time": float(row["latency_ms"]) / 1e3}
            for name, text in row.items():
                if name not in ("problem", "shape", "latency_ms") and text != "":
                    summary[name] = _number(text)
            spec = suite.problem(row["problem"])
            cases[case_key(row["problem"], shape)] = {
                "problem": row["problem"], "shape": shape, "latency_ms": float(row["latency_ms"]),
                "summary": summary, "mini_input_shapes": input_shapes(spec.reference_source("mini")),
                "full_input_shapes": input_shapes(spec.reference_source("full")) if full_shapes else None,
            }
    return {"source": "measurements/data/trn1_nkibench_baselines.csv (trn1 measurements of the NKIBench "
                      "baselines); summary entries as neuron-profile's summary-json names them",
            "cases": cases}


def load() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(build(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
