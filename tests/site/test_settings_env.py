"""The environment readers behind settings.py: defaults when unset, ImproperlyConfigured on junk."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from accelopt_site.env import (
    channel_layers_from_url,
    database_from_url,
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_secret,
    env_str,
    persistent_secret,
)


@pytest.mark.parametrize(
    ("raw", "expected"), [("1", True), ("TRUE", True), ("on", True), ("no", False), ("0", False)]
)
def test_env_bool_reads_the_usual_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("ACCELOPT_DEBUG", raw)
    assert env_bool("ACCELOPT_DEBUG", not expected) is expected


def test_env_bool_rejects_junk_naming_variable_and_value(monkeypatch):
    monkeypatch.setenv("ACCELOPT_DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured, match=r"ACCELOPT_DEBUG .*got 'maybe'"):
        env_bool("ACCELOPT_DEBUG")


def test_unset_or_empty_variables_give_the_default(monkeypatch):
    monkeypatch.delenv("ACCELOPT_X", raising=False)
    assert env_int("ACCELOPT_X", 7) == 7
    monkeypatch.setenv("ACCELOPT_X", "  ")
    assert env_bool("ACCELOPT_X", True) is True
    assert env_str("ACCELOPT_X", "fallback") == "fallback"
    assert env_list("ACCELOPT_X", ["a"]) == ["a"]


def test_env_int_rejects_non_numbers_and_out_of_range_values(monkeypatch):
    monkeypatch.setenv("ACCELOPT_WORKERS", "four")
    with pytest.raises(ImproperlyConfigured, match="ACCELOPT_WORKERS must be an integer; got 'four'"):
        env_int("ACCELOPT_WORKERS", 2)
    monkeypatch.setenv("ACCELOPT_WORKERS", "0")
    with pytest.raises(ImproperlyConfigured, match="at least 1; got 0"):
        env_int("ACCELOPT_WORKERS", 2, minimum=1)


def test_env_choice_rejects_words_outside_the_set(monkeypatch):
    monkeypatch.setenv("ACCELOPT_LOG_LEVEL", "debug")
    assert env_choice("ACCELOPT_LOG_LEVEL", "INFO", ("DEBUG", "INFO")) == "DEBUG"
    monkeypatch.setenv("ACCELOPT_LOG_LEVEL", "loud")
    with pytest.raises(ImproperlyConfigured, match="one of DEBUG, INFO; got 'loud'"):
        env_choice("ACCELOPT_LOG_LEVEL", "INFO", ("DEBUG", "INFO"))


def test_env_list_splits_on_commas(monkeypatch):
    monkeypatch.setenv("ALLOWED_HOSTS", "studio.example.com, 10.0.0.5,,")
    assert env_list("ALLOWED_HOSTS", []) == ["studio.example.com", "10.0.0.5"]


def test_env_secret_reads_the_file_variant(monkeypatch, tmp_path):
    secret_file = tmp_path / "key"
    secret_file.write_text("s3cret\n")
    monkeypatch.delenv("ACCELOPT_SECRET_KEY", raising=False)
    monkeypatch.setenv("ACCELOPT_SECRET_KEY_FILE", str(secret_file))
    assert env_secret("ACCELOPT_SECRET_KEY") == "s3cret"


def test_env_secret_refuses_both_variants_and_unreadable_files(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELOPT_SECRET_KEY", "a")
    monkeypatch.setenv("ACCELOPT_SECRET_KEY_FILE", str(tmp_path / "key"))
    with pytest.raises(ImproperlyConfigured, match="either ACCELOPT_SECRET_KEY or ACCELOPT_SECRET_KEY_FILE"):
        env_secret("ACCELOPT_SECRET_KEY")
    monkeypatch.delenv("ACCELOPT_SECRET_KEY")
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_secret("ACCELOPT_SECRET_KEY")


def test_generated_secret_is_private_and_stable(tmp_path):
    path = tmp_path / "var" / "secret_key"
    first = persistent_secret(path)
    assert len(first) >= 50
    assert persistent_secret(path) == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_sqlite_url_relative_to_the_project_and_absolute(tmp_path):
    relative = database_from_url("sqlite:///var/db.sqlite3", base_dir=tmp_path)
    assert relative["ENGINE"] == "django.db.backends.sqlite3"
    assert relative["NAME"] == tmp_path / "var" / "db.sqlite3"
    absolute = database_from_url("sqlite:////srv/accelopt/db.sqlite3", base_dir=tmp_path)
    assert absolute["NAME"] == Path("/srv/accelopt/db.sqlite3")


def test_postgres_url_gives_every_connection_field(tmp_path):
    config = database_from_url(
        "postgres://studio:p%40ss@db.internal:5433/accelopt?sslmode=require", base_dir=tmp_path
    )
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["USER"], config["PASSWORD"]) == ("accelopt", "studio", "p@ss")
    assert (config["HOST"], config["PORT"]) == ("db.internal", "5433")
    assert config["OPTIONS"] == {"sslmode": "require"}


def test_database_url_with_unknown_scheme_is_refused(tmp_path):
    with pytest.raises(ImproperlyConfigured, match="scheme 'mysql' is not supported"):
        database_from_url("mysql://root@localhost/accelopt", base_dir=tmp_path)
    with pytest.raises(ImproperlyConfigured, match="names no database"):
        database_from_url("postgres://localhost/", base_dir=tmp_path)


def test_no_redis_url_means_the_in_memory_channel_layer():
    assert channel_layers_from_url("")["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"


def test_redis_url_needs_a_redis_scheme_and_channels_redis(monkeypatch):
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL must start with redis://"):
        channel_layers_from_url("http://localhost:6379")
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ImproperlyConfigured, match="channels-redis is not installed"):
        channel_layers_from_url("redis://localhost:6379/0")


def test_redis_url_selects_the_redis_channel_layer_when_installed(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    layer = channel_layers_from_url("redis://cache.internal:6379/2")["default"]
    assert layer == {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [{"address": "redis://cache.internal:6379/2", "socket_timeout": 15}]},
    }
