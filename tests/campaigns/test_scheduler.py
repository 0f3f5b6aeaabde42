"""The scheduler: campaigns share the worker pool first come, first served, one run at a time each; a campaign
budget stops the campaign cleanly (what its runs found is kept, the problems not yet launched are skipped)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from campaigns.models import CampaignStatus, EntryStatus
from campaigns.progress import campaign_rows
from campaigns.services import cancel_campaign, create_campaign
from campaigns.usage import campaign_usage
from optimizer import services as optimizer_services
from optimizer.models import Run, RunStatus
from optimizer.worker import RunWorker

from .conftest import TINY, make_problem

pytestmark = pytest.mark.django_db(transaction=True)


def drive_all(agents_factory, limit: int = 20) -> list[int]:
    """Let one worker take queued runs (oldest first) until none is left; the run ids in the order it took them."""
    taken = []
    worker = RunWorker(agents_factory=agents_factory)
    for _ in range(limit):
        before = set(Run.objects.exclude(status=RunStatus.QUEUED).values_list("pk", flat=True))
        if not async_to_sync(worker.step)():
            break
        taken += sorted(set(Run.objects.exclude(status=RunStatus.QUEUED).values_list("pk", flat=True)) - before)
    return taken


def test_two_campaigns_take_turns_on_one_worker(fake_pipeline, problems, owner, fake_agents_factory):
    make_problem("half", 5.0)
    first = create_campaign(owner, problems=["double", "triple"], search=TINY, max_concurrent_runs=1)
    second = create_campaign(owner, problems=["quad", "half"], search=TINY, max_concurrent_runs=1)
    order = [Run.objects.get(pk=pk).problem.slug for pk in drive_all(fake_agents_factory)]
    # The first campaign's next problem is queued only when its first run ends: behind the second's first run.
    assert order == ["double", "quad", "triple", "half"]
    for campaign in (first, second):
        campaign.refresh_from_db()
        assert campaign.status == CampaignStatus.FINISHED
        assert all(row["speedup"] == pytest.approx(1 / 0.64) for row in campaign_rows(campaign))


def test_an_evaluation_budget_stops_the_campaign_keeping_what_was_found(fake_pipeline, problems, owner,
                                                                        fake_agents_factory):
    campaign = create_campaign(owner, problems=["double", "triple", "quad"], search=TINY,
                               budgets={"max_evaluations": 2})
    drive_all(fake_agents_factory)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.STOPPED_BUDGET and campaign.finished is not None
    assert "evaluations" in campaign.stop_reason
    entries = list(campaign.entries.order_by("position"))
    assert entries[0].run is not None
    assert [e.status for e in entries[1:]] == [EntryStatus.SKIPPED, EntryStatus.SKIPPED]
    first = entries[0].run
    assert first.status != RunStatus.FAILED
    assert first.best_latency_ms is not None and first.best_latency_ms < first.start_latency_ms  # nothing lost
    assert campaign_usage(campaign).evaluations >= 2


def test_a_dollar_budget_stops_the_campaign(fake_pipeline, problems, owner, fake_agents_factory):
    campaign = create_campaign(owner, problems=["double", "triple", "quad"], search=TINY,
                               budgets={"max_cost_usd": 0.004})
    drive_all(fake_agents_factory)
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.STOPPED_BUDGET and "dollars" in campaign.stop_reason
    assert campaign.entries.filter(status=EntryStatus.SKIPPED).exists()
    # The runs that ran stopped cleanly on the dollars left to them and kept what they found.
    ran = [e.run for e in campaign.entries.exclude(run=None).select_related("run")]
    assert ran and all(run.status in (RunStatus.STOPPED, RunStatus.SUCCEEDED) for run in ran)
    assert ran[0].best_latency_ms < ran[0].start_latency_ms
    assert campaign_usage(campaign).cost_usd >= 0.004


def test_cancel_skips_what_was_not_launched_and_cancels_the_queued_run(problems, owner):
    campaign = create_campaign(owner, problems=["double", "triple", "quad"], search=TINY)
    campaign = cancel_campaign(campaign, owner)
    assert campaign.status == CampaignStatus.CANCELLED and campaign.finished is not None
    assert Run.objects.get().status == RunStatus.CANCELLED
    assert campaign.entries.filter(status=EntryStatus.SKIPPED).count() == 2


def test_a_problem_that_can_no_longer_be_launched_is_skipped_naming_why(problems, owner):
    campaign = create_campaign(owner, problems=["double", "triple"], search=TINY)
    owner.groups.clear()  # the owner is no engineer any more when the next problem's turn comes
    optimizer_services.cancel_run(Run.objects.get(), owner)  # its run ends: the scheduler moves on
    campaign.refresh_from_db()
    second = campaign.entries.get(position=1)
    assert second.status == EntryStatus.SKIPPED and "only engineers" in second.note
    assert campaign.status == CampaignStatus.FINISHED and campaign.finished is not None


def test_runs_going_at_once_share_the_campaign_budget(fake_pipeline, problems, owner, fake_agents_factory):
    campaign = create_campaign(owner, problems=["double", "triple", "quad"], search=TINY, max_concurrent_runs=2,
                               budgets={"max_evaluations": 9, "max_cost_usd": 1.0})
    first, second = Run.objects.order_by("pk")
    # Two launched together: half each of what the campaign has; never more than the campaign together.
    assert (first.max_evaluations, second.max_evaluations) == (4, 4)
    assert first.max_cost_usd == second.max_cost_usd == pytest.approx(0.5)
    drive_all(fake_agents_factory)
    campaign.refresh_from_db()
    assert campaign_usage(campaign).evaluations <= 9
    third = campaign.entries.get(position=2).run
    assert third is None or third.max_evaluations <= 9 - 4
