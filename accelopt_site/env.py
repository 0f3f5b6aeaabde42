"""Typed readers for settings that come from the environment.

Every helper returns the default when the variable is unset or empty, and raises ImproperlyConfigured
(naming the variable and the value received) when it is set to something it cannot understand, so a
typo fails at start-up instead of quietly running with a default.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
REDIS_SOCKET_TIMEOUT_S = 15
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_str(name: str, default: str = "") -> str:
    """A plain string; leading and trailing whitespace removed."""
    value = _raw(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    """1/true/yes/on or 0/false/no/off, in any case."""
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1/0, true/false, yes/no, on/off; got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """A decimal integer, optionally bounded."""
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer; got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {number}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}; got {number}")
    return number


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of a fixed set of words (compared case-insensitively, returned as spelled in `choices`)."""
    value = _raw(name)
    if value is None:
        return default
    for choice in choices:
        if value.lower() == choice.lower():
            return choice
    raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def env_list(name: str, default: list[str]) -> list[str]:
    """Comma-separated values, blanks dropped."""
    value = _raw(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_json(name: str, default: Any) -> Any:
    """A JSON value (object, list, number...), for structured settings such as resources per backend."""
    value = _raw(name)
    if value is None:
        return default
    try:
        return json.loads(value)
    except json.JSONDecodeError as error:
        raise ImproperlyConfigured(f"{name} must be JSON ({error.msg} at column {error.colno}); got {value!r}") from None


def env_secret(name: str, default: str = "") -> str:
    """A secret from NAME, or from the file named by NAME_FILE (Docker/Kubernetes secrets style).

    Setting both is refused: one of them would be silently ignored.
    """
    value = _raw(name)
    file_name = _raw(f"{name}_FILE")
    if value is not None and file_name is not None:
        raise ImproperlyConfigured(f"set either {name} or {name}_FILE, not both")
    if file_name is not None:
        try:
            content = Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise ImproperlyConfigured(
                f"{name}_FILE={file_name!r} cannot be read: {error.strerror}"
            ) from None
        if not content:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} is empty")
        return content
    return default if value is None else value


def persistent_secret(path: Path, *, nbytes: int = 50) -> str:
    """Read a generated secret from `path`, creating it (mode 0600) on first use.

    O_EXCL makes two processes starting together agree on one value.
    """
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(nbytes)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    return value


def database_from_url(url: str, *, base_dir: Path) -> dict[str, Any]:
    """Django DATABASES["default"] from a URL.

    sqlite:///relative/path (relative to base_dir), sqlite:////absolute/path,
    postgres://user:password@host:port/name?sslmode=require (postgresql:// too).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        # urlsplit("sqlite:///a/b").path == "/a/b": strip the one slash that separates host from path.
        raw_path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
        if not raw_path:
            raise ImproperlyConfigured(
                f"DATABASE_URL {url!r} names no SQLite file (use sqlite:///var/db.sqlite3)"
            )
        path = Path(raw_path)
        name = path if path.is_absolute() else base_dir / path
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": name,
            "OPTIONS": {
                # WAL lets the web requests read while the in-process run worker writes;
                # IMMEDIATE takes the write lock up front instead of failing mid-transaction.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
        }
    if scheme in {"postgres", "postgresql"}:
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL {url!r} names no database (postgres://host/NAME)")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "OPTIONS": dict(parse_qsl(parts.query)),
            "CONN_MAX_AGE": 60,
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {parts.scheme!r} is not supported (use sqlite:/// or postgres://); got {url!r}"
    )


def channel_layers_from_url(redis_url: str) -> dict[str, Any]:
    """CHANNEL_LAYERS: in-memory (one process) when no Redis URL is given, channels_redis otherwise."""
    if not redis_url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    scheme = urlsplit(redis_url).scheme.lower()
    if scheme not in {"redis", "rediss", "unix"}:
        raise ImproperlyConfigured(
            f"REDIS_URL must start with redis://, rediss:// or unix://; got {redis_url!r}"
        )
    if importlib.util.find_spec("channels_redis") is None:
        raise ImproperlyConfigured(
            "REDIS_URL is set but channels-redis is not installed; install the extra: pip install -e '.[scale]'"
        )
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py 8 reads with a 5 s socket timeout by default, which ends the layer's blocking 5 s
            # BZPOPMIN early: every idle websocket consumer crashed after ~5 s (channels_redis issue 422).
            # A timeout above the blocking one keeps them alive and still notices a dead Redis.
            "CONFIG": {"hosts": [{"address": redis_url, "socket_timeout": REDIS_SOCKET_TIMEOUT_S}]},
        }
    }
