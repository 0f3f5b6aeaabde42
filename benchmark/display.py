"""How the benchmark app's results are shown: its Plotly figures (an evaluation's per-engine timeline, the
leaderboard's latencies) and an evaluation's counters and errors as rows. Views call these; none builds a
figure itself.

Figures are built on the server with the plotly package and rendered without plotly.js
(`include_plotlyjs=False`): the base template's `includes/plotly.html` serves the copy inside the package.
`figure_html` is the one way a figure becomes HTML, for every app.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby
from typing import TYPE_CHECKING, Any

from benchmark.models import DEFAULT_CASE, Evaluation, Kernel, Problem
from engine.platforms.nki import generations

if TYPE_CHECKING:
    from benchmark.boards import Board, Improvement
    from benchmark.leaderboard import Leaderboard

# A full-size trace has millions of instructions; the browser draws at most this many bars per engine,
# merging neighbouring busy intervals (gaps under one bar's resolution are invisible anyway).
MAX_BARS_PER_ENGINE = 2000
ENGINE_ORDER = ("tensor", "vector", "scalar", "gpsimd", "dma")


def _intervals_by_engine(timeline: Any) -> tuple[dict[str, list[tuple[float, float]]], str]:
    """Accepts {engine: [[start, end], ...]}, {"unit": .., "engines": {...}} or [{"engine", "start", "end"}]."""
    unit = "µs"
    if isinstance(timeline, dict) and "engines" in timeline:
        unit = str(timeline.get("unit", unit))
        timeline = timeline["engines"]
    by_engine: dict[str, list[tuple[float, float]]] = {}
    if isinstance(timeline, dict):
        for engine, intervals in timeline.items():
            if isinstance(intervals, dict):  # columnar: {"start": [...], "end": [...]}
                pairs = zip(intervals.get("start", []), intervals.get("end", []), strict=False)
            else:
                pairs = ((item[0], item[1]) for item in intervals if len(item) >= 2)
            by_engine[str(engine)] = [(float(start), float(end)) for start, end in pairs]
    elif isinstance(timeline, list):
        for item in timeline:
            if isinstance(item, dict) and {"engine", "start", "end"} <= item.keys():
                by_engine.setdefault(str(item["engine"]), []).append((float(item["start"]), float(item["end"])))
    return by_engine, unit


def _merge(intervals: list[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    if not intervals:
        return []
    intervals = sorted(intervals)
    span = max(end for _, end in intervals) - intervals[0][0]
    resolution = span / limit if span > 0 else 0.0
    merged = [intervals[0]]
    for start, end in intervals[1:]:
        last_start, last_end = merged[-1]
        if start - last_end <= resolution:
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def figure_html(figure: Any) -> str:
    """A Plotly figure as an HTML fragment for a page; plotly.js itself comes from `includes/plotly.html`."""
    return figure.to_html(include_plotlyjs=False, full_html=False, config={"displaylogo": False, "responsive": True})


def timeline_figure_html(timeline: Any) -> str:
    """An HTML fragment with the per-engine busy intervals, or "" when there is nothing to draw."""
    by_engine, unit = _intervals_by_engine(timeline)
    if not any(by_engine.values()):
        return ""
    import plotly.graph_objects as go

    order = [e for e in ENGINE_ORDER if e in by_engine] + sorted(e for e in by_engine if e not in ENGINE_ORDER)
    figure = go.Figure()
    for engine in order:
        intervals = _merge(by_engine[engine], MAX_BARS_PER_ENGINE)
        if not intervals:
            continue
        figure.add_trace(
            go.Bar(
                name=engine,
                y=[engine] * len(intervals),
                base=[start for start, _ in intervals],
                x=[end - start for start, end in intervals],
                orientation="h",
                hovertemplate=f"{engine}: %{{base:.3f}}–%{{customdata:.3f}} {unit}<extra></extra>",
                customdata=[end for _, end in intervals],
            )
        )
    figure.update_layout(
        barmode="overlay",
        height=80 + 40 * len(order),
        margin={"l": 70, "r": 20, "t": 10, "b": 40},
        xaxis_title=f"time ({unit}, simulated)",
        yaxis={"categoryorder": "array", "categoryarray": list(reversed(order))},
        showlegend=False,
    )
    return figure_html(figure)


def _microseconds(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:.3g} µs" if us < 1000 else f"{us / 1e3:.3g} ms" if us < 1e6 else f"{us / 1e3:,.0f} ms"


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.1f} MiB"


def breakdown_view(breakdown: Any) -> dict[str, Any] | None:
    """Where the predicted time goes (engine.platforms.nki.perf.explain.Breakdown.to_dict()), as the evaluation panel shows
    it: the verdict, one row per engine and per wait, the DMA queues and spills, and a bar figure of the
    critical path's shares. None when there is no breakdown (a measured result, or one from before it)."""
    from engine.platforms.nki.perf.explain import ENGINE_NAMES, LABELS, PATH_CATEGORIES

    if not isinstance(breakdown, dict) or not breakdown.get("path_share"):
        return None
    busy, busy_share = breakdown.get("busy_s", {}), breakdown.get("busy_share", {})
    stall, path_share = breakdown.get("stall_s", {}), breakdown["path_share"]
    rows = []
    for name in PATH_CATEGORIES:
        engine = name in ENGINE_NAMES
        if engine and not busy.get(name) and not path_share.get(name):
            continue  # an engine this kernel never used
        if not engine and not path_share.get(name):
            continue
        rows.append({"name": LABELS[name], "busy": _microseconds(busy.get(name, 0.0)) if engine else "—",
                     "busy_share": f"{busy_share.get(name, 0.0):.0%}" if engine else "—",
                     "stall": _microseconds(stall.get(name, 0.0)) if engine else "—",
                     "path_share": f"{path_share.get(name, 0.0):.0%}", "bound": name == breakdown.get("bound")})
    queues = [q for q in breakdown.get("dma_queue_s", []) if q > 0]
    dma = breakdown.get("dma_s", {})
    spill = breakdown.get("spill", {})
    moved = spill.get("save_bytes", 0.0) + spill.get("reload_bytes", 0.0) + spill.get("refetch_bytes", 0.0)
    return {
        "verdict": breakdown.get("verdict", ""),
        "rows": rows,
        "dma": (f"{len(queues)} DMA queue{'s' if len(queues) != 1 else ''} used, "
                f"{_microseconds(min(queues))}–{_microseconds(max(queues))} each; loads "
                f"{_microseconds(dma.get('load', 0.0))}, stores {_microseconds(dma.get('store', 0.0))}, "
                f"on-chip copies {_microseconds(dma.get('onchip', 0.0))} (summed over concurrent DMAs)") if queues else "",
        "spill": (f"{_mib(spill.get('save_bytes', 0.0))} saved, {_mib(spill.get('reload_bytes', 0.0))} reloaded, "
                  f"{_mib(spill.get('refetch_bytes', 0.0))} of evicted inputs fetched again: "
                  f"{_microseconds(spill.get('seconds', 0.0))} at the HBM bandwidth") if moved else "",
        "figure_html": critical_path_figure_html(path_share),
    }


