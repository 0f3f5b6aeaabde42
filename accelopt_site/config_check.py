"""One place that reads every ACCELOPT_* setting once, at start, and reports every invalid value together.

The apps read their settings lazily (benchmark.conf, optimizer.conf, the sandbox and Neuron modules), so a bad
value used to surface only when a page or a worker first asked for it (issue 32: ACCELOPT_BACKGROUND_BASELINES=0
crashed a page minutes after start). `manage.py prepare` and the ASGI application (daphne) call
`check_configuration()` before doing anything else: `make run` stops with the list of problems and, for each,
the values that are accepted. Each check calls the same reader the app uses, so the two cannot disagree.

A variable named ACCELOPT_* that nothing reads (a typo) is reported as a warning, not an error: measurements
and tests set their own.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import NoReturn

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from accelopt_site.env import env_bool, env_choice, env_int, env_secret
from benchmark import conf as benchmark_conf
from engine.evaluator.sandbox.user import root_allowed, uid_range
from engine.platforms.nki.neuron.host import NeuronHost
from optimizer import conf as optimizer_conf


def _settings_module() -> None:
    # lazy: importing settings.py reads the environment, and asgi.py imports this module before Django does
    from accelopt_site.settings import LOG_LEVELS

    # settings.py reads these at import (a bad one already stops Django); read again so the list is whole.
    env_bool("ACCELOPT_DEBUG")
    env_bool("ACCELOPT_HTTPS")
    env_bool("ACCELOPT_SERVE_STATIC", True)
    env_choice("ACCELOPT_LOG_LEVEL", "INFO", LOG_LEVELS)
    env_secret("ACCELOPT_SECRET_KEY")
    env_int("ACCELOPT_STALL_SECONDS", 60, minimum=0, maximum=86400)
    env_int("ACCELOPT_HSTS_SECONDS", 31536000, minimum=0, maximum=2 * 31536000)
    env_bool("ACCELOPT_HSTS_INCLUDE_SUBDOMAINS")
    env_int("ACCELOPT_LOGIN_FAILURE_LIMIT", 5, minimum=1, maximum=1000)
    env_int("ACCELOPT_LOGIN_COOLOFF_MINUTES", 15, minimum=0, maximum=7 * 24 * 60)
    env_int("ACCELOPT_QUOTA_QUEUED_EVALUATIONS", 20, minimum=0, maximum=100000)
    env_int("ACCELOPT_QUOTA_RUNS_IN_FLIGHT", 4, minimum=0, maximum=10000)
    env_int("ACCELOPT_MAX_UPLOAD_BYTES", 10 * 1024 * 1024, minimum=64 * 1024, maximum=1024 * 1024 * 1024)


def _evaluations() -> None:
    conf = benchmark_conf
    conf.evaluation_workers()
    conf.evaluations_inline()
    for large in (False, True):
        conf.timeout_seconds(large)
        conf.memory_bytes(large)
    conf.stale_after_seconds()


def _cluster() -> None:
    conf = benchmark_conf
    conf.ray_address()
    conf.ray_resources()
    conf.ray_max_retries()


def _baselines() -> None:
    benchmark_conf.background_baseline_cases()


def _worker() -> None:
    optimizer_conf.worker_settings()


def _llm() -> None:
    conf = optimizer_conf
    # Reading the roles imports openai (a second): only when an endpoint is configured at all.
    if hasattr(settings, "ACCELOPT_LLM_ROLES") or any(n.startswith("ACCELOPT_LLM_") for n in os.environ):
        conf.llm_roles()
    conf.llm_concurrency()
    conf.llm_max_retries()
    conf.llm_backoff_s()
    conf.price_table()


def _sandbox() -> None:
    root_allowed()
    uid_range()


def _neuron() -> None:
    NeuronHost.from_environment()


# (what it covers, the check). Every ACCELOPT_* variable some module reads is covered by one of these.
CHECKS: tuple[tuple[str, Callable[[], None]], ...] = (
    ("site settings", _settings_module),
    ("evaluation limits", _evaluations),
    ("Ray cluster", _cluster),
    ("background baselines", _baselines),
    ("run worker", _worker),
    ("LLM endpoints", _llm),
    ("evaluation sandbox", _sandbox),
    ("Neuron hardware", _neuron),
)

# Names some module reads (the ones the checks above cover, and a few read as plain paths or hooks).
KNOWN = frozenset({
    "ACCELOPT_VAR_DIR", "ACCELOPT_DEBUG", "ACCELOPT_SECRET_KEY", "ACCELOPT_SECRET_KEY_FILE", "ACCELOPT_HTTPS",
    "ACCELOPT_SERVE_STATIC", "ACCELOPT_LOG_LEVEL", "ACCELOPT_EVALUATION_WORKERS", "ACCELOPT_EVALUATION_INLINE",
    "ACCELOPT_EVALUATION_TIMEOUT_S", "ACCELOPT_EVALUATION_FULL_TIMEOUT_S", "ACCELOPT_EVALUATION_MEMORY_MB",
    "ACCELOPT_EVALUATION_FULL_MEMORY_MB", "ACCELOPT_EVALUATION_STALE_AFTER_S", "ACCELOPT_RAY_ADDRESS",
    "ACCELOPT_RAY_RESOURCES", "ACCELOPT_RAY_MAX_RETRIES", "ACCELOPT_BACKGROUND_BASELINES",
    "ACCELOPT_EMBEDDED_WORKER", "ACCELOPT_WORKER_POLL_MS", "ACCELOPT_WORKER_HEARTBEAT_S", "ACCELOPT_WORKER_STALE_S",
    "ACCELOPT_WORKER_CONCURRENCY", "ACCELOPT_LLM_CONCURRENCY", "ACCELOPT_LLM_MAX_RETRIES", "ACCELOPT_LLM_BACKOFF_MS",
    "ACCELOPT_LLM_PRICES", "ACCELOPT_LLM_TIMEOUT_S", "ACCELOPT_SANDBOX_ALLOW_ROOT", "ACCELOPT_SANDBOX_UIDS",
    "ACCELOPT_EVENT_TRACE", "ACCELOPT_STALL_SECONDS", "ACCELOPT_HSTS_SECONDS", "ACCELOPT_HSTS_INCLUDE_SUBDOMAINS",
    "ACCELOPT_LOGIN_FAILURE_LIMIT", "ACCELOPT_LOGIN_COOLOFF_MINUTES", "ACCELOPT_QUOTA_QUEUED_EVALUATIONS",
    "ACCELOPT_QUOTA_RUNS_IN_FLIGHT", "ACCELOPT_MAX_UPLOAD_BYTES",
})
# Families: per-role LLM settings (ACCELOPT_LLM_FIXER_MODEL), the Neuron host's.
KNOWN_PATTERNS = (re.compile(r"ACCELOPT_LLM_[A-Z_]+"), re.compile(r"ACCELOPT_NEURON_[A-Z_]+"))


def configuration_errors() -> list[str]:
    """Every invalid setting, one message each (the variable, the value received and what is accepted)."""
    errors: list[str] = []
    for _, check in CHECKS:
        try:
            check()
        except (ImproperlyConfigured, ValueError, OSError) as error:  # the readers' ways of refusing a value
            errors.append(str(error))
    return errors


def unknown_variables(environ: dict[str, str] | None = None) -> list[str]:
    """ACCELOPT_* variables set in the environment that no module reads (likely typos)."""
    names = (environ if environ is not None else os.environ).keys()
    return sorted(n for n in names if n.startswith("ACCELOPT_") and n not in KNOWN
                  and not any(p.fullmatch(n) for p in KNOWN_PATTERNS))


def check_configuration() -> None:
    """ImproperlyConfigured listing every invalid setting; nothing when all are valid."""
    errors = configuration_errors()
    if errors:
        raise ImproperlyConfigured("invalid configuration (docs/operations.md lists the settings):\n"
                                   + "\n".join(f"  - {e}" for e in errors))


def exit_if_misconfigured(program: str) -> None:
    """For a process about to serve: print the problems and exit 2 (no traceback); warn of unknown names."""
    for name in unknown_variables():
        print(f"{program}: warning: {name} is set but AccelOpt Studio reads no such setting (a typo?)",
              file=sys.stderr)
    try:
        check_configuration()
    except ImproperlyConfigured as error:
        _exit(f"{program} cannot start: {error}")


def _exit(message: str) -> NoReturn:
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(2)
