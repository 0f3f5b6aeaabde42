"""The leaderboard page, one view for every platform (its board is `benchmark.leaderboard.build_board`'s), and
the fragment showing how far the background evaluation of the suite's baselines has come.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from benchmark import services
from benchmark.display import best_over_time_figure_html, board_figure_html, leaderboard_figure_html
from benchmark.leaderboard import best_over_time, build_board
from benchmark.models import Platform
from benchmark.services.baselines import baseline_progress
from engine.platforms.nki.hardware import UNCALIBRATED
from engine.platforms.registry import DEFAULT_PLATFORM, get_definition

CASES = ("mini", "full")


@require_GET
def leaderboard(request: HttpRequest) -> HttpResponse:
    """Public: the board of one platform (trn1 by default), of one case where its suite has cases (NKIBench:
    full by default). A board with a simulated group (a backend a model predicts) shows it beside the measured
    one (board.html); one without, measured numbers only (leaderboard.html)."""
    platform = request.GET.get("platform", DEFAULT_PLATFORM.value)
    if platform not in Platform.values:
        platform = DEFAULT_PLATFORM.value
    board = build_board(platform, request.GET.get("case"), user=request.user)
    context = {"board": board, "platform": platform, "platforms": Platform.choices,
               "can_launch": services.can_create_kernels(request.user)}
    if not board.simulator:  # a GPU board: measured numbers only, every case
        return render(request, "benchmark/leaderboard.html", {**context, "chart": leaderboard_figure_html(board)})
    definition = get_definition(platform)
    return render(request, "benchmark/board.html", {
        **context,
        "case": board.case,
        "cases": definition.board_cases,
        "suite": definition.suite,
        "uncalibrated": platform in UNCALIBRATED,
        "chart": board_figure_html(board),
        "history_chart": best_over_time_figure_html(best_over_time(board)),
        **(progress_context([board.case]) if definition.suite else {}),
    })


def progress_context(cases: Sequence[str] = CASES) -> dict[str, Any]:
    """The partial's context: one BaselineProgress per case, and whether the fragment should keep polling."""
    progresses = [baseline_progress(case) for case in cases]
    poll = any(p.pending or (p.in_background and not p.complete and p.total) for p in progresses)
    return {"progresses": progresses, "poll": poll, "query": "&".join(f"case={case}" for case in cases)}


@require_GET
def baseline_progress_fragment(request: HttpRequest) -> HttpResponse:
    cases = [case for case in request.GET.getlist("case") if case in CASES] or list(CASES)
    return render(request, "benchmark/partials/baseline_progress.html", progress_context(cases))