def critical_path_figure_html(path_share: dict[str, float]) -> str:
    """A bar per critical-path category (engines, spill reloads, stalls): its share of the path."""
    from engine.platforms.nki.perf.explain import LABELS, PATH_CATEGORIES

    shown = [name for name in PATH_CATEGORIES if path_share.get(name, 0.0) > 0]
    if not shown:
        return ""
    import plotly.graph_objects as go

    figure = go.Figure(go.Bar(
        x=[path_share[name] for name in shown], y=[LABELS[name] for name in shown], orientation="h",
        text=[f"{path_share[name]:.0%}" for name in shown], textposition="auto",
        hovertemplate="%{y}: %{x:.1%} of the critical path<extra></extra>",
    ))
    figure.update_layout(height=60 + 30 * len(shown), margin={"l": 120, "r": 20, "t": 10, "b": 40},
                         xaxis={"title": "share of the critical path", "tickformat": ".0%", "range": [0, 1]},
                         yaxis={"autorange": "reversed"}, showlegend=False)
    return figure_html(figure)


def leaderboard_figure_html(board: Leaderboard) -> str:
    """Bars of latency per problem: baseline, best found, and AccelOpt's published best where known."""
    rows = [row for row in board.rows if row.best is not None or row.baseline is not None]
    if not rows:
        return ""
    import plotly.graph_objects as go

    names = [row.problem.address for row in rows]
    figure = go.Figure()
    figure.add_trace(go.Bar(name="baseline", x=names, y=[row.baseline.latency_ms if row.baseline else None for row in rows]))
    figure.add_trace(go.Bar(name="best found", x=names, y=[row.best.latency_ms if row.best else None for row in rows]))
    if any(row.reference for row in rows):
        figure.add_trace(go.Bar(name="AccelOpt published (trn1, measured)", x=names,
                                y=[row.reference.latency_ms if row.reference else None for row in rows]))
    figure.update_layout(barmode="group", height=360, margin={"l": 60, "r": 20, "t": 10, "b": 110},
                         yaxis={"title": "latency (ms)", "type": "log"}, legend={"orientation": "h", "y": 1.1})
    return figure_html(figure)


