"""A run with the LLM agent, end to end through the worker: the real `openai` client against a scripted
OpenAI-compatible server on 127.0.0.1, the database, the memory and a fake evaluation pipeline."""

from __future__ import annotations

import json
import re
import threading

import pytest
from asgiref.sync import async_to_sync

from benchmark.services import create_kernel
from memory.models import MemoryEntry, Polarity
from optimizer import services
from optimizer.models import AgentCall, Run, RunEvent, RunStatus
from optimizer.worker import RunWorker
from tests.optimizer.fakes import fake_kernel
from tests.optimizer.scripted_openai import Reply, ScriptedOpenAI

pytestmark = pytest.mark.django_db(transaction=True)

API_KEY = "sk-scripted-secret-0123456789"
MODEL = "scripted-coder"
PRICE = (2.0, 8.0)  # USD per million prompt / completion tokens
SEARCH = {"iterations": 2, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1, "fix_attempts": 0,
          "memory_size": 4, "rewrites_per_iteration": 2}


def python_kernel(latency: float, lineage: str = "start") -> str:
    return fake_kernel(latency, lineage) + "\ndef kernel(x):\n    return x\n"


class Model:
    """Answers by role. The first Executor call gets a 500 (retried), and the Executor's reply to the
    "slower" plan of iteration 2 is garbage (no code block): the run must survive both."""

    PLANS = ("Fuse the two passes into one activation (faster).", "Split every tile in two (slower).")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.executor_calls = 0
        self.planner_calls: dict[str, int] = {}  # per kernel: asked once per plan, each call gets the next

    def __call__(self, body) -> Reply:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system.startswith("You are the Planner"):
            kernel = re.search(r"latency=([\d.]+)", user).group(1)
            with self.lock:
                given = self.planner_calls.get(kernel, 0)
                self.planner_calls[kernel] = given + 1
            return Reply(f"1. {self.PLANS[given % 2]}\n", prompt_tokens=1000, completion_tokens=50,
                         reasoning="The profile shows two passes over HBM.")
        if system.startswith("You are the Executor"):
            with self.lock:
                self.executor_calls += 1
                call = self.executor_calls
            if call == 1:
                return Reply(status=500)
            parent = float(re.search(r"latency=([\d.]+)", user).group(1))
            faster = "(faster)" in user.split("Plan", 1)[-1]
            if parent < 10 and not faster:
                return Reply("I would rather not write code today.", prompt_tokens=800, completion_tokens=10)
            factor = 0.8 if faster else 1.5
            source = python_kernel(parent * factor, "llm")
            return Reply(f"Here it is.\n```python\n{source}```\n", prompt_tokens=1200, completion_tokens=300)
        if system.startswith("You are the Summarizer"):
            return Reply("**Fuse passes**\nOne pass over the data instead of two halves the HBM traffic.",
                         prompt_tokens=700, completion_tokens=40)
        return Reply(status=400)


@pytest.fixture
def scripted_server(settings):
    with ScriptedOpenAI(Model()) as server:
        settings.ACCELOPT_LLM_ROLES = {"default": {"model": MODEL, "base_url": server.base_url, "api_key": API_KEY}}
        settings.ACCELOPT_LLM_PRICES = {MODEL: list(PRICE)}
        settings.ACCELOPT_LLM_BACKOFF_MS = 0
        yield server


@pytest.fixture
def llm_run(fake_pipeline, problem, owner, scripted_server):
    start, _ = create_kernel(problem, python_kernel(10.0))
    run = services.create_run(owner, problem, start_kernel=start, agent="llm", search=SEARCH)
    assert async_to_sync(RunWorker().step)()
    run.refresh_from_db()
    return run


def test_a_faster_reply_becomes_the_beam_and_a_positive_memory_entry(llm_run):
    assert llm_run.status == RunStatus.SUCCEEDED, llm_run.error_message
    assert llm_run.best_latency_ms == pytest.approx(6.4)  # 10 x 0.8 x 0.8
    entries = MemoryEntry.objects.filter(source_run_id=llm_run.pk)
    assert entries.filter(polarity=Polarity.POSITIVE, title="Fuse passes").exists()
    assert entries.filter(polarity=Polarity.NEGATIVE).exists()  # the 1.5x slower split


