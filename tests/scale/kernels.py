"""The kernels the scale-out tests evaluate: NKIBench silu:mini's baseline (about 1.5 s per evaluation) and
a slow variant of it (the same stores repeated: correct, a few seconds), long enough to kill or cancel."""

from __future__ import annotations

from functools import cache

from engine.evaluator import EvaluationRequest, Limits

LIMITS = Limits(wall_seconds=120, cpu_seconds=120, memory_bytes=2 * 1024**3)
SEEDS = (11, 12, 13)  # fixed, so two evaluations of one kernel give identical records
STORE = "            nl.store(out[r0:r0 + tile_rows, c0:c0 + tile_cols], value=nl.silu(tile))"


@cache
def _silu() -> object:
    from engine.platforms.nki.suites import load_suite

    return next(spec for spec in load_suite("nkibench").problems if spec.slug == "silu")


def baseline() -> str:
    return _silu().baseline_for("mini")


def slow_kernel(repeats: int = 2000) -> str:
    source = baseline()
    assert STORE in source, "the silu baseline changed: update tests/scale/kernels.py"
    return source.replace(STORE, f"            for _ in nl.sequential_range({repeats}):\n    {STORE}")


def request(source: str | None = None) -> EvaluationRequest:
    spec = _silu()
    counts = spec.peak_counts("mini")
    return EvaluationRequest(
        kernel_source=source or baseline(), reference_source=spec.reference_source("mini"),
        peak_counts=(counts.vector_flops, counts.matmul_flops, counts.hbm_bytes), tolerance=spec.tolerance,
        limits=LIMITS, seeds=SEEDS,
    )
