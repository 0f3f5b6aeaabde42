"""A campaign page says "Live" only while the campaign can still move; a finished one says when it finished."""

from __future__ import annotations

import pytest

from campaigns.models import Campaign, CampaignStatus

from .test_progress_and_exports import finished_campaign

pytestmark = pytest.mark.django_db(transaction=True)  # the campaign command's worker commits


def test_a_finished_campaign_says_it_no_longer_updates_and_a_running_one_is_live(
        client, owner, fake_pipeline, problems, fake_agents):
    done = finished_campaign("double")
    assert done.is_finished and done.finished
    Campaign.objects.filter(pk=done.pk).update(is_public=True)  # the command launches it without an owner
    page = client.get(f"/campaigns/{done.pk}/").content.decode()
    assert "Live:" not in page and "ws-connect" not in page
    assert "this page no longer updates" in page and 'data-done="finished ' in page

    Campaign.objects.filter(pk=done.pk).update(status=CampaignStatus.RUNNING, finished=None)
    page = client.get(f"/campaigns/{done.pk}/").content.decode()
    assert "Live:" in page and "ws-connect" in page and 'data-done=""' in page
