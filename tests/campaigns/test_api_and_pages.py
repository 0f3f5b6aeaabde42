"""/api/campaigns and the campaign pages: the same service behind the form, the API and the command."""

from __future__ import annotations

import pytest

from campaigns.models import Campaign, CampaignStatus
from campaigns.services import create_campaign
from optimizer.models import Run

from .conftest import TINY
from .test_progress_and_exports import finished_campaign

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def owner_client(client, owner):
    client.force_login(owner)
    return client


def test_an_engineer_launches_a_campaign_through_the_api(owner_client, problems):
    response = owner_client.post("/api/campaigns", {"problems": ["double", "triple"], "search": TINY,
                                                    "budgets": {"max_evaluations": 50}},
                                 content_type="application/json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "running" and body["budgets"]["max_evaluations"] == 50
    assert [row["problem"] for row in body["rows"]] == ["double:mini", "triple:mini"]
    assert [row["state"] for row in body["rows"]] == ["queued", "pending"]
    assert owner_client.get(f"/api/campaigns/{body['id']}").json()["id"] == body["id"]
    assert [c["id"] for c in owner_client.get("/api/campaigns").json()] == [body["id"]]


def test_api_errors_name_what_is_wrong(owner_client, client, problems):
    response = owner_client.post("/api/campaigns", {"problems": ["double"], "search": {"beam": 3}},
                                 content_type="application/json")
    assert response.status_code == 400 and "beam" in response.json()["detail"]
    response = owner_client.post("/api/campaigns", {"problems": ["nothing"]}, content_type="application/json")
    assert response.status_code == 404 and "nothing" in response.json()["detail"]
    client.logout()
    assert client.post("/api/campaigns", {"problems": ["double"]}, content_type="application/json").status_code == 401


def test_cancel_and_export_through_the_api(owner_client, owner, problems, teammate, client):
    campaign = create_campaign(owner, problems=["double"], search=TINY, is_public=True)
    assert owner_client.get(f"/api/campaigns/{campaign.pk}/export.csv").status_code == 400  # still running
    client.force_login(teammate)
    assert client.post(f"/api/campaigns/{campaign.pk}/cancel").status_code == 403
    client.force_login(owner)
    response = client.post(f"/api/campaigns/{campaign.pk}/cancel")
    assert response.status_code == 200 and response.json()["status"] == CampaignStatus.CANCELLED
    response = client.get(f"/api/campaigns/{campaign.pk}/export.csv")
    assert response.status_code == 200 and response.content.decode().startswith("problem,run_id,state")


def test_private_campaigns_are_hidden_from_others(client, owner, teammate, problems):
    campaign = create_campaign(owner, problems=["double"], search=TINY)
    assert client.get(f"/campaigns/{campaign.pk}/").status_code == 404
    client.force_login(teammate)
    assert client.get(f"/api/campaigns/{campaign.pk}").status_code == 404


def test_the_form_launches_a_campaign_and_shows_its_page(owner_client, problems):
    page = owner_client.get("/campaigns/new/")
    assert page.status_code == 200 and b"15" in page.content  # AccelOpt's iterations as the default
    response = owner_client.post("/campaigns/new/", {
        "name": "three minis", "problems": ["double", "triple", "quad"], "case": "mini", "platform": "trn1",
        "backend": "simulator", "agent": "offline", "iterations": 1, "beam_width": 1, "plans_per_candidate": 1,
        "samples_per_plan": 1, "rewrites_per_iteration": 2, "memory_size": 2, "memory": "on", "seed": 0,
        "strategy": "repeated_sampling", "memory_mode": "accelopt",
    })
    campaign = Campaign.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/campaigns/{campaign.pk}/"
    assert campaign.name == "three minis" and campaign.config["search"]["iterations"] == 1
    assert (campaign.config["search"]["strategy"], campaign.config["search"]["memory_mode"]) == (
        "repeated_sampling", "accelopt")
    page = owner_client.get(response["Location"]).content.decode()
    assert "three minis" in page and "double:mini" in page and "quad:mini" in page
    assert f'ws-connect="/ws/campaigns/{campaign.pk}/"' in page
    assert Run.objects.count() == 1


def test_the_form_refuses_a_suite_and_problems_together(owner_client, problems):
    response = owner_client.post("/campaigns/new/", {"suite": "nkibench", "problems": ["double"], "case": "mini"})
    assert response.status_code == 200 and b"not both" in response.content
    assert not Campaign.objects.exists()


def test_finished_campaign_pages_exports_and_compare(client, fake_pipeline, problems, fake_agents):
    first = finished_campaign("double,triple")
    second = finished_campaign("double,triple", "--no-memory")
    Campaign.objects.update(is_public=True)
    page = client.get(f"/campaigns/{first.pk}/").content.decode()
    assert "Export:" in page and "plotly" in page.lower()
    fragment = client.get(f"/campaigns/{first.pk}/progress/").content.decode()
    assert 'data-problem="triple:mini"' in fragment
    csv_response = client.get(f"/campaigns/{first.pk}/export.csv")
    assert csv_response.status_code == 200 and csv_response["Content-Type"] == "text/csv"
    assert client.get(f"/campaigns/{first.pk}/export.json").json()["id"] == first.pk
    compare = client.get(f"/campaigns/compare/?ids={first.pk}&ids={second.pk}").content.decode()
    assert compare.count('data-campaign="') == 2 and 'data-problem="double:mini"' in compare
    assert "at least two" in client.get(f"/campaigns/compare/?ids={first.pk}").content.decode()
    listing = client.get("/campaigns/").content.decode()
    assert f'value="{first.pk}"' in listing and f'value="{second.pk}"' in listing
