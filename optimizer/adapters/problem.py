"""The run's problem as the agents see it."""

from __future__ import annotations

from optimizer.agents.base import ProblemContext
from optimizer.models import Run


def problem_context(run: Run) -> ProblemContext:
    problem = run.problem
    return ProblemContext(
        slug=problem.slug,
        reference_source=problem.reference_source,
        platform=run.platform,
        family=problem.family,
        description=problem.description or problem.title,
    )
