"""How big a campaign is on this server before it is launched: evaluations and the hours they take here.

The campaign form warns with these numbers: AccelOpt's published configuration, left at its defaults, asks for
about two thousand evaluations per problem, which on a 2-core machine is hours per problem, not minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Avg

from benchmark import conf as benchmark_conf
from benchmark.models import Evaluation, EvaluationStatus
from optimizer.services.estimates import max_agent_calls

# Above this many evaluations the form warns (the "thousands").
WARN_EVALUATIONS = 1000
# Seconds one evaluation takes when this server has measured none for the backend and case yet: a mini-shape
# simulator evaluation is a few seconds on one core, a full-shape one about a minute.
ASSUMED_SECONDS = {"mini": 5.0}
ASSUMED_SECONDS_OTHER = 60.0


@dataclass(frozen=True)
class CampaignScale:
    problems: int
    evaluations_per_problem: int
    evaluations: int
    seconds_per_evaluation: float
    measured: bool  # seconds_per_evaluation is this server's average, not the assumption
    at_once: int  # evaluations this server runs at once

    @property
    def hours(self) -> float:
        return self.evaluations * self.seconds_per_evaluation / self.at_once / 3600

    @property
    def per_problem_text(self) -> str:
        return f"{self.evaluations_per_problem:,}"

    @property
    def evaluations_text(self) -> str:
        return f"{self.evaluations:,}"

    @property
    def warn(self) -> bool:
        return self.evaluations >= WARN_EVALUATIONS


def campaign_scale(search: dict[str, Any], *, problems: int, case: str, backend: str) -> CampaignScale:
    """Upper bound of a campaign's evaluations (one per Executor call, plus each run's start) and how long
    they take at this server's evaluation concurrency, from its own mean evaluation time when it has one."""
    per_problem = 1 + max_agent_calls(search)["executor"]
    done = Evaluation.objects.filter(status=EvaluationStatus.DONE, backend=backend, kernel__problem__case=case,
                                     wall_time_s__isnull=False)
    mean = done.aggregate(mean=Avg("wall_time_s"))["mean"]
    seconds = float(mean) if mean else ASSUMED_SECONDS.get(case, ASSUMED_SECONDS_OTHER)
    count = max(problems, 1)
    return CampaignScale(problems=count, evaluations_per_problem=per_problem, evaluations=count * per_problem,
                         seconds_per_evaluation=seconds, measured=bool(mean),
                         at_once=benchmark_conf.evaluation_workers())
