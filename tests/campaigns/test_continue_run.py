"""A campaign's run that its share of the campaign budget stopped cannot be continued on its own: the campaign
it belongs to keeps its totals and its finished state. The API, the run page and `manage.py optimize
--continue` all say why (optimizer.services.continue_refusal)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from campaigns.models import CampaignStatus
from campaigns.services import create_campaign
from optimizer import services as optimizer_services
from optimizer.models import RunStatus

from .conftest import TINY
from .test_scheduler import drive_all

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_campaign_run_stopped_by_its_budget_share_is_not_continued(fake_pipeline, problems, owner,
                                                                     fake_agents_factory, client):
    campaign = create_campaign(owner, problems=["double", "triple"], search=TINY, budgets={"max_evaluations": 2})
    drive_all(fake_agents_factory)
    run = campaign.entries.exclude(run=None).get(position=0).run
    assert run.status == RunStatus.STOPPED
    with pytest.raises(ValidationError, match=f"run {run.pk} belongs to a campaign"):
        optimizer_services.continue_run(run, owner, {"max_evaluations": 10})
    client.force_login(owner)
    answer = client.post(f"/api/runs/{run.pk}/continue", {"budget": {}}, content_type="application/json")
    assert answer.status_code == 400 and "belongs to a campaign" in answer.json()["detail"]
    run.refresh_from_db()
    campaign.refresh_from_db()
    assert run.status == RunStatus.STOPPED and campaign.status == CampaignStatus.STOPPED_BUDGET
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Continue with more budget" not in page
    assert f"Not continued with more budget: run {run.pk} belongs to a campaign" in page
    with pytest.raises(CommandError, match=f"run {run.pk} belongs to a campaign"):
        call_command("optimize", "--continue", str(run.pk), "--max-evaluations", "10")
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED
