"""Settings of the optimizer app: the run worker, the LLM endpoint per agent role, and the price table.

Each value comes from a Django setting of the same name when one is defined (tests use override_settings),
otherwise from the environment (docs/operations.md lists the variables), otherwise from the default
here, which gives the offline embedded mode. Read through the functions, never at import time, so a
changed setting takes effect without a restart of the test process.

Secrets (API keys) are read with env_secret (NAME or NAME_FILE) and never logged (RoleSettings hides
the key from its repr; public_role_settings() leaves it out).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from accelopt_site.env import env_bool, env_int, env_secret, env_str
from engine.agents.base import ROLES

if TYPE_CHECKING:  # importing openai takes seconds: only LLM runs pay for it
    from engine.agents.llm import RoleSettings

REASONING_EFFORTS = ("", "minimal", "low", "medium", "high")


def _setting(name: str, read_env: Any) -> Any:
    """A Django setting if defined, else the environment reader's value."""
    if hasattr(settings, name):
        return getattr(settings, name)
    return read_env()


# --- run worker ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerSettings:
    embedded: bool  # start a worker inside the ASGI web process
    poll_interval_s: float  # how often an idle worker looks for queued runs
    heartbeat_interval_s: float  # how often a worker driving a run says it is alive
    stale_after_s: float  # a running run with no heartbeat for this long is taken over
    concurrency: int  # runs one worker drives at the same time


def worker_settings() -> WorkerSettings:
    return WorkerSettings(
        embedded=bool(_setting("ACCELOPT_EMBEDDED_WORKER", lambda: env_bool("ACCELOPT_EMBEDDED_WORKER", True))),
        poll_interval_s=float(
            _setting("ACCELOPT_WORKER_POLL_MS", lambda: env_int("ACCELOPT_WORKER_POLL_MS", 1000, minimum=10))
        )
        / 1000.0,
        heartbeat_interval_s=float(
            _setting("ACCELOPT_WORKER_HEARTBEAT_S", lambda: env_int("ACCELOPT_WORKER_HEARTBEAT_S", 10, minimum=1))
        ),
        stale_after_s=float(
            _setting("ACCELOPT_WORKER_STALE_S", lambda: env_int("ACCELOPT_WORKER_STALE_S", 60, minimum=1))
        ),
        concurrency=int(
            _setting(
                "ACCELOPT_WORKER_CONCURRENCY", lambda: env_int("ACCELOPT_WORKER_CONCURRENCY", 1, minimum=1)
            )
        ),
    )


# --- LLM endpoints per role ---------------------------------------------------------------------------


def _env_float(name: str) -> float | None:
    raw = env_str(name)
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number; got {raw!r}") from None


def _role_from_env(role: str) -> RoleSettings | None:
    """ACCELOPT_LLM_<ROLE>_<FIELD> overrides ACCELOPT_LLM_<FIELD> for that role; None without a model."""
    from engine.agents.llm import RoleSettings  # lazy: engine.agents.llm imports openai

    prefix = f"ACCELOPT_LLM_{role.upper()}_"

    def pick(suffix: str) -> str:
        return env_str(prefix + suffix) or env_str("ACCELOPT_LLM_" + suffix)

    model = pick("MODEL")
    if not model:
        return None
    temperature = _env_float(prefix + "TEMPERATURE")
    if temperature is None:
        temperature = _env_float("ACCELOPT_LLM_TEMPERATURE")
    max_tokens_raw = pick("MAX_TOKENS")
    try:
        max_tokens = int(max_tokens_raw) if max_tokens_raw else None
    except ValueError:
        raise ImproperlyConfigured(f"{prefix}MAX_TOKENS must be an integer; got {max_tokens_raw!r}") from None
    effort = pick("REASONING_EFFORT").lower()
    if effort not in REASONING_EFFORTS:
        raise ImproperlyConfigured(
            f"{prefix}REASONING_EFFORT must be one of {', '.join(e for e in REASONING_EFFORTS if e)}; got {effort!r}"
        )
    return RoleSettings(
        model=model,
        base_url=pick("BASE_URL") or None,
        api_key=env_secret(prefix + "API_KEY") or env_secret("ACCELOPT_LLM_API_KEY"),
        temperature=temperature,
        max_tokens=max_tokens,
        reasoning_effort=effort or None,
        timeout_s=float(env_int("ACCELOPT_LLM_TIMEOUT_S", 600, minimum=1)),
    )


