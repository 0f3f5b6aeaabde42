"""Issue 36: a campaign's runs count against its owner's runs quota like any other run of theirs. Several campaigns,
or a campaign beside single runs, never put more of one person's runs in the queue than
ACCELOPT_QUOTA_RUNS_IN_FLIGHT; a problem left waiting says why, and starts once one of their runs ends."""

from __future__ import annotations

import pytest

from campaigns.models import EntryStatus
from campaigns.services import create_campaign
from optimizer import services as optimizer_services
from optimizer.models import Run, RunStatus

from .conftest import TINY, make_problem

pytestmark = pytest.mark.django_db(transaction=True)


def _in_flight(owner) -> int:
    return Run.objects.filter(owner=owner, status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).count()


def test_campaigns_launch_no_more_runs_than_the_owner_has_room_for(problems, owner, settings):
    settings.ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 2
    make_problem("half", 5.0)
    single = optimizer_services.create_run(owner, problems[0], search=TINY)
    first = create_campaign(owner, problems=["double", "triple"], search=TINY, max_concurrent_runs=2)
    second = create_campaign(owner, problems=["quad", "half"], search=TINY, max_concurrent_runs=2)
    assert _in_flight(owner) == 2  # the single run and one of the first campaign's; none of the second's
    assert [e.status for e in first.entries.order_by("position")] == [EntryStatus.RELEASED, EntryStatus.PENDING]
    waiting = second.entries.order_by("position").first()
    assert waiting.status == EntryStatus.PENDING
    assert waiting.note.startswith("waiting for a place (ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 2): its owner has 2 ")

    # The single run ends: its place goes to the campaign that was waiting first, and its note is gone.
    optimizer_services.cancel_run(single, owner)
    assert _in_flight(owner) == 2
    entries = list(first.entries.order_by("position"))
    assert [e.status for e in entries] == [EntryStatus.RELEASED, EntryStatus.RELEASED]
    assert entries[1].note == ""
    assert second.entries.filter(status=EntryStatus.RELEASED).count() == 0


def test_without_a_quota_each_campaign_runs_as_many_as_it_may(problems, owner, settings):
    settings.ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 0
    create_campaign(owner, problems=["double", "triple"], search=TINY, max_concurrent_runs=2)
    create_campaign(owner, problems=["quad"], search=TINY, max_concurrent_runs=2)
    assert _in_flight(owner) == 3
