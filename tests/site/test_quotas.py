"""Issue 36: per-person quotas on evaluations queued and runs in flight, refused with a message naming the
limit on every path (API 429, pages as a form error), and the admin's table of who is near a limit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from accounts.quotas import QuotaExceeded
from benchmark import services
from benchmark.models import Evaluation, EvaluationStatus, Problem
from optimizer.models import Run, RunStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluations are queued and stay queued: what the quota counts."""
    monkeypatch.setattr("benchmark.services.evaluations._submit", lambda evaluation: None)


@pytest.fixture
def silu(db: Any) -> Problem:
    services.load_suite("nkibench", evaluate_cases=())
    return Problem.objects.get(suite="nkibench", slug="silu", case="mini")


def _kernel(n: int) -> str:
    return f"import numpy as np\n\ndef kernel(x):\n    return x * {n}\n"


def test_the_api_refuses_an_evaluation_past_the_quota_naming_the_limit(
    client, engineer, make_token: Callable[[Any], str], silu, queue_only, settings
):
    settings.ACCELOPT_QUOTA_QUEUED_EVALUATIONS = 3
    headers = {"Authorization": f"Bearer {make_token(engineer)}"}
    for n in range(3):
        response = client.post("/api/kernels", {"problem": "silu:mini", "source": _kernel(n)},
                               content_type="application/json", headers=headers)
        assert response.status_code == 201, response.content
    refused = client.post("/api/kernels", {"problem": "silu:mini", "source": _kernel(9)},
                          content_type="application/json", headers=headers)
    assert refused.status_code == 429
    detail = refused.json()["detail"]
    assert "You have 3 evaluations queued or running" in detail
    assert "limit of 3 per person (ACCELOPT_QUOTA_QUEUED_EVALUATIONS)" in detail
    # Refused before anything was stored, and nothing more queued.
    assert not services.find_kernels(engineer).filter(source=_kernel(9)).exists()
    assert Evaluation.objects.filter(requested_by=engineer).count() == 3


def test_a_finished_evaluation_frees_its_place(client, engineer, make_token, silu, queue_only, settings):
    settings.ACCELOPT_QUOTA_QUEUED_EVALUATIONS = 1
    headers = {"Authorization": f"Bearer {make_token(engineer)}"}
    assert client.post("/api/kernels", {"problem": "silu:mini", "source": _kernel(1)},
                       content_type="application/json", headers=headers).status_code == 201
    assert client.post("/api/kernels", {"problem": "silu:mini", "source": _kernel(2)},
                       content_type="application/json", headers=headers).status_code == 429
    Evaluation.objects.filter(requested_by=engineer).update(status=EvaluationStatus.DONE)
    assert client.post("/api/kernels", {"problem": "silu:mini", "source": _kernel(2)},
                       content_type="application/json", headers=headers).status_code == 201


def test_a_folder_import_over_the_quota_stores_nothing(client, engineer, make_token, silu, queue_only, settings):
    settings.ACCELOPT_QUOTA_QUEUED_EVALUATIONS = 2
    from django.core.files.uploadedfile import SimpleUploadedFile

    files = [SimpleUploadedFile(f"k{n}.py", _kernel(n).encode()) for n in range(3)]
    response = client.post("/api/kernels/import", {"files": files, "problem": "silu:mini"},
                           headers={"Authorization": f"Bearer {make_token(engineer)}"})
    assert response.status_code == 429
    assert "3 more would make 3, over the limit of 2" in response.json()["detail"]
    assert not services.find_kernels(engineer, mine=True).exists()


def test_the_run_quota_refuses_a_run_on_the_api_and_the_page(client, engineer, make_token, silu, settings):
    settings.ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 1
    headers = {"Authorization": f"Bearer {make_token(engineer)}"}
    body = {"problem": "silu:mini", "search": {"iterations": 1}}
    assert client.post("/api/runs", body, content_type="application/json", headers=headers).status_code == 201
    refused = client.post("/api/runs", body, content_type="application/json", headers=headers)
    assert refused.status_code == 429
    assert "You have 1 optimization runs queued or running" in refused.json()["detail"]
    assert "(ACCELOPT_QUOTA_RUNS_IN_FLIGHT)" in refused.json()["detail"]
    client.force_login(engineer)
    page = client.post("/runs/new/", {
        "problem": silu.pk, "start": "baseline", "platform": "trn1", "backend": "simulator", "agent": "offline",
        "iterations": 1, "beam_width": 1, "plans_per_candidate": 1, "samples_per_plan": 1, "memory_size": 4,
        "seed": 0, "strategy": "beam",
    })
    assert page.status_code == 200  # the form again, saying why
    assert "over the limit of 1 per person" in page.content.decode()
    assert Run.objects.filter(owner=engineer).count() == 1