# neuron-profile summary fields, in the order the calibration CSV has them, with what each means.
PROFILE_FIELD_HELP: dict[str, str] = {
    "hbm_read_bytes": "bytes read from HBM",
    "hbm_write_bytes": "bytes written to HBM",
    "psum_read_bytes": "bytes read from PSUM",
    "psum_write_bytes": "bytes written to PSUM",
    "sbuf_read_bytes": "bytes read from SBUF",
    "sbuf_write_bytes": "bytes written to SBUF",
    "spill_reload_bytes": "bytes reloaded after SBUF spills",
    "spill_save_bytes": "bytes saved by SBUF spills",
    "hardware_flops": "floating-point operations executed",
    "transpose_flops": "Tensor Engine operations spent on transposes",
    "peak_flops_bandwidth_ratio": "peak FLOP rate over HBM bandwidth",
    "mm_arithmetic_intensity": "matmul FLOPs per HBM byte",
    "hfu_estimated_percent": "hardware FLOPs utilisation",
    "scalar_engine_active_time_percent": "Scalar Engine busy time",
    "vector_engine_active_time_percent": "Vector Engine busy time",
    "gpsimd_engine_active_time_percent": "GpSimd Engine busy time",
}


def format_counter(name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if name.endswith("_percent"):  # neuron-profile reports these as fractions (0.41 is 41%)
        return f"{value * 100:.1f}%"
    if name.endswith("_bytes"):
        return f"{value:,.0f}"
    if isinstance(value, int) or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.4g}"


