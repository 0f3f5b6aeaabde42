"""Repeated sampling end to end, offline: `manage.py optimize --strategy repeated_sampling` on a real NKIBench mini
case through the simulator writes as many kernels as beam search with the same parameters, all from the start."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from optimizer.models import Candidate, Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

ARGS = ("--problem", "rope_single_freq_apply:mini", "--iterations", "2", "--beam", "2", "--plans", "2", "--samples", "1")


def test_repeated_sampling_spends_the_beams_budget_on_samples_from_the_start_kernel(settings):
    from benchmark.services import load_suite

    settings.ACCELOPT_EVALUATION_INLINE = True
    load_suite("nkibench", evaluate_cases=())
    runs = {}
    for strategy in ("beam", "repeated_sampling"):
        call_command("optimize", *ARGS, "--strategy", strategy, stdout=StringIO())
        runs[strategy] = Run.objects.order_by("-pk").first()
    for strategy, run in runs.items():
        assert run.status == RunStatus.SUCCEEDED, (strategy, run.error_message)
        assert run.config["search"]["strategy"] == strategy
    sampled = Candidate.objects.filter(iteration__run=runs["repeated_sampling"])
    beam = Candidate.objects.filter(iteration__run=runs["beam"])
    assert sampled.count() == beam.count() > 2  # the same Executor budget
    assert set(sampled.values_list("parent_kernel_id", flat=True)) == {runs["repeated_sampling"].start_kernel_id}
    # Each distinct kernel is evaluated once (the start kernel too): the Executor budget bounds the evaluations.
    for strategy, candidates in (("repeated_sampling", sampled), ("beam", beam)):
        assert 1 < runs[strategy].usage.evaluations <= candidates.count() + 1