def test_resuming_a_paused_run_counts_against_the_quota(client, engineer, make_token, silu, settings):
    settings.ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 1
    headers = {"Authorization": f"Bearer {make_token(engineer)}"}
    body = {"problem": "silu:mini", "search": {"iterations": 1}}
    first = client.post("/api/runs", body, content_type="application/json", headers=headers).json()["id"]
    Run.objects.filter(pk=first).update(status=RunStatus.PAUSED)
    client.post("/api/runs", body, content_type="application/json", headers=headers)
    response = client.post(f"/api/runs/{first}/resume", headers=headers)
    assert response.status_code == 429
    assert Run.objects.get(pk=first).status == RunStatus.PAUSED
    client.force_login(engineer)
    page = client.post(f"/runs/{first}/resume/", follow=True)  # the run page's button: said on the page
    assert page.status_code == 200 and "over the limit of 1 per person" in page.content.decode()
    assert Run.objects.get(pk=first).status == RunStatus.PAUSED


def test_the_admin_sees_who_is_near_a_limit(client, engineer, teammate, site_admin, silu, settings):
    settings.ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 5
    for _ in range(4):  # 80%: near
        Run.objects.create(problem=silu, start_kernel=silu.baseline_kernel, owner=engineer)
    Run.objects.create(problem=silu, start_kernel=silu.baseline_kernel, owner=teammate)
    client.force_login(engineer)
    assert client.get("/ops/quotas/").status_code == 403
    client.force_login(site_admin)
    page = client.get("/ops/quotas/").content.decode()
    erin_row = page[page.index('data-user="erin"'):].split("</tr>")[0]
    tom_row = page[page.index('data-user="tom"'):].split("</tr>")[0]
    assert "4 of 5" in erin_row and "near" in erin_row
    assert "1 of 5" in tom_row and "near" not in tom_row
    assert page.index('data-user="erin"') < page.index('data-user="tom"')  # fullest first
    assert "ACCELOPT_QUOTA_RUNS_IN_FLIGHT</span> = 5" in page


def test_the_evaluate_button_is_refused_past_the_quota_naming_it(client, engineer, make_token, silu, queue_only,
                                                                 settings):
    settings.ACCELOPT_QUOTA_QUEUED_EVALUATIONS = 1
    headers = {"Authorization": f"Bearer {make_token(engineer)}"}
    assert client.post("/api/kernels", {"problem": "silu:mini", "source": _kernel(1)},
                       content_type="application/json", headers=headers).status_code == 201
    unevaluated = client.post("/api/kernels", {"problem": "silu:mini", "source": _kernel(2), "evaluate": False},
                              content_type="application/json", headers=headers).json()["kernel"]["id"]
    client.force_login(engineer)
    page = client.post(f"/kernels/{unevaluated}/evaluate/", follow=True)
    assert "over the limit of 1 per person (ACCELOPT_QUOTA_QUEUED_EVALUATIONS)" in page.content.decode()
    assert not Evaluation.objects.filter(kernel_id=unevaluated).exists()


def test_a_launch_made_while_another_was_being_prepared_counts(engineer, silu, settings, monkeypatch):
    """Two launches at once by one person: the second's run is queued while the first is still being prepared (its
    first check passed). The first counts again as it stores its run, and is refused (issue 36)."""
    from optimizer import services as optimizer_services
    from optimizer.services import launch

    settings.ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 1
    parse_budget = launch.parse_budget  # called between the first check and storing the run

    def meanwhile(*args, **kwargs):
        Run.objects.create(problem=silu, start_kernel=silu.baseline_kernel, owner=engineer)  # the other launch
        return parse_budget(*args, **kwargs)

    monkeypatch.setattr(launch, "parse_budget", meanwhile)
    with pytest.raises(QuotaExceeded, match=r"over the limit of 1 per person \(ACCELOPT_QUOTA_RUNS_IN_FLIGHT\)"):
        optimizer_services.create_run(engineer, silu, search={"iterations": 1})
    assert Run.objects.filter(owner=engineer).count() == 1
