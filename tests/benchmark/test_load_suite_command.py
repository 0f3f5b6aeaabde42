"""python manage.py load_suite nkibench: idempotent, and it evaluates each mini baseline on trn1 once."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from benchmark.models import Evaluation, Kernel, Problem


def load(*args: str) -> str:
    out = StringIO()
    call_command("load_suite", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_loading_twice_creates_the_28_problem_cases_and_their_baselines_once(fake_pipeline, db):
    first = load("nkibench")
    assert "28 problems (28 new)" in first
    assert "14 baseline evaluations: 14 correct" in first
    second = load("nkibench")
    assert "28 problems (0 new), 0 new baseline kernels" in second
    assert Problem.objects.count() == 28
    assert Kernel.objects.filter(origin="baseline").count() == 28
    assert Evaluation.objects.count() == 14
    assert len(fake_pipeline.calls) == 14  # the second load found every evaluation in the cache


def test_mini_baselines_are_evaluated_on_trn1_and_full_ones_only_when_asked(fake_pipeline, db):
    load("nkibench")
    assert set(Evaluation.objects.values_list("kernel__problem__case", "platform")) == {("mini", "trn1")}
    load("nkibench", "--evaluate", "full", "--platform", "trn2")
    assert ("full", "trn2") in set(Evaluation.objects.values_list("kernel__problem__case", "platform"))


def test_every_problem_points_at_its_current_baseline(fake_pipeline, db):
    load("nkibench", "--evaluate", "none")
    for problem in Problem.objects.select_related("baseline_kernel"):
        assert problem.baseline_kernel.origin == "baseline"
        assert problem.baseline_kernel.problem_id == problem.pk


def test_an_unknown_suite_is_refused_naming_the_built_in_ones(db):
    with pytest.raises(CommandError, match="nkibench"):
        load("nosuch")
