"""A generated kernel's transcript: Planner's plan, Executor's kernel, Fixer's repair and Summarizer's lesson,
each with role, model, prompt, response, tokens, cost and latency, on one page; and the leaderboard grid whose
cells open the run and that transcript."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmark.models import Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256
from optimizer import services as run_services
from optimizer.models import AgentCall, Candidate, Iteration, Run


@pytest.fixture
def written(db, engineer):
    problem = Problem.objects.create(slug="silu", case="mini", reference_source="# ref", parameters={"M": 4})
    baseline = Kernel.objects.create(problem=problem, source="# base", sha256=source_sha256("# base"),
                                     origin=KernelOrigin.BASELINE, name="silu baseline")
    problem.baseline_kernel = baseline
    problem.save(update_fields=["baseline_kernel"])
    run = run_services.create_run(engineer, problem, is_public=True)
    Run.objects.filter(pk=run.pk).update(start_latency_ms=2.0, best_latency_ms=1.0,
                                         config={**run.config, "models": {"planner": {"model": "qwen-x"}}})
    kernel = Kernel.objects.create(problem=problem, source="# fused", sha256=source_sha256("# fused"), parent=baseline,
                                   origin=KernelOrigin.GENERATED, run_id=run.pk, name="fused")
    Run.objects.filter(pk=run.pk).update(best_kernel=kernel)
    iteration = Iteration.objects.create(run=run, index=1)
    candidate = Candidate.objects.create(iteration=iteration, key="1.0.0.0", parent_kernel=baseline, kernel=kernel,
                                         plan="Fuse the two loops into one pass over the tile.", speedup=2.0)
    for role, response, tokens in (
        ("planner", "1. Fuse the two loops into one pass over the tile.\n2. Something else.", 120),
        ("executor", "```python\n# fused\n```", 300),
        ("fixer", "fixed the mask", 80),
        ("summarizer", "Fusing loops halves the DMA traffic.", 40),
    ):
        AgentCall.objects.create(
            run=run, iteration=iteration, candidate=None if role in ("planner", "summarizer") else candidate,
            role=role, model="qwen-x", prompt=[{"role": "user", "content": f"prompt for the {role}"}],
            response=response, prompt_tokens=tokens, completion_tokens=10, latency_ms=1500.0, cost_usd=0.002,
            kernel=kernel if role == "fixer" else None,
        )
    return run, kernel


def test_the_transcript_shows_every_role_with_its_call(client, written):
    run, kernel = written
    html = client.get(reverse("optimizer:transcript", args=[run.pk, kernel.pk])).content.decode()
    for role in ("Planner", "Executor", "Fixer", "Summarizer"):
        assert f"<h3>{role} " in html
    assert "prompt for the executor" in html and "Fusing loops halves the DMA traffic." in html
    assert "qwen-x" in html and "300 + 10 tokens" in html and "1500 ms" in html and "$0.0080" in html
    assert html.index("<h3>Planner") < html.index("<h3>Executor") < html.index("<h3>Fixer") < html.index("<h3>Summarizer")


def test_a_private_runs_transcript_is_not_found_for_others(client, written):
    run, kernel = written
    Run.objects.filter(pk=run.pk).update(is_public=False)
    assert client.get(reverse("optimizer:transcript", args=[run.pk, kernel.pk])).status_code == 404


def test_the_kernel_page_links_its_transcript(client, written):
    run, kernel = written
    html = client.get(kernel.get_absolute_url()).content.decode()
    assert reverse("optimizer:transcript", args=[run.pk, kernel.pk]) in html


def test_a_grid_cell_opens_the_run_and_its_transcript(client, written):
    run, kernel = written
    html = client.get(reverse("optimizer:leaderboard_grid") + "?case=mini").content.decode()
    assert "Offline agent" in html and "qwen-x" in html and "2.00×" in html
    assert f'href="{run.get_absolute_url()}"' in html
    assert reverse("optimizer:transcript", args=[run.pk, kernel.pk]) in html


def test_the_run_page_and_the_search_tree_link_the_transcript(client, written, owner):
    from tests.optimizer_django.test_search_tree import make_synthetic_run

    run, kernel = written
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    html = client.get(run.get_absolute_url()).content.decode()
    assert reverse("optimizer:transcript", args=[run.pk, kernel.pk]) in html
    tree_run = make_synthetic_run(owner, Problem.objects.get(slug="silu"), iterations=1)
    client.force_login(owner)
    node = client.get(f"/runs/{tree_run.pk}/tree/1.0.5.0/").content.decode()
    candidate = Candidate.objects.get(iteration__run=tree_run, key="1.0.5.0")
    assert reverse("optimizer:transcript", args=[tree_run.pk, candidate.kernel_id]) in node
