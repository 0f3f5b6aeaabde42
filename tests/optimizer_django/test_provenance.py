"""An evaluation's provenance traces a generated kernel's number to its run, the agent call that wrote it
and the model: in the API, on the kernel page, and on the run pages (with the backend and its version)."""

from __future__ import annotations

import importlib

import pytest
from asgiref.sync import async_to_sync
from django.apps import apps

from benchmark.models import Kernel
from benchmark.services import backend_version
from optimizer import services
from optimizer.models import AgentCall, Candidate
from optimizer.worker import RunWorker

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(fake_pipeline, problem, owner, fake_agents_factory):
    run = services.create_run(owner, problem, search=SMALL_SEARCH, is_public=True)
    async_to_sync(RunWorker(agents_factory=fake_agents_factory).step)()
    run.refresh_from_db()
    return run


def _generated_by(client, kernel: Kernel) -> dict:
    [evaluation] = client.get(f"/api/kernels/{kernel.pk}").json()["evaluations"]
    assert client.get(f"/api/evaluations/{evaluation['id']}").json()["provenance"] == evaluation["provenance"]
    return evaluation["provenance"]


def test_a_written_kernels_evaluation_names_its_run_executor_call_and_model(client, run):
    candidate = Candidate.objects.filter(iteration__run=run, iteration__index=1, plan="faster").first()
    call = AgentCall.objects.get(run=run, role="executor", candidate=candidate)
    provenance = _generated_by(client, candidate.kernel)
    assert provenance["kernel_origin"] == "generated"
    assert provenance["backend"] == "simulator" and provenance["backend_version"] == backend_version("simulator")
    generated = provenance["generated_by"]
    assert generated["run"] == run.pk and generated["run_url"].endswith(f"/runs/{run.pk}/")
    assert (generated["agent_call"], generated["role"], generated["model"]) == (call.pk, "executor", "fake-model")
    assert (generated["candidate"], generated["iteration"]) == (candidate.key, 1)
    assert generated["parent_kernel"] == candidate.parent_kernel_id


def test_a_fixed_kernel_names_the_fixer_call_and_its_failed_first_attempt_the_executor(client, run):
    fixed = Candidate.objects.filter(iteration__run=run, iteration__index=1, plan="broken").first()
    fixer = AgentCall.objects.get(run=run, role="fixer", candidate=fixed)
    assert _generated_by(client, fixed.kernel)["generated_by"]["agent_call"] == fixer.pk
    executor = AgentCall.objects.get(run=run, role="executor", candidate=fixed)
    first_attempt = Kernel.objects.get(pk=executor.kernel_id)
    assert first_attempt != fixed.kernel and "broken=1" in first_attempt.source
    generated = _generated_by(client, first_attempt)["generated_by"]
    assert (generated["role"], generated["candidate"]) == ("executor", fixed.key)


def test_a_kernel_no_run_wrote_has_no_generated_by(client, run, problem):
    provenance = _generated_by(client, problem.baseline_kernel)
    assert provenance["kernel_origin"] == "baseline" and provenance["generated_by"] is None


def test_the_kernel_page_says_who_wrote_it_and_with_which_model(client, run):
    candidate = Candidate.objects.filter(iteration__run=run, iteration__index=1, plan="faster").first()
    call = AgentCall.objects.get(run=run, role="executor", candidate=candidate)
    html = client.get(candidate.kernel.get_absolute_url()).content.decode()
    assert "Written by" in html and f'href="/runs/{run.pk}/"' in html
    assert f"executor call #{call.pk}" in html and "fake-model" in html
    assert f"candidate {candidate.key}" in html


def test_the_run_pages_name_the_backend_and_performance_model_version(client, run):
    version = backend_version("simulator")
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Evaluated with simulator" in html and version in html
    assert version in client.get(f"/runs/{run.pk}/iterations/1/").content.decode()
    candidate = Candidate.objects.filter(iteration__run=run, iteration__index=1, plan="faster").first()
    html = client.get(f"/runs/{run.pk}/candidates/{candidate.key}/").content.decode()
    assert "Provenance" in html and version in html and "fake-model" in html


def test_runs_recorded_before_the_link_get_it_back_from_their_event_logs(run):
    linked = dict(AgentCall.objects.filter(run=run).values_list("pk", "kernel_id"))
    assert any(linked.values())
    AgentCall.objects.filter(run=run).update(kernel=None)
    migration = importlib.import_module("optimizer.migrations.0002_agentcall_kernel")
    migration.link_calls_to_kernels(apps, None)
    assert dict(AgentCall.objects.filter(run=run).values_list("pk", "kernel_id")) == linked
