"""The real `openai` client against the scripted server: usage, cost, retries, failures, secrecy."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from engine.agents.llm import LLMClient, ModelPrice, RoleSettings
from tests.optimizer.scripted_openai import Reply, ScriptedOpenAI, scripted

SECRET = "sk-test-secret-never-shown-1234"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def client_for(server, sleeps=None, **role_options) -> LLMClient:
    options = {"model": "model-x", "base_url": server.base_url, "api_key": SECRET, "timeout_s": 5.0, **role_options}
    return LLMClient({"planner": RoleSettings(**options)}, prices={"model-x": (3.0, 15.0)}, max_retries=2,
                     sleep=sleeps or Sleeps())


async def test_a_call_records_the_servers_usage_and_its_cost():
    with ScriptedOpenAI(scripted([Reply("hi there", prompt_tokens=1200, completion_tokens=300)])) as server:
        call = await client_for(server).chat("planner", MESSAGES)
    assert (call.error, call.response, call.attempts) == ("", "hi there", 1)
    assert (call.prompt_tokens, call.completion_tokens, call.total_tokens) == (1200, 300, 1500)
    assert call.cost_usd == pytest.approx(ModelPrice(3.0, 15.0).cost(1200, 300)) == pytest.approx(0.0081)
    assert call.prompt == MESSAGES and call.role == "planner" and call.model == "model-x"


async def test_role_settings_reach_the_server():
    with ScriptedOpenAI(scripted([Reply("ok")])) as server:
        await client_for(server, temperature=0.3, max_tokens=777, reasoning_effort="high").chat(
            "planner", MESSAGES, seed=42)
    body = server.requests[0].body
    assert (body["model"], body["temperature"], body["max_tokens"], body["reasoning_effort"], body["seed"]) == (
        "model-x", 0.3, 777, "high", 42)
    assert body["messages"] == MESSAGES


@pytest.mark.parametrize("failure", [Reply(status=500), Reply(status=503), Reply(status=429, retry_after="7")])
async def test_server_errors_and_rate_limits_are_retried_with_backoff(failure):
    sleeps = Sleeps()
    with ScriptedOpenAI(scripted([failure, Reply("second time lucky", 10, 5)])) as server:
        call = await client_for(server, sleeps).chat("planner", MESSAGES)
    assert (call.error, call.response, call.attempts) == ("", "second time lucky", 2)
    assert len(server.requests) == 2 and len(sleeps.delays) == 1
    assert sleeps.delays[0] == (7.0 if failure.retry_after else 1.0)


async def test_a_timed_out_request_is_retried():
    with ScriptedOpenAI(scripted([Reply("late", delay_s=3.0), Reply("on time", 4, 2)])) as server:
        call = await client_for(server, timeout_s=1.0).chat("planner", MESSAGES)
    assert (call.error, call.response, call.attempts) == ("", "on time", 2)


async def test_a_call_that_keeps_failing_returns_its_error_instead_of_raising():
    sleeps = Sleeps()
    with ScriptedOpenAI(scripted([Reply(status=500)] * 3)) as server:
        call = await client_for(server, sleeps).chat("planner", MESSAGES)
    assert call.attempts == 3 and "HTTP 500" in call.error and call.response == ""
    assert sleeps.delays == [1.0, 2.0]  # exponential backoff between the three attempts


async def test_client_errors_are_not_retried():
    with ScriptedOpenAI(scripted([Reply(status=400), Reply("never sent")])) as server:
        call = await client_for(server).chat("planner", MESSAGES)
    assert call.attempts == 1 and "HTTP 400" in call.error and len(server.requests) == 1


async def test_a_malformed_body_is_an_error_not_a_crash():
    with ScriptedOpenAI(scripted([Reply(raw_body="<html>bad gateway</html>")])) as server:
        call = await client_for(server).chat("planner", MESSAGES)
    assert call.response == "" and call.error.startswith("malformed response")


async def test_the_api_key_is_sent_but_never_recorded_or_shown():
    with ScriptedOpenAI(scripted([Reply(status=401, raw_body=f'{{"error": {{"message": "bad key {SECRET}"}}}}')])) as server:
        client = client_for(server)
        call = await client.chat("planner", MESSAGES)
    assert server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str(call.to_dict()) and "***" in call.error
    assert SECRET not in repr(client) and SECRET not in repr(client.settings("planner"))


async def test_the_concurrency_limit_bounds_requests_in_flight():
    in_flight, peak, lock = [0], [0], threading.Lock()

    def slow(_body):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.15)
        with lock:
            in_flight[0] -= 1
        return Reply("done", 1, 1)

    with ScriptedOpenAI(slow) as server:
        client = LLMClient({"planner": RoleSettings(model="m", base_url=server.base_url)}, max_concurrency=2)
        calls = await asyncio.gather(*[client.chat("planner", MESSAGES) for _ in range(6)])
    assert all(c.error == "" for c in calls)
    assert peak[0] == 2


def test_an_unconfigured_role_is_named_in_the_error():
    client = LLMClient({"planner": RoleSettings(model="m")})
    with pytest.raises(ValueError, match="no model configured for the 'fixer' role"):
        client.settings("fixer")
