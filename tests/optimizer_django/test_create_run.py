"""create_run, the one way a run is launched (run form, API, optimize command): starting kernels and filters."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from benchmark.models import Evaluation, KernelOrigin
from optimizer import services
from tests.optimizer.fakes import fake_kernel

pytestmark = pytest.mark.django_db


def test_a_persons_pasted_source_is_their_upload_and_is_evaluated_at_once(owner, problem, fake_pipeline):
    run = services.create_run(owner, problem, start_source=fake_kernel(5.0), start_name="pasted")
    kernel = run.start_kernel
    assert kernel.problem == problem and kernel.source == fake_kernel(5.0) and kernel.name == "pasted"
    assert kernel.author == owner and kernel.origin == KernelOrigin.UPLOADED
    assert Evaluation.objects.filter(kernel=kernel).exists()


def test_a_commands_source_is_only_stored_for_the_run_to_evaluate(problem, fake_pipeline):
    run = services.create_run(None, problem, start_source=fake_kernel(5.0), start_name="start.py")
    assert run.owner is None and run.start_kernel.author is None and run.start_kernel.name == "start.py"
    assert not Evaluation.objects.filter(kernel=run.start_kernel).exists()


def test_a_start_kernel_and_a_source_together_are_refused(owner, problem):
    with pytest.raises(ValidationError, match="not both"):
        services.create_run(owner, problem, start_kernel=problem.baseline_kernel, start_source=fake_kernel(5.0))


def test_find_runs_narrows_by_scope_status_and_problem(owner, teammate, problem):
    mine = services.create_run(owner, problem)
    theirs = services.create_run(teammate, problem, is_public=True)
    assert list(services.find_runs(owner, scope="mine")) == [mine]
    assert list(services.find_runs(owner, scope="team")) == [theirs]
    assert list(services.find_runs(None, scope="mine")) == []
    assert set(services.find_runs(owner, status="queued", problem=str(problem.pk))) == {mine, theirs}
    assert set(services.find_runs(owner, problem="double", text="doub")) == {mine, theirs}
    with pytest.raises(ValidationError, match="unknown status 'lost'"):
        services.find_runs(owner, status="lost")


def test_the_runs_list_scope_defaults_to_mine_and_is_public_for_anonymous_visitors(owner):
    from django.contrib.auth.models import AnonymousUser

    assert services.run_scope(owner) == "mine" and services.run_scope(owner, "team") == "team"
    assert services.run_scope(AnonymousUser(), "mine") == "public"


def test_the_api_refuses_an_unknown_status_with_the_choices(client, problem):
    response = client.get("/api/runs", {"status": "lost"})
    assert response.status_code == 400
    assert response.json()["detail"].startswith("unknown status 'lost'; expected one of queued")


def test_a_run_can_be_asked_to_return_kernels_in_the_current_nki_generation(owner, problem, client):
    from optimizer.adapters.problem import problem_context

    run = services.create_run(owner, problem, current_generation=True)
    assert run.config["nki_generation"] == "current"
    assert problem_context(run).target_generation == "current"
    assert problem_context(services.create_run(owner, problem)).target_generation == ""
    client.force_login(owner)
    page = client.get(run.get_absolute_url()).content.decode()
    assert 'data-testid="run-generation">Returns kernels in the current NKI generation' in page


def test_the_current_generation_option_is_refused_for_a_triton_problem(owner, problem):
    type(problem).objects.filter(pk=problem.pk).update(language="triton")
    problem.refresh_from_db()
    with pytest.raises(ValidationError, match="option of NKI problems"):
        services.create_run(owner, problem, platform="h100", backend="triton-interpreter", current_generation=True)
