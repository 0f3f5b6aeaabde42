"""Unknown cost is unknown, never $0; reasoning text a server returns beside the answer is kept."""

from __future__ import annotations

import pytest

from engine.agents.llm import LLMClient, RoleSettings
from tests.optimizer.scripted_openai import Reply, ScriptedOpenAI, scripted

MESSAGES = [{"role": "user", "content": "hello"}]


def client_for(server, prices=None) -> LLMClient:
    role = RoleSettings(model="model-x", base_url=server.base_url, api_key="k", timeout_s=5.0)
    return LLMClient({"planner": role}, prices={"model-x": (3.0, 15.0)} if prices is None else prices,
                     max_retries=0)


async def test_a_server_that_reports_no_usage_gives_an_unknown_cost_not_zero():
    with ScriptedOpenAI(scripted([Reply("answer", usage=False)])) as server:
        call = await client_for(server).chat("planner", MESSAGES)
    assert call.error == "" and call.response == "answer"
    assert call.cost_usd is None
    assert call.to_dict()["cost_usd"] is None


async def test_a_model_missing_from_the_price_table_has_an_unknown_cost():
    with ScriptedOpenAI(scripted([Reply("answer", prompt_tokens=10, completion_tokens=5)])) as server:
        call = await client_for(server, prices={}).chat("planner", MESSAGES)
    assert (call.prompt_tokens, call.completion_tokens, call.cost_usd) == (10, 5, None)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_returned_beside_the_answer_is_kept(field):
    reply = Reply("the answer", 10, 5, reasoning="first I looked at the DMA counters", reasoning_field=field)
    with ScriptedOpenAI(scripted([reply])) as server:
        call = await client_for(server).chat("planner", MESSAGES)
    assert call.response == "the answer"
    assert call.reasoning == "first I looked at the DMA counters"
    assert call.cost_usd == pytest.approx((10 * 3.0 + 5 * 15.0) / 1e6)


async def test_a_reply_without_reasoning_keeps_none():
    with ScriptedOpenAI(scripted([Reply("plain", 1, 1)])) as server:
        call = await client_for(server).chat("planner", MESSAGES)
    assert call.reasoning == ""


def test_the_papers_models_have_list_prices_so_its_cost_comparison_can_be_rerun():
    from optimizer import conf

    table = conf.price_table()
    assert table["claude-sonnet-4-20250514"] == (3.00, 15.00)
    hosted = [table["openai/gpt-oss-120b"], table["Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"]]
    assert all(0 < prompt <= 3.00 and 0 < completion < 15.00 for prompt, completion in hosted)
