"""What can be done to optimization runs, one module per kind of action; every name is re-exported here, so
callers write `from optimizer import services` and `services.create_run(...)`:

    access      who may see, change and launch runs; find_runs (the runs list)
    defaults    RUN_SEARCH_DEFAULTS, the one set of search defaults
    launch      create_run (run form, POST /api/runs, `manage.py optimize`), budget checks, what the form offers
    lifecycle   cancel_run, pause_run, resume_run, continue_run and continue_refusal (a budget-stopped run)
    reads       what the run pages read: events by page, lineage, beam, chart, memory, plans, kernels, versions,
                evaluations saved
    estimates   max_agent_calls, estimate_llm_cost (the run form's and a campaign's upper bounds)

The web pages, the API and the management commands call these; the run worker (optimizer.worker) does the
driving. State changes are conditional UPDATEs on the status, so a request racing the worker (cancel while it
claims the run, say) never leaves a run in two states. A running run cannot be stopped from here directly:
the request is a flag the worker honours between two search steps.
"""

from __future__ import annotations

from optimizer.events import events_after
from optimizer.services.access import (
    RUN_SCOPES,
    can_launch_runs,
    can_write_run,
    find_runs,
    get_run_for_user,
    run_scope,
    visible_runs,
)
from optimizer.services.defaults import RUN_SEARCH_DEFAULTS
from optimizer.services.estimates import ASSUMED_TOKENS_PER_CALL, estimate_llm_cost, max_agent_calls
from optimizer.services.launch import (
    check_budget,
    check_current_generation,
    check_public_start,
    create_run,
    launchable_problems,
    llm_unavailable,
    own_kernels,
    parse_budget,
    runs_in_flight,
)
from optimizer.services.lifecycle import cancel_run, continue_refusal, continue_run, pause_run, resume_run
from optimizer.services.reads import (
    EvaluationSavings,
    RunLesson,
    chart_points,
    current_beam,
    evaluation_savings,
    evaluation_versions,
    event_page,
    get_candidate,
    get_run_kernel,
    get_run_with_kernels,
    iteration_plans,
    lineage,
    run_lineage,
    run_memory,
    run_queue,
)

__all__ = [
    "ASSUMED_TOKENS_PER_CALL", "RUN_SCOPES", "RUN_SEARCH_DEFAULTS",
    "can_launch_runs", "can_write_run", "find_runs", "get_run_for_user", "run_scope", "visible_runs",
    "check_budget", "check_current_generation", "check_public_start", "create_run", "launchable_problems", "llm_unavailable", "own_kernels", "parse_budget",
    "runs_in_flight",
    "cancel_run", "continue_refusal", "continue_run", "pause_run", "resume_run",
    "EvaluationSavings", "evaluation_savings", "chart_points", "current_beam", "evaluation_versions", "event_page", "get_candidate", "get_run_kernel",
    "get_run_with_kernels", "iteration_plans", "lineage", "run_lineage", "run_memory", "RunLesson", "run_queue",
    "estimate_llm_cost", "max_agent_calls", "events_after",
]
