"""Budgets: the most a run (or a campaign) may spend in tokens, dollars, wall time and evaluations.

Pure Python: no Django. The search checks its budget between steps (`BeamSearch.step`): a run that has
reached one stops cleanly (status "stopped", everything it found kept). Campaigns reuse the same checker
over the sums of their runs. The field names are the same everywhere a budget is stored (the Run's and a
Campaign's model fields, the API, the forms): BUDGET_FIELDS.

Cost can be *unknown*: a server that reports no token usage, or a model without a price, gives calls whose
cost we cannot know. Those never count as $0: the known cost is only a lower bound then, so a dollar cap
still stops a run whose known cost reached it, but the cap is marked as not enforceable (`Usage.
cost_unknown`), and the UI says so. The same holds for a token cap when usage went unreported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

# name -> (label, unit) in the order they are shown.
BUDGET_FIELDS: dict[str, tuple[str, str]] = {
    "max_tokens": ("tokens", "tokens"),
    "max_cost_usd": ("dollars", "USD"),
    "max_wall_time_s": ("wall time", "s"),
    "max_evaluations": ("evaluations", "evaluations"),
}


@dataclass(frozen=True)
class Budget:
    """Caps on what a run may spend; None is no cap."""

    max_tokens: int | None = None
    max_cost_usd: float | None = None
    max_wall_time_s: float | None = None
    max_evaluations: int | None = None

    def __post_init__(self) -> None:
        for name in BUDGET_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"budget {name} must be a number, got {value!r}")
            if value <= 0:
                raise ValueError(f"budget {name} must be above 0 (leave it empty for no cap), got {value}")

    @property
    def empty(self) -> bool:
        return all(getattr(self, name) is None for name in BUDGET_FIELDS)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Budget:
        """From a dict with (some of) the BUDGET_FIELDS; empty strings and None are no cap."""
        data = dict(data or {})
        unknown = sorted(set(data) - set(BUDGET_FIELDS))
        if unknown:
            raise ValueError(f"unknown budget fields {unknown}; known: {list(BUDGET_FIELDS)}")
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = data.get(f.name)
            if raw is None or raw == "":
                continue
            try:
                values[f.name] = int(raw) if f.name in ("max_tokens", "max_evaluations") else float(raw)
            except (TypeError, ValueError):
                raise ValueError(f"budget {f.name} must be a number, got {raw!r}") from None
        return cls(**values)


@dataclass(frozen=True)
class Usage:
    """What has been spent so far. `unpriced_calls`: calls whose cost (or usage) nobody reported."""

    tokens: int = 0
    cost_usd: float = 0.0
    wall_time_s: float = 0.0
    evaluations: int = 0
    unpriced_calls: int = 0

    @property
    def cost_unknown(self) -> bool:
        return self.unpriced_calls > 0

    @classmethod
    def from_totals(cls, totals: Any) -> Usage:
        """From the search's `Totals` (or its dict in a checkpoint)."""
        get = totals.get if isinstance(totals, dict) else lambda name, default: getattr(totals, name, default)
        return cls(
            tokens=int(get("prompt_tokens", 0) or 0) + int(get("completion_tokens", 0) or 0),
            cost_usd=float(get("cost_usd", 0.0) or 0.0),
            wall_time_s=float(get("wall_time_s", 0.0) or 0.0),
            evaluations=int(get("evaluations", 0) or 0),
            unpriced_calls=int(get("unpriced_calls", 0) or 0),
        )

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages (a campaign adds up its runs)."""
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def used(self, name: str) -> float:
        return {"max_tokens": self.tokens, "max_cost_usd": self.cost_usd, "max_wall_time_s": self.wall_time_s,
                "max_evaluations": self.evaluations}[name]


@dataclass(frozen=True)
class BudgetReached:
    """Which cap stopped the run, and where the usage stood."""

    budget: str  # a BUDGET_FIELDS name
    limit: float
    used: float

    @property
    def label(self) -> str:
        return BUDGET_FIELDS[self.budget][0]

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "label": self.label, "limit": self.limit, "used": self.used}

    def describe(self) -> str:
        unit = BUDGET_FIELDS[self.budget][1]
        if self.budget == "max_cost_usd":
            return f"{self.label} budget reached: {_usd(self.used)} of {_usd(self.limit)}"
        return f"{self.label} budget reached: {self.used:g} of {self.limit:g} {unit}"


def budget_reached(budget: Budget | None, usage: Usage) -> BudgetReached | None:
    """The first cap (in BUDGET_FIELDS order) that `usage` has reached, or None.

    An unknown cost counts as nothing, not as $0 of a cap: the known part alone can still reach the cap."""
    if budget is None:
        return None
    for name in BUDGET_FIELDS:
        limit = getattr(budget, name)
        if limit is not None and usage.used(name) >= limit:
            return BudgetReached(budget=name, limit=float(limit), used=float(usage.used(name)))
    return None


def remaining_evaluations(budget: Budget | None, usage: Usage) -> int | None:
    """Evaluations still allowed (None: no cap). The search never starts more, so that cap is exact."""
    if budget is None or budget.max_evaluations is None:
        return None
    return max(0, budget.max_evaluations - usage.evaluations)


def progress(budget: Budget | None, usage: Usage) -> list[dict[str, Any]]:
    """One row per cap that is set, for progress bars: name, label, used, limit, fraction (0..1) and
    whether it can be enforced (a dollar or token cap cannot be while some calls' cost is unknown)."""
    rows: list[dict[str, Any]] = []
    if budget is None:
        return rows
    for name, (label, unit) in BUDGET_FIELDS.items():
        limit = getattr(budget, name)
        if limit is None:
            continue
        used = usage.used(name)
        enforceable = not (usage.cost_unknown and name in ("max_cost_usd", "max_tokens"))
        rows.append({"name": name, "label": label, "unit": unit, "used": used, "limit": limit,
                     "fraction": min(1.0, used / limit) if limit else 1.0, "reached": used >= limit,
                     "enforceable": enforceable})
    return rows


def launch_notes(
    budget: Budget,
    *,
    llm: bool,
    max_evaluations: int,
    estimate_tokens: int | None = None,
    estimate_cost_usd: float | None = None,
    unpriced_models: tuple[str, ...] = (),
) -> list[str]:
    """What a launch says about `budget` against the run's upper-bound estimate (the run form shows these
    live, and `create_run` records them with the run; campaigns pass their summed estimates).

    `max_evaluations` is the most evaluations the search parameters allow; the estimate is the LLM cost
    estimate's upper bound (None for the offline agent); `unpriced_models` are models without a price."""
    notes: list[str] = []
    if budget.max_evaluations is not None and budget.max_evaluations < max_evaluations:
        notes.append(f"Stops after {budget.max_evaluations} evaluations, of up to {max_evaluations} the search "
                     "parameters allow.")
    if not llm:
        if budget.max_tokens is not None or budget.max_cost_usd is not None:
            notes.append("The offline agent makes no LLM calls: the token and dollar budgets never apply.")
        return notes
    if budget.max_cost_usd is not None:
        if unpriced_models:
            notes.append(f"No price is known for {', '.join(unpriced_models)}: those calls' cost is unknown, so the "
                         "dollar budget cannot be enforced for them (set ACCELOPT_LLM_PRICES).")
        if estimate_cost_usd is not None and estimate_cost_usd > budget.max_cost_usd:
            notes.append(f"The estimate (up to {_usd(estimate_cost_usd)}) is above the dollar budget "
                         f"({_usd(budget.max_cost_usd)}): the run will likely stop on it.")
        elif estimate_cost_usd is not None:
            notes.append(f"The estimate (up to {_usd(estimate_cost_usd)}) fits the dollar budget "
                         f"({_usd(budget.max_cost_usd)}).")
    if budget.max_tokens is not None and estimate_tokens is not None and estimate_tokens > budget.max_tokens:
        notes.append(f"The estimate (up to {estimate_tokens:,} tokens) is above the token budget "
                     f"({budget.max_tokens:,}): the run will likely stop on it.")
    return notes


def _usd(value: float) -> str:
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"