def llm_roles(model_overrides: dict[str, str] | None = None) -> dict[str, RoleSettings]:
    """The endpoint per configured role (roles without a model are left out).

    A Django setting ACCELOPT_LLM_ROLES = {role or "default": {RoleSettings field: value}} wins over the
    environment; `model_overrides` (a run's "model per role") replaces just the model name.
    """
    from engine.agents.llm import RoleSettings  # lazy: engine.agents.llm imports openai

    configured = getattr(settings, "ACCELOPT_LLM_ROLES", None)
    roles: dict[str, RoleSettings] = {}
    for role in ROLES:
        if configured is not None:
            fields = configured.get(role, configured.get("default"))
            endpoint = RoleSettings(**fields) if fields else None
        else:
            endpoint = _role_from_env(role)
        if endpoint is not None and model_overrides and model_overrides.get(role):
            endpoint = replace(endpoint, model=model_overrides[role])
        if endpoint is not None:
            roles[role] = endpoint
    return roles


def llm_available() -> bool:
    """True when every role has a model; otherwise runs default to the offline agent."""
    return set(llm_roles()) == set(ROLES)


def public_role_settings(roles: dict[str, RoleSettings]) -> dict[str, dict[str, Any]]:
    """What may be stored with a run and shown in the UI: everything but the API key."""
    return {
        role: {
            "model": s.model,
            "base_url": s.base_url or "",
            "temperature": s.temperature,
            "max_tokens": s.max_tokens,
            "reasoning_effort": s.reasoning_effort or "",
        }
        for role, s in roles.items()
    }


def llm_concurrency() -> int:
    """Chat requests in flight at once, over all roles of one run."""
    return int(_setting("ACCELOPT_LLM_CONCURRENCY", lambda: env_int("ACCELOPT_LLM_CONCURRENCY", 8, minimum=1)))


def llm_max_retries() -> int:
    """Retries per call on timeouts, connection errors, 429 and 5xx."""
    return int(_setting("ACCELOPT_LLM_MAX_RETRIES", lambda: env_int("ACCELOPT_LLM_MAX_RETRIES", 3, minimum=0)))


def llm_backoff_s() -> float:
    return float(_setting("ACCELOPT_LLM_BACKOFF_MS", lambda: env_int("ACCELOPT_LLM_BACKOFF_MS", 1000, minimum=0)))  / 1000.0


# --- prices -------------------------------------------------------------------------------------------

# USD per million tokens (input, output). Vendor list prices change: treat these as defaults and put the
# prices you pay in ACCELOPT_LLM_PRICES (JSON: {"model": [input, output]}), which is merged over this. A model
# missing from the table has an unknown cost (never $0): price a self-hosted model at [0, 0] there.
#
# The AccelOpt paper's models, so its cost comparison can be rerun (docs/operations.md, "Prices"). Claude
# Sonnet 4: Anthropic's API list price (docs.anthropic.com, "Pricing"; unchanged since its release in May
# 2025). The open models as hosted by Together AI (serverless list prices, together.ai/pricing): on
# 2026-12-04 we could not open Together's own page, but Mastra's Together AI model list
# (mastra.ai/models/v1/providers/togetherai) gives the same rates for both: $0.15/$0.60 and $2/$2.
PAPER_MODEL_PRICES: dict[str, tuple[float, float]] = {
    "claude-sonnet-4-20250514": (3.00, 15.00),
    "claude-sonnet-4-0": (3.00, 15.00),
    "openai/gpt-oss-120b": (0.15, 0.60),  # Together AI
    "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8": (2.00, 2.00),  # Together AI
}

DEFAULT_PRICES_PER_MILLION: dict[str, tuple[float, float]] = {
    **PAPER_MODEL_PRICES,
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "o4-mini": (1.10, 4.40),
    "Qwen/Qwen3-Coder-480B-A35B-Instruct": (2.00, 2.00),  # the same model under its Hugging Face name
}


def price_table() -> dict[str, tuple[float, float]]:
    """Model name -> (USD per million prompt tokens, USD per million completion tokens)."""
    configured = getattr(settings, "ACCELOPT_LLM_PRICES", None)
    if configured is None:
        raw = env_str("ACCELOPT_LLM_PRICES")
        try:
            configured = json.loads(raw) if raw else {}
        except json.JSONDecodeError as error:
            raise ImproperlyConfigured(f"ACCELOPT_LLM_PRICES is not valid JSON: {error}") from None
    table = dict(DEFAULT_PRICES_PER_MILLION)
    for model, prices in configured.items():
        try:
            prompt_price, completion_price = (float(p) for p in prices)
        except (TypeError, ValueError):
            raise ImproperlyConfigured(
                f"ACCELOPT_LLM_PRICES[{model!r}] must be [input, output] USD per million tokens; got {prices!r}"
            ) from None
        table[model] = (prompt_price, completion_price)
    return table
