"""A campaign asked to return kernels in the current NKI generation: every run it launches is created with the
option by the run's own launch service, so the offline agent writes NKI 0.6 (the `nki` package) from NKIBench's
legacy baselines; a campaign whose problems are not NKI is refused with the run's message."""

from __future__ import annotations

import asyncio

import pytest

from benchmark.models import Kernel, Problem
from campaigns.models import Campaign
from engine.platforms.nki.generations import CURRENT
from optimizer.models import Run, RunStatus
from optimizer.worker import claim_run, drive_run, new_worker_id

pytestmark = pytest.mark.django_db(transaction=True)

SMALL = {"iterations": 1, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1}
NOT_NKI = "returning kernels in the current NKI generation is an option of NKI problems; double:mini is a triton problem"


@pytest.fixture
def nkibench(db) -> None:
    from benchmark.services import load_suite

    load_suite("nkibench", evaluate_cases=())


def _drive(run: Run) -> Run:
    worker = new_worker_id()
    assert claim_run(worker, run.pk) == run.pk
    asyncio.run(drive_run(run.pk, worker))
    run.refresh_from_db()
    return run


def test_a_campaign_launched_through_the_api_returns_nki_0_6_kernels(client, owner, nkibench, settings):
    settings.ACCELOPT_EVALUATION_INLINE = True
    client.force_login(owner)
    response = client.post("/api/campaigns", {"problems": ["silu"], "case": "mini", "search": SMALL,
                                              "current_generation": True}, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["config"]["current_generation"] is True
    campaign = Campaign.objects.get(pk=response.json()["id"])
    assert "Every run returns kernels in the current NKI generation" in client.get(f"/campaigns/{campaign.pk}/").content.decode()
    run = _drive(Run.objects.get(campaign_entry__campaign=campaign))
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    assert run.config["nki_generation"] == CURRENT
    written = Kernel.objects.filter(run_id=run.pk)
    assert written.exists()
    for kernel in written:  # the offline agent's kernels import the nki package, never the legacy namespace
        assert "import nki.language as nl" in kernel.source and "neuronxcc" not in kernel.source


def test_the_campaign_form_offers_the_run_forms_option(client, owner, nkibench):
    client.force_login(owner)
    page = client.get("/campaigns/new/").content.decode()
    assert 'name="current_generation"' in page and "Return kernels in the current NKI generation" in page
    response = client.post("/campaigns/new/", {
        "problems": ["silu"], "case": "mini", "platform": "trn1", "backend": "simulator", "agent": "offline",
        "iterations": 1, "beam_width": 1, "plans_per_candidate": 1, "samples_per_plan": 1,
        "rewrites_per_iteration": 2, "memory_size": 2, "memory": "on", "seed": 0, "strategy": "beam",
        "memory_mode": "accelopt", "current_generation": "on",
    })
    assert response.status_code == 302, response.content.decode()[-2000:]
    run = Run.objects.get()
    assert run.config["nki_generation"] == CURRENT
    assert "import nki.language as nl" in run.start_kernel.source  # the legacy baseline's migration


@pytest.fixture
def triton_problem(problems) -> Problem:
    Problem.objects.filter(slug="double").update(language="triton")
    return Problem.objects.get(slug="double")


def test_a_campaign_of_triton_problems_is_refused_the_option(client, owner, triton_problem):
    client.force_login(owner)
    response = client.post("/api/campaigns", {"problems": ["double"], "platform": "h100", "current_generation": True},
                           content_type="application/json")
    assert response.status_code == 400 and response.json()["detail"] == NOT_NKI
    assert not Campaign.objects.exists() and not Run.objects.exists()
