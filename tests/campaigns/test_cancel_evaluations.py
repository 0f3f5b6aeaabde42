"""Cancelling a campaign stops its runs' in-flight evaluations at once (not "running" until the stale rule):
they leave the queue and are listed there as cancelled, naming the campaign; a later request runs them again.
A start kernel's evaluation, which other runs may wait on, and other campaigns' evaluations are left alone."""

from __future__ import annotations

import pytest

from benchmark.models import Evaluation, EvaluationStatus, Kernel, KernelOrigin
from benchmark.services import source_sha256
from campaigns.services import cancel_campaign, create_campaign
from optimizer.models import Run

from .conftest import TINY

pytestmark = pytest.mark.django_db(transaction=True)


def _written_by(run: Run, text: str) -> Kernel:
    source = f"# {text}\n" + run.start_kernel.source
    return Kernel.objects.create(problem=run.problem, source=source, sha256=source_sha256(source),
                                 origin=KernelOrigin.GENERATED, run_id=run.pk)


def _in_flight(kernel: Kernel, status: str = EvaluationStatus.RUNNING) -> Evaluation:
    return Evaluation.objects.create(kernel=kernel, backend_version="v", status=status)


def test_cancelling_a_campaign_cancels_its_runs_evaluations_at_once(client, owner, problems):
    campaign = create_campaign(owner, problems=["double", "triple"], search=TINY, max_concurrent_runs=2)
    other = create_campaign(owner, problems=["quad"], search=TINY)
    first, second = campaign.entries.order_by("position")
    running = _in_flight(_written_by(first.run, "a"))
    queued = _in_flight(_written_by(second.run, "b"), EvaluationStatus.QUEUED)
    start = _in_flight(first.run.start_kernel)  # the baseline: other runs may wait on it
    elsewhere = _in_flight(_written_by(other.entries.get().run, "c"))
    client.force_login(owner)
    assert client.get("/ops/evaluations/?format=json").json()["running"] == 3

    cancel_campaign(campaign, owner)
    for evaluation in (running, queued, start, elsewhere):
        evaluation.refresh_from_db()
    for evaluation in (running, queued):
        assert (evaluation.status, evaluation.error_kind) == (EvaluationStatus.DONE, "infrastructure_error")
        assert evaluation.error_message == f"cancelled: campaign {campaign.pk} was cancelled by olga"
    assert start.status == elsewhere.status == EvaluationStatus.RUNNING

    report = client.get("/ops/evaluations/?format=json").json()
    assert {row["evaluation_id"] for row in report["evaluations"]} == {start.pk, elsewhere.pk}
    assert sorted((row["evaluation_id"], row["status"]) for row in report["cancelled"]) == [
        (running.pk, "cancelled"), (queued.pk, "cancelled")]
    assert report["cancelled"][0]["reason"] == f"campaign {campaign.pk} was cancelled by olga"
    page = client.get("/ops/evaluations/").content.decode()
    assert 'id="evaluation-cancelled"' in page and f"campaign {campaign.pk} was cancelled by olga" in page


def test_a_run_waiting_on_an_evaluation_cancelled_with_its_campaign_stops_instead_of_retrying(owner, problems):
    from optimizer.adapters.evaluation import DjangoEvaluator, RunCancelled

    campaign = create_campaign(owner, problems=["double"], search=TINY)
    run = campaign.entries.get().run
    waited_on = _in_flight(_written_by(run, "a"))
    evaluator = DjangoEvaluator(run, poll_interval_s=0.01)
    cancel_campaign(campaign, owner)
    # The row now reads as an infrastructure error, which the search would run again: the run stops instead.
    with pytest.raises(RunCancelled):
        evaluator._wait({0: waited_on})
