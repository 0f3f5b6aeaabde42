"""The leaderboard pages: the NKIBench boards (one per case, simulated and measured apart), and the fragment
showing how far the background evaluation of the suite's baselines has come.

A platform of another kernel language (Triton on a GPU) gets its own board from `benchmark.views.leaderboard`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from benchmark import services, views
from benchmark.boards import CASES as BOARD_CASES
from benchmark.boards import best_over_time, build_board
from benchmark.display import best_over_time_figure_html, board_figure_html
from benchmark.models import Platform
from benchmark.platforms import DEFAULT_PLATFORM, NKI, get_definition
from benchmark.services.baselines import baseline_progress

CASES = ("mini", "full")


@require_GET
def leaderboard(request: HttpRequest) -> HttpResponse:
    """Public: the NKIBench board of one case on one platform (full by default), or another language's board."""
    platform = request.GET.get("platform", DEFAULT_PLATFORM.value)
    if platform not in Platform.values:
        platform = DEFAULT_PLATFORM.value
    if get_definition(platform).language != NKI:
        return views.leaderboard(request)
    case = request.GET.get("case", BOARD_CASES[0])
    if case not in BOARD_CASES:
        case = BOARD_CASES[0]
    board = build_board(platform, case, user=request.user)
    return render(request, "benchmark/nki_board.html", {
        "board": board,
        "platform": platform,
        "case": case,
        "cases": BOARD_CASES,
        "platforms": Platform.choices,
        "chart": board_figure_html(board),
        "history_chart": best_over_time_figure_html(best_over_time(board)),
        "can_launch": services.can_create_kernels(request.user),
        **progress_context([case]),
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
