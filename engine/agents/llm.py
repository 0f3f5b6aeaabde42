"""The chat-completions client every LLM role goes through (the `openai` package, async).

* Per role (`planner`, `executor`, `fixer`, `summarizer`): base URL, API key, model, temperature, max
  tokens, reasoning effort, timeout (`RoleSettings`). Roles may point at different servers.
* One `asyncio.Semaphore` bounds the requests in flight across all roles.
* Timeouts, connection errors, 429 and 5xx are retried with exponential backoff (a server's
  Retry-After is honoured up to the cap); other errors (400, 401, 404, …) are not.
* Each call returns a `CallRecord` (role, model, messages, response, reasoning, tokens, latency, cost,
  error, attempts): the `AgentCall` row. Cost comes from a price table passed in (USD per million
  tokens); it is None (unknown) when the server reports no token usage or the model has no price.
  A call never raises for a model failure; the record's `error` says what happened.
* The API key is never logged, never put in a record, and scrubbed from error texts; `repr` hides it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import openai

from engine.agents.base import ROLES, CallRecord

DEFAULT_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class RoleSettings:
    model: str
    base_url: str | None = None  # None: the openai package default
    api_key: str = field(default="", repr=False)
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None  # "low" | "medium" | "high" for models that take it
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class ModelPrice:
    input_per_million: float  # USD per million prompt tokens
    output_per_million: float  # USD per million completion tokens

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6


def price_table(raw: Mapping[str, Any]) -> dict[str, ModelPrice]:
    """Accepts {"model": ModelPrice | (in, out) | {"input": in, "output": out}} (settings-friendly)."""
    table = {}
    for model, price in raw.items():
        if isinstance(price, ModelPrice):
            table[model] = price
        elif isinstance(price, Mapping):
            table[model] = ModelPrice(float(price["input"]), float(price["output"]))
        else:
            prompt, completion = price
            table[model] = ModelPrice(float(prompt), float(completion))
    return table


def reasoning_text(message: Any) -> str:
    """The reasoning a server returned beside the answer: `reasoning_content` (vLLM, DeepSeek, SGLang) or
    `reasoning` (OpenRouter, Ollama, some vLLM versions); '' when it sent none."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if value is None:
            value = (getattr(message, "model_extra", None) or {}).get(name)
        if isinstance(value, str) and value.strip():
            return value
    return ""


class LLMClient:
    def __init__(
        self,
        roles: Mapping[str, RoleSettings],
        *,
        prices: Mapping[str, Any] | None = None,
        max_concurrency: int = 8,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        backoff_cap_s: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            raise ValueError(f"unknown agent roles {unknown}; expected some of {list(ROLES)}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.roles = dict(roles)
        self.prices = price_table(prices or {})
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_cap_s = backoff_cap_s
        self._sleep = sleep
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._clients: dict[tuple[str | None, str, float], openai.AsyncOpenAI] = {}

    def __repr__(self) -> str:
        return f"LLMClient(roles={ {r: s.model for r, s in self.roles.items()} })"

    def settings(self, role: str) -> RoleSettings:
        try:
            return self.roles[role]
        except KeyError:
            raise ValueError(f"no model configured for the {role!r} role; configured: {sorted(self.roles)}") from None

    def _client(self, s: RoleSettings) -> openai.AsyncOpenAI:
        key = (s.base_url, s.api_key, s.timeout_s)
        if key not in self._clients:
            # Retries are ours (counted and recorded), so the package's own are off.
            self._clients[key] = openai.AsyncOpenAI(base_url=s.base_url, api_key=s.api_key or "not-needed",
                                                    timeout=s.timeout_s, max_retries=0)
        return self._clients[key]

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    async def chat(self, role: str, messages: list[dict[str, str]], *, seed: int | None = None) -> CallRecord:
        s = self.settings(role)
        record = CallRecord(role=role, model=s.model, prompt=messages, attempts=0)
        kwargs: dict[str, Any] = {"model": s.model, "messages": messages}
        if s.temperature is not None:
            kwargs["temperature"] = s.temperature
        if s.max_tokens is not None:
            kwargs["max_tokens"] = s.max_tokens
        if s.reasoning_effort:
            kwargs["reasoning_effort"] = s.reasoning_effort
        if seed is not None:
            kwargs["seed"] = seed
        started = time.perf_counter()
        async with self._semaphore:
            for attempt in range(self.max_retries + 1):
                record.attempts = attempt + 1
                try:
                    completion = await self._client(s).chat.completions.create(**kwargs)
                except (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                        openai.InternalServerError) as exc:
                    record.error = self._describe(exc, s)
                    if attempt == self.max_retries:
                        break
                    await self._sleep(self._delay(attempt, exc))
                    continue
                except openai.APIStatusError as exc:
                    if exc.status_code >= 500 and attempt < self.max_retries:
                        record.error = self._describe(exc, s)
                        await self._sleep(self._delay(attempt, exc))
                        continue
                    record.error = self._describe(exc, s)
                    break
                except (openai.OpenAIError, ValueError, TypeError, KeyError) as exc:
                    # A body that is not a completion (HTML from a proxy, truncated JSON): not retried.
                    record.error = "malformed response: " + self._describe(exc, s)
                    break
                record.error = ""
                self._fill(record, completion, s)
                break
        record.latency_ms = (time.perf_counter() - started) * 1000.0
        return record

    def _fill(self, record: CallRecord, completion: Any, s: RoleSettings) -> None:
        usage = getattr(completion, "usage", None)
        record.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        record.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        price = self.prices.get(s.model)
        # No usage reported, or no price for the model: the cost is unknown (None), never $0.
        known = usage is not None and price is not None
        record.cost_usd = price.cost(record.prompt_tokens, record.completion_tokens) if known and price else None
        choices = getattr(completion, "choices", None) or []
        if not choices:
            record.error = "the server returned no choices"
            return
        choice = choices[0]
        record.finish_reason = str(getattr(choice, "finish_reason", "") or "")
        message = getattr(choice, "message", None)
        record.response = str(getattr(message, "content", "") or "")
        record.reasoning = reasoning_text(message)

    def _delay(self, attempt: int, exc: Exception) -> float:
        delay = min(self.backoff_cap_s, self.backoff_s * (2 ** attempt))
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        if retry_after:
            try:
                delay = min(self.backoff_cap_s, max(delay, float(retry_after)))
            except ValueError:
                pass  # an HTTP date: keep our own backoff
        return delay

    @staticmethod
    def _describe(exc: Exception, s: RoleSettings) -> str:
        status = getattr(exc, "status_code", None)
        text = f"{type(exc).__name__}" + (f" (HTTP {status})" if status else "") + f": {exc}"
        if s.api_key:
            text = text.replace(s.api_key, "***")
        return text[:2000]
