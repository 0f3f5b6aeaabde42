"""The suite's baselines evaluate in the background after the first start, and the pages show how far they are.

`make run` serves at once; the serving process evaluates the baselines (mini first, then full) one at a
time, and the leaderboard and problem list show a progress fragment that polls until they are done.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from benchmark import conf
from benchmark.models import Evaluation, EvaluationStatus
from benchmark.services.baselines import baseline_progress, evaluate_baselines


def test_a_fresh_install_reports_every_baseline_as_not_started(nkibench):
    progress = baseline_progress("full")
    assert (progress.total, progress.done, progress.not_started) == (14, 0, 14)
    assert not progress.complete


def test_the_background_pass_evaluates_mini_before_full_and_reports_progress(fake_pipeline, nkibench):
    evaluate_baselines(["mini", "full"])
    cases = [call["reference_source"] for call in fake_pipeline.calls]
    assert len(cases) == 28
    mini_refs = {p.reference_source for p in nkibench if p.case == "mini"}
    assert all(ref in mini_refs for ref in cases[:14]) and not any(ref in mini_refs for ref in cases[14:])
    for case in ("mini", "full"):
        progress = baseline_progress(case)
        assert (progress.done, progress.correct, progress.total, progress.complete) == (14, 14, 14, True)


def test_a_second_pass_runs_nothing_already_evaluated(fake_pipeline, nkibench):
    evaluate_baselines(["mini"])
    evaluate_baselines(["mini"])
    assert len(fake_pipeline.calls) == 14


def test_running_and_failed_baselines_are_counted_apart(fake_pipeline, nkibench):
    from engine.evaluator.result import ErrorKind

    fake_pipeline.fail_next(ErrorKind.INCORRECT, "wrong")
    evaluate_baselines(["mini"])
    first = Evaluation.objects.filter(kernel__problem__case="mini").order_by("kernel__problem__slug").first()
    progress = baseline_progress("mini")
    assert progress.failed == [first.kernel.problem.address] and progress.correct == 13
    Evaluation.objects.filter(pk=first.pk).update(status=EvaluationStatus.RUNNING)
    progress = baseline_progress("mini")
    assert (progress.running, progress.done) == (1, 13)


def test_the_progress_fragment_counts_and_polls_while_unfinished(client, nkibench, settings):
    settings.ACCELOPT_BACKGROUND_BASELINES = "mini,full"
    html = client.get(reverse("benchmark:baseline_progress") + "?case=full").content.decode()
    assert "0 of 14" in html and 'hx-trigger="every 5s"' in html


def test_the_fragment_stops_polling_once_every_baseline_is_done(client, fake_pipeline, nkibench, settings):
    settings.ACCELOPT_BACKGROUND_BASELINES = "mini,full"
    evaluate_baselines(["mini"])
    html = client.get(reverse("benchmark:baseline_progress") + "?case=mini").content.decode()
    assert "hx-trigger" not in html and "Evaluating" not in html


def test_with_background_evaluation_off_the_fragment_says_how_to_evaluate(client, nkibench, settings):
    settings.ACCELOPT_BACKGROUND_BASELINES = "none"
    html = client.get(reverse("benchmark:baseline_progress") + "?case=full").content.decode()
    assert "load_suite --evaluate full" in html and "hx-trigger" not in html


def test_an_unknown_case_in_the_setting_is_refused_by_name(settings):
    settings.ACCELOPT_BACKGROUND_BASELINES = "mini,huge"
    with pytest.raises(ImproperlyConfigured, match="huge"):
        conf.background_baseline_cases()


def test_a_case_left_out_of_the_background_pass_is_not_shown_as_being_evaluated(client, nkibench, settings):
    settings.ACCELOPT_BACKGROUND_BASELINES = "mini"
    html = client.get(reverse("benchmark:baseline_progress") + "?case=full").content.decode()
    assert "Evaluating" not in html and "load_suite --evaluate full" in html
