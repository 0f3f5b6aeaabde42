"""optimizer/conf.py: LLM endpoints per role and prices from the environment, failing loudly on junk."""

from __future__ import annotations

import os

import pytest
from django.core.exceptions import ImproperlyConfigured

from optimizer import conf


@pytest.fixture(autouse=True)
def from_environment(settings, monkeypatch):
    for name in ("ACCELOPT_LLM_ROLES", "ACCELOPT_LLM_PRICES"):
        if hasattr(settings, name):
            delattr(settings, name)
    for name in list(os.environ):
        if name.startswith("ACCELOPT_LLM_"):
            monkeypatch.delenv(name)


def test_without_a_model_no_role_is_configured_and_the_llm_agent_is_unavailable():
    assert conf.llm_roles() == {}
    assert conf.llm_available() is False


def test_one_endpoint_serves_every_role_and_a_role_can_override_it(monkeypatch):
    monkeypatch.setenv("ACCELOPT_LLM_BASE_URL", "http://gpu:8000/v1")
    monkeypatch.setenv("ACCELOPT_LLM_MODEL", "openai/gpt-oss-120b")
    monkeypatch.setenv("ACCELOPT_LLM_SUMMARIZER_MODEL", "small-model")
    monkeypatch.setenv("ACCELOPT_LLM_PLANNER_REASONING_EFFORT", "high")
    roles = conf.llm_roles()
    assert conf.llm_available()
    assert roles["executor"].model == "openai/gpt-oss-120b" and roles["summarizer"].model == "small-model"
    assert roles["planner"].reasoning_effort == "high" and roles["executor"].reasoning_effort is None
    assert {r.base_url for r in roles.values()} == {"http://gpu:8000/v1"}


def test_the_api_key_can_come_from_a_file_and_is_never_in_the_public_view(monkeypatch, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file\n")
    monkeypatch.setenv("ACCELOPT_LLM_MODEL", "m")
    monkeypatch.setenv("ACCELOPT_LLM_API_KEY_FILE", str(key_file))
    roles = conf.llm_roles()
    assert roles["fixer"].api_key == "sk-from-file"
    assert "sk-from-file" not in repr(roles["fixer"])
    assert "sk-from-file" not in str(conf.public_role_settings(roles))


def test_a_run_can_choose_another_model_for_a_role(monkeypatch):
    monkeypatch.setenv("ACCELOPT_LLM_MODEL", "default-model")
    assert conf.llm_roles({"planner": "bigger-model"})["planner"].model == "bigger-model"


@pytest.mark.parametrize(("name", "value", "message"), [
    ("ACCELOPT_LLM_TEMPERATURE", "warm", "ACCELOPT_LLM_TEMPERATURE must be a number; got 'warm'"),
    ("ACCELOPT_LLM_MAX_TOKENS", "lots", "MAX_TOKENS must be an integer; got 'lots'"),
    ("ACCELOPT_LLM_REASONING_EFFORT", "extreme", "REASONING_EFFORT must be one of minimal, low, medium, high"),
])
def test_a_bad_value_names_the_variable_and_what_it_got(monkeypatch, name, value, message):
    monkeypatch.setenv("ACCELOPT_LLM_MODEL", "m")
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=message):
        conf.llm_roles()


def test_prices_from_the_environment_are_merged_over_the_defaults(monkeypatch):
    monkeypatch.setenv("ACCELOPT_LLM_PRICES", '{"my-model": [1, 3], "gpt-4o": [0, 0]}')
    table = conf.price_table()
    assert table["my-model"] == (1.0, 3.0) and table["gpt-4o"] == (0.0, 0.0)
    assert table["gpt-4o-mini"] == conf.DEFAULT_PRICES_PER_MILLION["gpt-4o-mini"]


def test_a_malformed_price_table_is_refused(monkeypatch):
    monkeypatch.setenv("ACCELOPT_LLM_PRICES", '{"my-model": "cheap"}')
    with pytest.raises(ImproperlyConfigured, match=r"ACCELOPT_LLM_PRICES\['my-model'\] must be \[input, output\]"):
        conf.price_table()
