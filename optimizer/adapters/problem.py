"""The run's problem as the agents see it."""

from __future__ import annotations

from engine.agents.base import ProblemContext
from optimizer.models import Run


def problem_context(run: Run) -> ProblemContext:
    problem = run.problem
    entry_file, helpers = _solution_files(run)
    return ProblemContext(
        slug=problem.slug,
        reference_source=problem.reference_source,
        platform=run.platform,
        family=problem.family,
        description=problem.description or problem.title,
        entry_file=entry_file,
        helper_files=helpers,
        target_generation=str((run.config or {}).get("nki_generation") or ""),
    )


def _solution_files(run: Run) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The start kernel's entry file and, for a multi-file Triton solution, its other files in the solution's
    order: every kernel of the run rewrites that entry file and keeps those files (benchmark's create_kernel)."""
    kernel = run.start_kernel
    if not kernel.entry_point:  # NKI: one source, no files
        return "", ()
    entry_file = kernel.entry_point.split("::", 1)[0]
    meta = kernel.solution_meta or {}
    others = meta.get("sources") or {}
    order = [path for path in (meta.get("order") or others) if path in others and path != entry_file]
    return entry_file, tuple((path, str(others[path])) for path in order)
