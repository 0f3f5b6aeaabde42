"""Our own NKI 0.6 attention kernel (tests/fixtures/attention_nki06.py, written in the style of AWS's attention
tutorial) end to end (issue 34): uploaded through the upload page for gqa_full's mini case, it evaluates correct on
the simulator, priced, with its breakdown on its page; an offline run from it finds a faster correct kernel, and a
run with the LLM agent (a scripted OpenAI-compatible server) whose Executor returns a faster kernel ends with it
as the best.

Evaluations take fixed seeds: gqa_full's scaled seed is at the edge of the 2e-5 tolerance for any kernel of this
math (NKIBench's own baseline misses it on some drawn seeds, note4.md); these three pass for the baseline too."""

from __future__ import annotations

from pathlib import Path

import pytest
from asgiref.sync import async_to_sync

import engine.evaluator.reference_pipeline as reference_pipeline
from benchmark.models import Kernel, Problem
from benchmark.templatetags.benchmark_extras import milliseconds
from engine.platforms.nki.generations import CURRENT
from engine.platforms.nki.rewrites import BY_NAME
from optimizer import services
from optimizer.models import Candidate, RunStatus
from optimizer.worker import RunWorker
from tests.optimizer.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.django_db(transaction=True)

ATTENTION = (Path(__file__).parents[1] / "fixtures" / "attention_nki06.py").read_text()
SEEDS = (2, 5, 3)
ONE_STEP = {"iterations": 1, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1, "fix_attempts": 0,
            "memory_size": 4, "rewrites_per_iteration": 2, "mini_first": False}
MODEL = "scripted-coder"


@pytest.fixture
def uploaded(client, engineer, settings, monkeypatch):
    """The kernel as an engineer uploads it on /kernels/upload/, evaluated in the request (inline)."""
    from benchmark.services import load_suite

    settings.ACCELOPT_EVALUATION_INLINE = True
    monkeypatch.setattr(reference_pipeline, "draw_seeds", lambda count: SEEDS[:count])
    load_suite("nkibench", evaluate_cases=())
    problem = Problem.objects.get(slug="gqa_full", case="mini")
    client.force_login(engineer)
    response = client.post("/kernels/upload/", {"problem": str(problem.pk), "platform": "trn1", "source": ATTENTION,
                                                "kernel_name": "attention, tutorial style (NKI 0.6)"})
    assert response.status_code == 302, response.content.decode()[-3000:]
    kernel = Kernel.objects.get(problem=problem, source=ATTENTION)
    return kernel, response["Location"]


def test_the_uploaded_kernel_is_correct_priced_and_explained_on_its_page(client, uploaded):
    kernel, location = uploaded
    evaluation = kernel.evaluations.get()
    assert evaluation.correct and evaluation.latency_ms > 0 and evaluation.peak_fraction > 0
    assert evaluation.breakdown and evaluation.breakdown["bound"]
    assert kernel.nki_generation == CURRENT
    page = client.get(location).content.decode()
    assert "current: the nki package" in page
    assert milliseconds(evaluation.latency_ms) in page  # its price, as the page writes it
    assert "Where the time goes" in page and "bound by:" in page  # the breakdown


def test_an_offline_run_from_it_finds_a_faster_correct_kernel(uploaded, engineer):
    kernel, _ = uploaded
    start = kernel.evaluations.get().latency_ms
    run = services.create_run(engineer, kernel.problem, start_kernel=kernel, agent="offline", search=ONE_STEP)
    assert async_to_sync(RunWorker().step)()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    assert run.best_kernel_id != kernel.pk and run.best_latency_ms < start
    best = run.best_kernel
    assert best.nki_generation == CURRENT and best.evaluations.filter(correct=True).exists()
    # The catalog's NKI 0.6 rewrite is among what it tried, and pays on its own.
    fused = Candidate.objects.get(iteration__run=run, plan__contains="[rewrite fuse_scalar_reduce #0]")
    assert fused.correct and fused.latency_ms < start and "nisa.tensor_scalar_reduce(" in fused.kernel.source


class Model:
    """A Planner that proposes the fusion, an Executor that writes it, a Summarizer that names it."""

    def __call__(self, body) -> Reply:
        system = body["messages"][0]["content"]
        if system.startswith("You are the Planner"):
            return Reply("1. Scale the scores and take their row max in one tensor_scalar_reduce.\n",
                         prompt_tokens=900, completion_tokens=30)
        if system.startswith("You are the Executor"):
            source = BY_NAME["fuse_scalar_reduce"].apply(ATTENTION, 0)  # the run's one parent: the upload
            return Reply(f"Fused.\n```python\n{source}```\n", prompt_tokens=1500, completion_tokens=400)
        if system.startswith("You are the Summarizer"):
            return Reply("**Scale and reduce together**\ntensor_scalar_reduce reads the scores once.",
                         prompt_tokens=600, completion_tokens=20)
        return Reply(status=400)


def test_a_scripted_llm_run_from_it_ends_with_the_faster_kernel_the_executor_wrote(uploaded, engineer, settings):
    kernel, _ = uploaded
    start = kernel.evaluations.get().latency_ms
    with ScriptedOpenAI(Model()) as server:
        settings.ACCELOPT_LLM_ROLES = {"default": {"model": MODEL, "base_url": server.base_url, "api_key": "sk-x"}}
        settings.ACCELOPT_LLM_PRICES = {MODEL: [1.0, 1.0]}
        settings.ACCELOPT_LLM_BACKOFF_MS = 0
        run = services.create_run(engineer, kernel.problem, start_kernel=kernel, agent="llm",
                                  search={**ONE_STEP, "plans_per_candidate": 1})
        assert async_to_sync(RunWorker().step)()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    executor_prompts = [r.text for r in server.requests if r.body["messages"][0]["content"].startswith("You are the Executor")]
    assert executor_prompts and "nisa.tensor_reduce(dst=row_max" in executor_prompts[0]  # it was shown our kernel
    best = run.best_kernel
    assert run.best_latency_ms < start and "nisa.tensor_scalar_reduce(dst=scores" in best.source
    assert best.nki_generation == CURRENT and best.evaluations.filter(correct=True).exists()
