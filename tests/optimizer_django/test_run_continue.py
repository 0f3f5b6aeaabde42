"""Continue a run its budget stopped, with more budget: from the run page and the API, through one service. The
search goes on from its checkpoint; nothing evaluated before the stop is evaluated again; the spend carries over."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError

from accounts.services import create_token
from optimizer import services
from optimizer.models import IterationStatus, Run, RunStatus
from optimizer.worker import RunWorker
from tests.optimizer_django.conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)

N = 7  # iteration 1 evaluates 5 kernels (start, three plans, one fix): the cap falls inside iteration 2


def drive(agents_factory) -> Run:
    worker = RunWorker(agents_factory=agents_factory)
    while async_to_sync(worker.step)():
        pass
    return Run.objects.get(pk=Run.objects.order_by("-pk").values_list("pk", flat=True)[0])


def stopped_run(owner, fake_pipeline, fake_agents_factory) -> Run:
    run = services.create_run(owner, services.launchable_problems(owner).get(slug="double"), search=SMALL_SEARCH,
                              budget={"max_evaluations": N, "max_wall_time_s": 3600})
    run = drive(fake_agents_factory)
    assert run.status == RunStatus.STOPPED and run.usage.evaluations == N == sum(fake_pipeline.calls.values())
    return run


def test_the_service_continues_a_stopped_run_without_redoing_its_evaluations(fake_pipeline, problem, owner,
                                                                             fake_agents_factory):
    run = stopped_run(owner, fake_pipeline, fake_agents_factory)
    first = dict(fake_pipeline.calls)  # the N kernels evaluated before the stop
    assert run.iterations.get(index=2).status == IterationStatus.FINISHED

    run = services.continue_run(run, owner, {"max_evaluations": 2 * N, "max_wall_time_s": ""})
    assert run.status == RunStatus.QUEUED and run.finished is None and run.stopped_by_budget == ""
    assert (run.max_evaluations, run.max_wall_time_s) == (2 * N, None)
    assert run.iterations.get(index=2).status == IterationStatus.RUNNING  # open again: it goes on where it stopped
    assert run.usage.evaluations == N  # the spend carries over

    run = drive(fake_agents_factory)
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    assert N < run.usage.evaluations <= 2 * N and run.usage.evaluations == sum(fake_pipeline.calls.values())
    assert fake_pipeline.evaluated_twice == [] and all(fake_pipeline.calls[key] == 1 for key in first)
    assert list(run.iterations.values_list("index", "status")) == [(1, "finished"), (2, "finished")]
    kinds = list(run.events.values_list("kind", flat=True))
    assert kinds.count("run.stopped") == 1 and kinds.index("run.stopped") < kinds.index("run.continued")
    assert kinds[-1] == "run.finished"
    continued = run.events.get(kind="run.continued").payload
    assert continued["by"] == owner.username and continued["stopped_by"] == "max_evaluations"
    assert continued["spent"]["max_evaluations"] == N and continued["budget"]["max_evaluations"] == 2 * N


def test_each_cap_must_be_above_what_was_spent_and_only_a_stopped_run_continues(fake_pipeline, problem, owner,
                                                                                fake_agents_factory):
    run = stopped_run(owner, fake_pipeline, fake_agents_factory)
    with pytest.raises(ValidationError, match=r"max_evaluations \(evaluations\) must be above what the run already "
                                              r"spent \(7 evaluations\)"):
        services.continue_run(run, owner, {"max_evaluations": N})
    with pytest.raises(ValidationError, match="max_tokens must be a number"):
        services.continue_run(run, owner, {"max_tokens": "lots"})
    assert Run.objects.get(pk=run.pk).status == RunStatus.STOPPED  # a refusal changes nothing
    run = services.continue_run(run, owner, {})  # no caps at all
    with pytest.raises(ValidationError, match=f"run {run.pk} is queued, not stopped by a budget"):
        services.continue_run(run, owner, {"max_evaluations": 100})


def test_the_api_continues_only_for_its_owner_and_refuses_a_run_not_stopped(fake_pipeline, problem, owner, teammate,
                                                                           fake_agents_factory, client):
    run = stopped_run(owner, fake_pipeline, fake_agents_factory)
    url = f"/api/runs/{run.pk}/continue"
    client.force_login(teammate)
    Run.objects.filter(pk=run.pk).update(is_public=True)
    assert client.post(url, {"budget": {"max_evaluations": 20}}, content_type="application/json").status_code == 403
    client.force_login(owner)
    low = client.post(url, {"budget": {"max_evaluations": 3}}, content_type="application/json")
    assert low.status_code == 400 and "max_evaluations (evaluations) must be above" in low.json()["detail"]
    unknown = client.post(url, {"budget": {"max_iterations": 3}}, content_type="application/json")
    assert unknown.status_code == 400 and "unknown budget fields ['max_iterations']" in unknown.json()["detail"]
    answer = client.post(url, {"budget": {"max_evaluations": 2 * N, "max_wall_time_s": None}},
                         content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "queued" and answer.json()["budget"]["max_evaluations"] == 2 * N
    again = client.post(url, {"budget": {}}, content_type="application/json")
    assert again.status_code == 400 and "not stopped by a budget" in again.json()["detail"]
    drive(fake_agents_factory)
    events = client.get(f"/api/runs/{run.pk}/events?limit=1000").json()["events"]
    assert [e["kind"] for e in events].count("run.continued") == 1 and events[-1]["kind"] == "run.finished"


def test_the_run_page_offers_the_form_prefilled_and_continues(fake_pipeline, problem, owner, fake_agents_factory,
                                                              client):
    run = stopped_run(owner, fake_pipeline, fake_agents_factory)
    client.force_login(owner)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Continue with more budget" in page
    assert 'name="max_evaluations" value="7"' in page and 'name="max_wall_time_s" value="3600"' in page
    assert 'name="max_tokens" value=""' in page and "(spent 7 evaluations)" in page
    # A cap not above the spend comes back with the error and what was typed.
    refused = client.post(f"/runs/{run.pk}/continue/", {"max_evaluations": "5", "max_wall_time_s": ""},
                          HTTP_HX_REQUEST="true").content.decode()
    assert "must be above what the run already spent" in refused and 'name="max_evaluations" value="5"' in refused
    response = client.post(f"/runs/{run.pk}/continue/", {"max_evaluations": "14", "max_wall_time_s": ""})
    assert response.status_code == 302
    run = drive(fake_agents_factory)
    assert run.status == RunStatus.SUCCEEDED and run.usage.evaluations > N and fake_pipeline.evaluated_twice == []
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Continue with more budget" not in page


def test_a_run_that_is_not_stopped_or_someone_elses_offers_no_form(fake_pipeline, problem, owner, teammate,
                                                                   fake_agents_factory, client):
    run = stopped_run(owner, fake_pipeline, fake_agents_factory)
    Run.objects.filter(pk=run.pk).update(is_public=True)
    client.force_login(teammate)
    assert "Continue with more budget" not in client.get(run.get_absolute_url()).content.decode()
    assert client.post(f"/runs/{run.pk}/continue/", {"max_evaluations": "14"}).status_code == 403


def test_the_optimize_command_continues_a_stopped_run(fake_pipeline, problem, monkeypatch, fake_agents_factory):
    from io import StringIO

    from django.core.management import CommandError, call_command

    import optimizer.worker

    monkeypatch.setattr(optimizer.worker, "default_agents", fake_agents_factory)
    out = StringIO()
    call_command("optimize", "--problem", "double:mini", "--iterations", "2", "--beam", "2", "--plans", "3",
                 "--samples", "1", "--fix-attempts", "1", "--max-evaluations", str(N), stdout=out)
    run = Run.objects.get()
    assert run.status == RunStatus.STOPPED and "stopped: budget (evaluations budget reached)" in out.getvalue()
    with pytest.raises(CommandError, match=r"max_evaluations \(evaluations\) must be above"):
        call_command("optimize", "--continue", str(run.pk), "--max-evaluations", "3", stdout=StringIO())
    out = StringIO()
    call_command("optimize", "--continue", str(run.pk), stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"run {run.pk}: continued from iteration 2 with more budget"
    assert [line.split(":")[0].strip() for line in lines[1:-1]] == ["iteration 2/2"]  # iteration 1 not repeated
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.usage.evaluations > N and fake_pipeline.evaluated_twice == []
    assert lines[-1].startswith("best speedup x")
    with pytest.raises(CommandError, match="not stopped by a budget"):
        call_command("optimize", "--continue", str(run.pk), stdout=StringIO())
    with pytest.raises(CommandError, match="give --problem"):
        call_command("optimize", stdout=StringIO())


def test_continuing_counts_against_the_runs_quota(client, fake_pipeline, problem, owner, fake_agents_factory,
                                                  settings):
    """Queued again, a continued run is in flight again: past ACCELOPT_QUOTA_RUNS_IN_FLIGHT it is refused with the
    limit named (API 429, the run page's message), and stays stopped (issue 36)."""
    run = stopped_run(owner, fake_pipeline, fake_agents_factory)
    settings.ACCELOPT_QUOTA_RUNS_IN_FLIGHT = 1
    services.create_run(owner, run.problem, search=SMALL_SEARCH)  # the one run owner may have in flight
    client.force_login(owner)
    page = client.post(f"/runs/{run.pk}/continue/", {"max_evaluations": str(2 * N)}, follow=True)
    assert "over the limit of 1 per person (ACCELOPT_QUOTA_RUNS_IN_FLIGHT)" in page.content.decode()
    refused = client.post(f"/api/runs/{run.pk}/continue", {"budget": {"max_evaluations": 2 * N}},
                          content_type="application/json",
                          headers={"Authorization": f"Bearer {create_token(owner, 'quota').secret}"})
    assert refused.status_code == 429 and "(ACCELOPT_QUOTA_RUNS_IN_FLIGHT)" in refused.json()["detail"]
    run.refresh_from_db()
    assert run.status == RunStatus.STOPPED
