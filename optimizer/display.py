"""How the optimizer app's runs are shown as Plotly figures: the run page's progress chart. Views call these;
none builds a figure itself (the benchmark app's figures are in benchmark/display.py, which also turns a
figure into HTML for both)."""

from __future__ import annotations

from typing import Any

from benchmark.display import figure_html


def run_chart_html(points: list[dict[str, Any]]) -> str:
    """Best latency and peak fraction per iteration (from `services.chart_points`), or "" with under two
    points: one point draws no line."""
    if len(points) < 2:
        return ""
    import plotly.graph_objects as go  # lazy: plotly is heavy; only a page that draws a figure loads it

    xs = [p["iteration"] for p in points]
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=xs, y=[p["latency_ms"] for p in points], name="best latency (ms)",
                                mode="lines+markers"))
    figure.add_trace(go.Scatter(x=xs, y=[None if p["peak_fraction"] is None else 100 * p["peak_fraction"]
                                         for p in points],
                                name="peak fraction (%)", mode="lines+markers", yaxis="y2"))
    figure.update_layout(
        height=300, margin={"l": 60, "r": 60, "t": 10, "b": 40},
        xaxis={"title": "iteration", "dtick": 1},
        yaxis={"title": "best latency (ms)", "rangemode": "tozero"},
        yaxis2={"title": "peak fraction (%)", "overlaying": "y", "side": "right", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25},
    )
    # Plotly gives each render a fresh div id: htmx re-applies the attributes of an element whose id survives
    # a swap, which would strip the classes Plotly adds when it draws (and so its layout CSS).
    return figure_html(figure)