def is_correctness_only(evaluation: Evaluation) -> bool:
    """A finished, correct result with no latency (the Triton interpreter's): correct, not a failure."""
    return (not evaluation.is_pending and evaluation.correct is True and evaluation.latency_ms is None
            and not evaluation.error_kind and not evaluation.is_stale)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _flat_counters(profile: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Scalars as (dotted name, value); nested dicts flattened (the cuda backend's "timing.median_ms"). Lists of
    rows are left to `profile_tables`; other lists are shown joined, never as a Python repr."""
    flat: list[tuple[str, Any]] = []
    for name, value in profile.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            flat.extend(_flat_counters(value, f"{key}."))
        elif isinstance(value, list | tuple):
            if value and all(isinstance(item, dict) for item in value):
                continue  # a table of its own
            if all(_is_scalar(item) for item in value):
                flat.append((key, ", ".join(format_counter(key, item) for item in value)))
        else:
            flat.append((key, value))
    return flat


def profile_rows(evaluation: Evaluation) -> list[dict[str, str]]:
    """The profile's counters as (name, value, help) rows. The Triton backends' "note" is not a counter: the
    page states it in words (`correctness_only`)."""
    profile = {k: v for k, v in (evaluation.profile or {}).items() if k != "note"}
    counters = dict(_flat_counters(profile))
    names = [n for n in PROFILE_FIELD_HELP if n in counters] + sorted(n for n in counters if n not in PROFILE_FIELD_HELP)
    return [
        {"name": name, "value": format_counter(name, counters[name]), "help": PROFILE_FIELD_HELP.get(name, "")}
        for name in names
    ]


def profile_tables(evaluation: Evaluation) -> list[dict[str, Any]]:
    """Lists of rows in the profile (the Triton backends' per-workload numbers) as tables: a column per key,
    values formatted like the counters, "—" for a number the backend could not give (no GPU)."""
    tables = []
    for name, value in (evaluation.profile or {}).items():
        if not (isinstance(value, list | tuple) and value and all(isinstance(item, dict) for item in value)):
            continue
        columns = list(dict.fromkeys(key for item in value for key in item))
        rows = [[_cell(column, item.get(column)) for column in columns] for item in value]
        tables.append({"name": name, "columns": columns, "rows": rows})
    return tables


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "—"
    if name == "peak_fraction" or name == "spread":
        return f"{value * 100:.1f}%" if isinstance(value, int | float) else str(value)
    return format_counter(name, value) if _is_scalar(value) else ", ".join(map(str, value))


def correctness_rows(evaluation: Evaluation) -> list[dict[str, Any]]:
    """One row per seed (per workload and seed for a Triton problem): its inputs and the relative L2 error of
    each output. An error is marked within tolerance by the tolerance when the result records one; otherwise
    (the Triton backends compare with the definition's own per-dtype tolerances) by the evaluation's verdict,
    so a correct result is never shown in red."""
    detail = evaluation.correctness or {}
    errors: list[Any] = list(detail.get("relative_l2_errors") or [])
    seeds = list(evaluation.seeds or [])
    distributions = list(detail.get("distributions") or [])
    tolerance = detail.get("tolerance")
    workloads = [w.get("uuid", "") for w in (evaluation.profile or {}).get("workloads") or [] if isinstance(w, dict)]
    per_workload = bool(workloads) and bool(seeds) and len(errors) == len(workloads) * len(seeds)
    rows = []
    for index, per_output in enumerate(errors):
        if per_workload:
            seed, inputs = seeds[index % len(seeds)], f"workload {workloads[index // len(seeds)]}"
        else:
            seed = seeds[index] if index < len(seeds) else None
            inputs = distributions[index] if index < len(distributions) else ""
        rows.append({
            "seed": seed,
            "distribution": inputs,
            # Without a tolerance: a correct result passed every row; an incorrect one stopped at its last row.
            "errors": [{"value": error, "ok": _within(error, tolerance, evaluation.correct is True
                                                      or index < len(errors) - 1)} for error in per_output],
        })
    return rows


def _within(error: float | None, tolerance: float | None, passed: bool) -> bool:
    if error is None:
        return False
    return error <= tolerance if tolerance is not None else passed


def problem_rows(problems: Iterable[Problem]) -> list[dict[str, Any]]:
    """The problems list's rows: one per problem (suite and slug), one cell per case with the mini case first,
    each with its baseline's current evaluation. `problems` come ordered by suite and slug, their baselines'
    evaluations prefetched as `current_evaluations` (services.problems_with_baselines)."""
    rows: list[dict[str, Any]] = []
    for (suite, slug), cases in groupby(problems, key=lambda problem: (problem.suite, problem.slug)):
        cases = list(cases)
        for problem in cases:
            if problem.baseline_kernel is not None:
                # Known already: a result checks its problem's reference digest (Evaluation.is_stale) per cell.
                problem.baseline_kernel.problem = problem
        ordered = sorted(cases, key=lambda problem: (problem.case != DEFAULT_CASE, problem.case))
        rows.append({
            "suite": suite,
            "slug": slug,
            "first": ordered[0],
            "cases": [
                {"problem": problem,
                 "baseline": next(iter(getattr(problem.baseline_kernel, "current_evaluations", [])), None)}
                for problem in ordered
            ],
        })
    return rows


def board_figure_html(board: Board) -> str:
    """Simulated latencies per problem of one NKIBench board: baseline and best found, same model version.

    Measured numbers are not drawn here: next to simulated bars they would read as comparable."""
    rows = [row for row in board.rows if row.simulated.best is not None]
    if not rows:
        return ""
    import plotly.graph_objects as go

    names = [row.problem.slug for row in rows]
    figure = go.Figure()
    figure.add_trace(go.Bar(name="baseline (simulated)", x=names,
                            y=[row.simulated.baseline.latency_ms if row.simulated.baseline else None for row in rows]))
    figure.add_trace(go.Bar(name="best found (simulated)", x=names, y=[row.simulated.best.latency_ms for row in rows]))
    figure.update_layout(barmode="group", height=340, margin={"l": 60, "r": 20, "t": 10, "b": 90},
                         yaxis={"title": "latency (ms, simulated)", "type": "log"},
                         legend={"orientation": "h", "y": 1.1})
    return figure_html(figure)


def best_over_time_figure_html(history: dict[str, list[Improvement]]) -> str:
    """One step line per problem: the simulated best's speedup over the baseline each time it improved."""
    lines = {address: steps for address, steps in history.items() if any(s.speedup for s in steps)}
    if not lines:
        return ""
    import plotly.graph_objects as go

    figure = go.Figure()
    for address, steps in sorted(lines.items()):
        figure.add_trace(go.Scatter(name=address, x=[s.when for s in steps], y=[s.speedup for s in steps],
                                    mode="lines+markers", line={"shape": "hv"}))
    figure.update_layout(height=320, margin={"l": 60, "r": 20, "t": 10, "b": 40},
                         yaxis={"title": "speedup over baseline"}, legend={"orientation": "h", "y": -0.2})
    return figure_html(figure)


def nki_generation_view(kernel: Kernel) -> dict[str, str] | None:
    """The kernel page's generation line, and for a legacy kernel the note that current SDKs refuse it."""
    generation = kernel.nki_generation
    if generation is None:
        return None
    return {"label": generations.LABELS[generation],
            "note": generations.LEGACY_NOTE if generation == generations.LEGACY else ""}
