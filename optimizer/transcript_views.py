"""Pages over agent transcripts: one generated kernel's chain of agent calls, and the leaderboard grid
(problem x agent and models) whose cells open the run and the transcript of its best kernel."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from benchmark.models import Platform
from engine.platforms.registry import DEFAULT_PLATFORM
from optimizer.transcripts import kernel_transcript, leaderboard_grid

CASES = ("full", "mini")


@require_GET
def transcript(request: HttpRequest, pk: int, kernel_pk: int) -> HttpResponse:
    return render(request, "optimizer/transcript.html", {"transcript": kernel_transcript(request.user, pk, kernel_pk)})


@require_GET
def grid(request: HttpRequest) -> HttpResponse:
    platform = request.GET.get("platform", DEFAULT_PLATFORM.value)
    if platform not in Platform.values:
        platform = DEFAULT_PLATFORM.value
    case = request.GET.get("case", CASES[0])
    if case not in CASES:
        case = CASES[0]
    return render(request, "optimizer/grid.html", {
        "grid": leaderboard_grid(request.user, platform, case), "cases": CASES, "platforms": Platform.choices,
    })
