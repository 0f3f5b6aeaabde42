"""The AccelOpt beam search, written against injected interfaces. Pure Python: no Django, no network.

Driving a run: `search = await BeamSearch.open(...)`, then `while await search.step(): ...` (the worker
checks cancel/pause between steps), or `await search.run()`.

Read the package in this order:

    config.py      SearchConfig, the search parameters
    interfaces.py  what the search is given: Agents, Evaluator, OptimizationMemory, EventSink,
                   CheckpointStore (protocols), and the EVENT_KINDS it emits
    state.py       RunState and its records, JSON-ready (STATE_VERSION), the run status values, source_sha
    budget.py      Budget (max tokens, dollars, wall time, evaluations), Usage, the checker campaigns reuse
    beam.py        BeamSearch: open, step, run, one method per phase (plan, write, evaluate, fix, select,
                   summarize, next)
    standalone.py  the interfaces without Django (tests, measurements/offline_search_mini.py)

Everything a caller needs is importable from `engine.search`; `optimizer.adapters` implements the
interfaces over Django.
"""

from engine.search.beam import BeamSearch, derive_seed
from engine.search.budget import BUDGET_FIELDS, Budget, BudgetReached, Usage
from engine.search.config import SearchConfig
from engine.search.interfaces import (
    EVENT_KINDS,
    Agents,
    CheckpointStore,
    EvaluationLike,
    Evaluator,
    EventSink,
    OptimizationMemory,
)
from engine.search.standalone import (
    InMemoryCheckpoint,
    JsonFileCheckpoint,
    ListEventSink,
    ListOptimizationMemory,
    PipelineEvaluator,
)
from engine.search.state import FAILED, RUNNING, STATE_VERSION, STOPPED, SUCCEEDED, RunState, source_sha

__all__ = [
    "BUDGET_FIELDS",
    "Budget",
    "BudgetReached",
    "Usage",
    "EVENT_KINDS",
    "FAILED",
    "RUNNING",
    "STATE_VERSION",
    "STOPPED",
    "SUCCEEDED",
    "Agents",
    "BeamSearch",
    "CheckpointStore",
    "EvaluationLike",
    "Evaluator",
    "EventSink",
    "InMemoryCheckpoint",
    "JsonFileCheckpoint",
    "ListEventSink",
    "ListOptimizationMemory",
    "OptimizationMemory",
    "PipelineEvaluator",
    "RunState",
    "SearchConfig",
    "derive_seed",
    "source_sha",
]