def test_token_and_cost_totals_match_the_servers_usage(llm_run, scripted_server):
    served = scripted_server.usage_served
    calls = AgentCall.objects.filter(run=llm_run)
    assert sum(calls.values_list("prompt_tokens", flat=True)) == served["prompt_tokens"] == llm_run.prompt_tokens
    assert sum(calls.values_list("completion_tokens", flat=True)) == served["completion_tokens"]
    assert llm_run.completion_tokens == served["completion_tokens"]
    expected = (served["prompt_tokens"] * PRICE[0] + served["completion_tokens"] * PRICE[1]) / 1e6
    assert llm_run.cost_usd == pytest.approx(expected)


def test_a_500_and_a_garbage_reply_are_survived_and_recorded(llm_run):
    assert llm_run.events.filter(kind="agent.unusable", payload__role="executor").count() == 1
    garbage = AgentCall.objects.get(run=llm_run, response__startswith="I would rather not")
    assert garbage.usable is False
    retried = AgentCall.objects.filter(run=llm_run, role="executor").order_by("id").first()
    assert retried.error == "" and retried.response.startswith("Here it is")


def test_the_planner_prompt_carries_the_kernel_the_profile_and_the_memory(llm_run, scripted_server):
    planner_prompts = [r.text for r in scripted_server.requests
                       if r.body["messages"][0]["content"].startswith("You are the Planner")]
    second = planner_prompts[-1]
    assert "latency=8.000000" in second  # the beam kernel after iteration 1
    assert "hbm_read_bytes" in second
    assert "Fuse passes" in second  # the memory entry written in iteration 1


def test_reasoning_returned_beside_the_answer_is_kept_and_shown_on_the_transcript(llm_run, client, owner):
    planner_calls = AgentCall.objects.filter(run=llm_run, role="planner")
    assert planner_calls.count() == 4  # two plans per kernel, one call each, two iterations
    assert all(call.reasoning == "The profile shows two passes over HBM." for call in planner_calls)
    client.force_login(owner)
    page = client.get(f"/runs/{llm_run.pk}/kernels/{llm_run.best_kernel_id}/transcript/").content.decode()
    assert "Reasoning" in page and "The profile shows two passes over HBM." in page


def test_a_server_that_reports_no_usage_shows_an_unknown_cost(fake_pipeline, problem, owner, client, settings):
    with ScriptedOpenAI(UsageFree(Model())) as server:
        settings.ACCELOPT_LLM_ROLES = {"default": {"model": MODEL, "base_url": server.base_url, "api_key": API_KEY}}
        settings.ACCELOPT_LLM_PRICES = {MODEL: list(PRICE)}
        settings.ACCELOPT_LLM_BACKOFF_MS = 0
        start, _ = create_kernel(problem, python_kernel(10.0))
        run = services.create_run(owner, problem, start_kernel=start, agent="llm", search=SEARCH)
        assert async_to_sync(RunWorker().step)()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    assert run.cost_known is False and run.known_cost_usd is None and run.unpriced_calls > 0
    assert AgentCall.objects.filter(run=run, error="", cost_usd__isnull=True).exists()
    client.force_login(owner)
    assert "unknown cost" in client.get(f"/runs/{run.pk}/state/").content.decode()
    assert "unknown cost" in client.get("/runs/").content.decode()


class UsageFree:
    """The same answers from a server that counts no tokens (no `usage` in its completions)."""

    def __init__(self, model: Model) -> None:
        self.model = model

    def __call__(self, body) -> Reply:
        reply = self.model(body)
        reply.usage = False
        return reply


def test_the_api_key_is_stored_nowhere(llm_run):
    stored = [json.dumps(llm_run.config), json.dumps(list(RunEvent.objects.values_list("payload", flat=True)))]
    stored += [json.dumps(c.prompt) + c.response + c.error for c in AgentCall.objects.all()]
    assert all(API_KEY not in text for text in stored)
    assert Run.objects.get(pk=llm_run.pk).config["models"]["planner"]["model"] == MODEL
