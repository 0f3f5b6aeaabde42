"""A platform no measurement has checked the performance model on says so (issue 34): its NKIBench board and
an evaluation's panel carry "uncalibrated"; trn1, whose model is fitted to measurements, does not."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from benchmark.models import Evaluation, EvaluationStatus, Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256


@pytest.mark.parametrize(("platform", "shown"), [("trn1", False), ("trn2", True), ("trn3", True)])
def test_the_board_of_an_uncalibrated_platform_says_so(client, db, platform, shown):
    html = client.get(reverse("benchmark:leaderboard") + f"?platform={platform}&case=mini").content.decode()
    assert ('data-testid="uncalibrated"' in html) is shown
    assert 'href="?platform=trn3&amp;case=mini"' in html or 'href="?platform=trn3&case=mini"' in html


@pytest.mark.parametrize(("platform", "shown"), [("trn1", False), ("trn3", True)])
def test_a_simulated_evaluation_on_an_uncalibrated_platform_says_so(db, platform, shown):
    problem = Problem.objects.create(slug="silu", case="mini", reference_source="# silu", parameters={})
    source = "# kernel\n"
    kernel = Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                                   origin=KernelOrigin.UPLOADED, name="k")
    evaluation = Evaluation.objects.create(kernel=kernel, platform=platform, backend="simulator",
                                           backend_version="nki-sim 1.3 + perf-10", status=EvaluationStatus.DONE,
                                           compiled=True, runnable=True, correct=True, latency_ms=1.0)
    html = render_to_string("benchmark/partials/evaluation.html", {"evaluation": evaluation})
    assert ('data-testid="uncalibrated"' in html) is shown
