"""The campaign pages' Plotly figures: geomean fraction of peak against iteration and against dollars, for one
campaign or several side by side (the compare page). Views call these; the points come from campaigns.progress."""

from __future__ import annotations

from typing import Any

from benchmark.display import figure_html

_LAYOUT: dict[str, Any] = {
    "height": 320, "margin": {"l": 60, "r": 20, "t": 10, "b": 50},
    "legend": {"orientation": "h", "y": -0.3}, "yaxis": {"title": "geomean fraction of peak (%)", "rangemode": "tozero"},
}


def _percent(points: list[dict[str, Any]]) -> list[float | None]:
    return [None if p["geomean"] is None else 100 * p["geomean"] for p in points]


def iteration_chart_html(series: list[tuple[str, list[dict[str, Any]]]]) -> str:
    """One line per (name, campaigns.progress.iteration_curve points); "" when there is nothing to draw."""
    series = [(name, points) for name, points in series if points]
    if not series:
        return ""
    import plotly.graph_objects as go  # lazy: plotly is heavy; only a page that draws a figure loads it

    figure = go.Figure()
    for name, points in series:
        figure.add_trace(go.Scatter(
            x=[p["iteration"] for p in points], y=_percent(points), name=name, mode="lines+markers",
            customdata=[p["problems"] for p in points], hovertemplate="iteration %{x}: %{y:.2f}% (%{customdata} problems)",
        ))
    figure.update_layout(**_LAYOUT, xaxis={"title": "iteration", "dtick": 1})
    return figure_html(figure)


def dollar_chart_html(series: list[tuple[str, dict[str, Any]]]) -> str:
    """One line per (name, campaigns.progress.dollar_curve); "" when no campaign has a priced point past $0."""
    drawable = [(name, curve) for name, curve in series if len(curve["points"]) > 1 and curve["spent"] > 0]
    if not drawable:
        return ""
    import plotly.graph_objects as go  # lazy: plotly is heavy; only a page that draws a figure loads it

    figure = go.Figure()
    for name, curve in drawable:
        points = curve["points"]
        figure.add_trace(go.Scatter(
            x=[p["dollars"] for p in points], y=_percent(points), name=name, mode="lines+markers",
            text=[p["label"] for p in points], hovertemplate="$%{x:.4f}: %{y:.2f}% (%{text})",
        ))
    figure.update_layout(**_LAYOUT, xaxis={"title": "dollars spent (USD)", "rangemode": "tozero"})
    return figure_html(figure)
