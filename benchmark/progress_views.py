"""The fragment showing how far the background evaluation of the suite's baselines has come.

Included by the leaderboard and the problems list, and polled by htmx while baselines are unfinished.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from benchmark import conf
from benchmark.services.baselines import baseline_progress

CASES = ("mini", "full")


def progress_context(cases: Sequence[str] = CASES) -> dict[str, Any]:
    """The partial's context: one BaselineProgress per case, and whether the fragment should keep polling."""
    background = bool(conf.background_baseline_cases())
    progresses = [baseline_progress(case) for case in cases]
    poll = any(p.pending for p in progresses) or (background and any(not p.complete and p.total for p in progresses))
    return {"progresses": progresses, "poll": poll, "background": background,
            "query": "&".join(f"case={case}" for case in cases)}


@require_GET
def baseline_progress_fragment(request: HttpRequest) -> HttpResponse:
    cases = [case for case in request.GET.getlist("case") if case in CASES] or list(CASES)
    return render(request, "benchmark/partials/baseline_progress.html", progress_context(cases))
