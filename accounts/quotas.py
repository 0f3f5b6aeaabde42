"""Per-person quotas: how many evaluations one person may have queued or running, and how many optimization
runs queued or running, at once. Each limit is a setting (0: no limit); docs/operations.md says how to
change them. The counting lives with what is counted (benchmark.services.evaluations, optimizer.services.launch);
this module holds the limits and the refusal every path raises, page and API alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError

QUEUED_EVALUATIONS = "ACCELOPT_QUOTA_QUEUED_EVALUATIONS"
RUNS_IN_FLIGHT = "ACCELOPT_QUOTA_RUNS_IN_FLIGHT"

# What each limit counts, for messages and the admin's table.
QUOTA_NOUNS = {QUEUED_EVALUATIONS: "evaluations queued or running", RUNS_IN_FLIGHT: "optimization runs queued or running"}
DEFAULTS = {QUEUED_EVALUATIONS: 20, RUNS_IN_FLIGHT: 4}
NEAR_FRACTION = 0.8  # the admin's table flags whoever uses this much of a limit


class QuotaExceeded(ValidationError):
    """A request that would take someone past a quota. A ValidationError, so pages show it where they show bad
    input; the API answers it with 429 (accelopt_site/api.py)."""

    def __init__(self, setting: str, limit: int, used: int, adding: int = 1) -> None:
        noun = QUOTA_NOUNS[setting]
        asked = f"{adding} more would make {used + adding}" if adding != 1 else f"one more would make {used + 1}"
        super().__init__(
            f"You have {used} {noun}; {asked}, over the limit of {limit} per person ({setting}). "
            "Wait for some to finish, or cancel some, then try again."
        )
        self.setting, self.limit, self.used = setting, limit, used


def limit(setting: str) -> int:
    """The configured limit (0: none)."""
    return int(getattr(settings, setting, DEFAULTS[setting]))


def check(setting: str, used: int, adding: int = 1) -> None:
    """QuotaExceeded if `used` plus `adding` goes past the setting's limit."""
    most = limit(setting)
    if most and used + adding > most:
        raise QuotaExceeded(setting, most, used, adding)


@dataclass
class Usage:
    """One person's use of one quota, for the admin's table."""

    setting: str
    used: int
    limit: int

    @property
    def fraction(self) -> float:
        return self.used / self.limit if self.limit else 0.0

    @property
    def near(self) -> bool:
        return bool(self.limit) and self.fraction >= NEAR_FRACTION

    @property
    def noun(self) -> str:
        return QUOTA_NOUNS[self.setting]
