"""Configuration is checked at start (issue 32): an invalid ACCELOPT_* value stops `manage.py prepare` and the
server (daphne) with every problem listed and the accepted values, before anything is served or migrated."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from accelopt_site.config_check import check_configuration, configuration_errors, unknown_variables

ROOT = Path(__file__).resolve().parents[2]


def test_a_clean_environment_is_valid():
    assert configuration_errors() == []


@pytest.mark.parametrize(("name", "value", "accepted"), [
    ("ACCELOPT_BACKGROUND_BASELINES", "0", "mini, full, mini,full or none"),
    ("ACCELOPT_EVALUATION_WORKERS", "two", "must be an integer"),
    ("ACCELOPT_EVALUATION_TIMEOUT_S", "0", "at least 1"),
    ("ACCELOPT_EMBEDDED_WORKER", "maybe", "1/0, true/false, yes/no, on/off"),
    ("ACCELOPT_RAY_RESOURCES", "{not json", "must be JSON"),
    ("ACCELOPT_SANDBOX_UIDS", "5", "FIRST-LAST"),
    ("ACCELOPT_NEURON_CORES", "a-b", "0-31 or 0,2,4-7"),
    ("ACCELOPT_LLM_PRICES", '{"gpt": 1}', "must be [input, output] USD per million tokens"),
])
def test_an_invalid_value_is_named_with_what_is_accepted(monkeypatch, name, value, accepted):
    monkeypatch.setenv(name, value)
    [error] = configuration_errors()
    assert name in error and accepted in error, error


def test_every_problem_is_listed_at_once(monkeypatch):
    monkeypatch.setenv("ACCELOPT_BACKGROUND_BASELINES", "0")
    monkeypatch.setenv("ACCELOPT_WORKER_POLL_MS", "1")
    with pytest.raises(ImproperlyConfigured) as raised:
        check_configuration()
    message = str(raised.value)
    assert "ACCELOPT_BACKGROUND_BASELINES must be one of mini, full, mini,full or none; got '0'" in message
    assert "ACCELOPT_WORKER_POLL_MS must be at least 10; got 1" in message


def test_prepare_stops_before_migrating(monkeypatch, db):
    monkeypatch.setenv("ACCELOPT_BACKGROUND_BASELINES", "0")
    with pytest.raises(CommandError, match="ACCELOPT_BACKGROUND_BASELINES must be one of"):
        call_command("prepare", "--skip-optional")


def test_a_typo_in_a_name_is_a_warning():
    assert unknown_variables({"ACCELOPT_BACKGROUND_BASELINE": "mini", "ACCELOPT_LLM_FIXER_MODEL": "m",
                              "ACCELOPT_NEURON_CORES": "0", "ACCELOPT_DEBUG": "1"}) == ["ACCELOPT_BACKGROUND_BASELINE"]


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELOPT_")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return {**env, "ACCELOPT_VAR_DIR": str(tmp_path), **extra}


def test_the_server_does_not_start_and_says_why(tmp_path):
    """What `make run`'s serve step runs: daphne importing the ASGI application exits 2, no traceback."""
    done = subprocess.run([sys.executable, "-c", "import accelopt_site.asgi"], cwd=ROOT, capture_output=True, text=True,
                          env=_environment(tmp_path, ACCELOPT_BACKGROUND_BASELINES="0"), timeout=120)
    assert done.returncode == 2, done.stderr
    assert "AccelOpt Studio cannot start: invalid configuration" in done.stderr
    assert "ACCELOPT_BACKGROUND_BASELINES must be one of mini, full, mini,full or none; got '0'" in done.stderr
    assert "Traceback" not in done.stderr


def test_manage_py_names_a_bad_value_settings_py_reads_without_a_traceback(tmp_path):
    done = subprocess.run([sys.executable, "manage.py", "prepare"], cwd=ROOT, capture_output=True, text=True,
                          env=_environment(tmp_path, ACCELOPT_LOG_LEVEL="loud"), timeout=120)
    assert done.returncode == 1
    assert "ACCELOPT_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR; got 'loud'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "accelopt.sqlite3").exists()
