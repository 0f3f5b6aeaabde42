"""A run's page links to the campaign that launched it (through optimizer.run_links: the optimizer does not
import campaigns), only for someone who may see that campaign; a run launched alone shows no such link."""

from __future__ import annotations

import pytest

from campaigns.services import create_campaign
from optimizer.models import Run

from .conftest import TINY

pytestmark = pytest.mark.django_db(transaction=True)


def _run_page(client, run: Run) -> str:
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_campaign_run_links_to_its_campaign(client, owner, problems):
    campaign = create_campaign(owner, name="minis", problems=["double"], search=TINY)
    run = Run.objects.get()
    client.force_login(owner)
    page = _run_page(client, run)
    assert f'Part of campaign <a href="/campaigns/{campaign.pk}/" data-testid="run-link">minis</a>' in page


def test_someone_who_cannot_see_the_campaign_sees_the_run_without_the_link(client, owner, teammate, problems):
    create_campaign(owner, problems=["double"], search=TINY)  # private
    run = Run.objects.get()
    Run.objects.filter(pk=run.pk).update(is_public=True)
    client.force_login(teammate)
    assert "Part of campaign" not in _run_page(client, run)


def test_a_run_launched_alone_has_no_campaign_link(client, owner, problems):
    create_campaign(owner, problems=["double"], search=TINY)
    run = Run.objects.get()
    run.campaign_entry.delete()
    client.force_login(owner)
    assert "Part of campaign" not in _run_page(client, run)
