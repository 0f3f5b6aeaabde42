"""The state of one run: everything a resumed run needs, JSON-ready through `RunState.to_dict/from_dict`.

Pure Python: no Django. A checkpoint is `RunState.to_dict()`, stamped with `STATE_VERSION`; a state of
another version is refused rather than half-read. Kernels are keyed by the sha256 of their source
(`source_sha`), and evaluations by that sha, so nothing evaluated and saved is evaluated again.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.search.config import SearchConfig
from engine.search.interfaces import EvaluationLike

SUSPICIOUS = "suspicious"
INFRASTRUCTURE = "infrastructure_error"  # says nothing about the kernel: never sent to the Fixer
STATE_VERSION = 1

# Run status values (the Django Run adds queued/paused/cancelled around these). STOPPED: a budget was
# reached; the run ended cleanly with everything it found (`RunState.stop` says which budget).
RUNNING, SUCCEEDED, FAILED, STOPPED = "running", "succeeded", "failed", "stopped"


@dataclass
class Evaluation:
    """The part of an evaluation result the search keeps (by kernel sha256)."""

    correct: bool
    latency_ms: float | None = None
    peak_fraction: float | None = None
    error_kind: str | None = None
    error_message: str | None = None
    profile: dict[str, float] = field(default_factory=dict)
    accepted: bool = False  # a curator accepted this result on review: the speedup bound no longer holds it
    breakdown: dict[str, Any] = field(default_factory=dict)  # where the model's time goes (the Planner reads it)

    @property
    def suspicious(self) -> bool:
        return self.error_kind == SUSPICIOUS

    @property
    def usable(self) -> bool:
        """Correct, timed and not suspicious: may enter the beam."""
        return self.correct and not self.suspicious and self.latency_ms is not None and self.latency_ms > 0

    @classmethod
    def from_result(cls, result: EvaluationLike) -> Evaluation:
        profile = getattr(result, "profile", None) or {}
        if not isinstance(profile, dict):  # a typed profile record: keep its fields
            profile = asdict(profile) if hasattr(profile, "__dataclass_fields__") else dict(vars(profile))
        numeric = {k: float(v) for k, v in profile.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        kind = getattr(result, "error_kind", None)
        breakdown = getattr(result, "breakdown", None)  # the performance model's; none for measured results
        return cls(
            correct=bool(result.correct),
            latency_ms=None if result.latency_ms is None else float(result.latency_ms),
            peak_fraction=None if getattr(result, "peak_fraction", None) is None else float(result.peak_fraction),
            error_kind=str(getattr(kind, "value", kind)) if kind else None,  # an ErrorKind enum becomes its code
            error_message=getattr(result, "error_message", None) or None,
            profile=numeric,
            accepted=bool(getattr(result, "review_accepted", False)),
            breakdown=dict(breakdown) if isinstance(breakdown, dict) else {},
        )


@dataclass
class BeamMember:
    sha: str
    latency_ms: float | None  # None: correct, unmeasured (a correctness-only run; see unmeasured.py)
    origin: str  # "start" or the key of the candidate that produced it
    correct: bool = True  # False only for a failing starting kernel of a correctness-only run


@dataclass
class PlanRecord:
    key: str  # "<iteration>.<beam index>.<plan index>"
    parent_sha: str
    text: str


@dataclass
class CandidateRecord:
    key: str  # "<plan key>.<sample>"
    plan_key: str
    parent_sha: str
    attempts: list[str] = field(default_factory=list)  # sha of the written source, then each fix
    unusable: str = ""  # why the Executor produced nothing
    fixes: int = 0  # Fixer calls made (successful or not)
    speedup: float | None = None  # parent latency / own latency, when correct
    chosen: bool = False  # entered the next beam

    @property
    def sha(self) -> str | None:
        return self.attempts[-1] if self.attempts else None


@dataclass
class RewriteRecord:
    candidate_key: str
    polarity: str
    speedup: float  # candidate speedup over its parent (< 1 for negative rewrites; 1.0 for a failed one)
    slow_sha: str
    fast_sha: str
    failure: str = ""  # a rewrite that failed its check (correctness-only runs): its error kind and message


@dataclass
class Totals:
    calls: int = 0
    failed_calls: int = 0
    unusable_replies: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0  # over the calls whose cost is known
    evaluations: int = 0
    unpriced_calls: int = 0  # calls whose cost is unknown: cost_usd is then a lower bound
    wall_time_s: float = 0.0  # time spent in steps (queued and paused time excluded): the wall-time budget
    # Evaluations not spent (engine.search.cascade), for the run page. `repeated`: written sources this run
    # had already evaluated or was evaluating; `cached`: answered by a stored result of the same source,
    # `normalized`: of an identical one (comments and spacing aside); `mini_stopped`: failed on the mini
    # shapes, no full-size evaluation; `mini_passed`: correct there, then evaluated at full size.
    repeated: int = 0
    cached: int = 0
    normalized: int = 0
    mini_stopped: int = 0
    mini_passed: int = 0


@dataclass
class RunState:
    config: SearchConfig
    start_sha: str
    kernels: dict[str, str]  # sha256 -> source
    run_key: str = ""  # names the run in memory keys and provenance (the Django Run id)
    status: str = RUNNING
    phase: str = "start"  # start, plan, write, evaluate, fix, select, summarize, next
    iteration: int = 0  # 0 until the first iteration starts
    beam: list[BeamMember] = field(default_factory=list)
    evaluations: dict[str, Evaluation] = field(default_factory=dict)
    plans: list[PlanRecord] = field(default_factory=list)  # current iteration only
    candidates: list[CandidateRecord] = field(default_factory=list)  # current iteration only
    rewrites: list[RewriteRecord] = field(default_factory=list)  # current iteration only
    done: list[str] = field(default_factory=list)  # finished task keys of the current iteration
    history: list[dict[str, Any]] = field(default_factory=list)  # one summary per finished iteration
    totals: Totals = field(default_factory=Totals)
    infrastructure_retries: dict[str, int] = field(default_factory=dict)  # sha -> evaluations redone
    error: str = ""
    stop: dict[str, Any] = field(default_factory=dict)  # budget.BudgetReached.to_dict() of a stopped run

    # -- derived --------------------------------------------------------------------------------------
    @property
    def start_latency_ms(self) -> float | None:
        ev = self.evaluations.get(self.start_sha)
        return ev.latency_ms if ev else None

    @property
    def best(self) -> BeamMember | None:
        """The fastest correct member; in a correctness-only run, the first correct one (unmeasured)."""
        return min((m for m in self.beam if m.correct), default=None,
                   key=lambda m: (m.latency_ms is None, m.latency_ms or 0.0))

    @property
    def best_speedup(self) -> float | None:
        best, start = self.best, self.start_latency_ms
        return start / best.latency_ms if best and best.latency_ms and start else None

    @property
    def finished(self) -> bool:
        return self.status in (SUCCEEDED, FAILED, STOPPED)

    # -- serialization --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["version"] = STATE_VERSION
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunState:
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"run state version {data.get('version')!r} is not {STATE_VERSION}")
        return cls(
            config=SearchConfig.from_dict(data["config"]),
            start_sha=data["start_sha"],
            kernels=dict(data["kernels"]),
            run_key=data.get("run_key", ""),
            status=data["status"],
            phase=data["phase"],
            iteration=data["iteration"],
            beam=[BeamMember(**m) for m in data["beam"]],
            evaluations={k: Evaluation(**v) for k, v in data["evaluations"].items()},
            plans=[PlanRecord(**p) for p in data["plans"]],
            candidates=[CandidateRecord(**c) for c in data["candidates"]],
            rewrites=[RewriteRecord(**r) for r in data["rewrites"]],
            done=list(data["done"]),
            history=list(data["history"]),
            totals=Totals(**data["totals"]),
            infrastructure_retries=dict(data.get("infrastructure_retries", {})),
            error=data.get("error", ""),
            stop=dict(data.get("stop") or {}),
        )


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()



# Phases in which a budget stop chose a final beam from the iteration's candidates (BeamSearch._stop_for_budget).
_MID_ITERATION = ("plan", "write", "evaluate", "fix", "select")


def reopen_stopped(data: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint of a run stopped by a budget, turned back into a running one that goes on where it stopped:
    the phase it was in and the beam it had (the stop's final selection undone), the stopped iteration's
    summary withdrawn (it is written again when the iteration really ends). Everything else stays: kernels,
    evaluations by sha (so nothing is evaluated twice), plans, candidates and the totals the budget counts.

    Works on `RunState.to_dict()` and on a stored checkpoint alike (it touches only the keys named here).
    A checkpoint stopped before the stop recorded where it was (no "resume") goes on with the next iteration."""
    if data.get("status") != STOPPED:
        raise ValueError(f"the run is {data.get('status')!r}, not stopped by a budget")
    state = dict(data)
    stop = dict(state.get("stop") or {})
    resume = stop.get("resume")
    iteration = int(state.get("iteration", 0))
    history = list(state.get("history") or [])
    if history and history[-1].get("iteration") == iteration and "stopped" in history[-1]:
        history.pop()
    if resume:
        state["phase"] = resume["phase"]
        state["beam"] = list(resume["beam"])
    else:
        # No record of where it stopped: the iteration ends (its final beam kept, no lessons drawn) and the
        # search starts the next one, or starts from the beginning if it had not started an iteration.
        state["phase"] = "next" if iteration >= 1 else "start"
        state["rewrites"] = []
    state.update(status=RUNNING, stop={}, history=history, error="")
    return state


def stopped_mid_iteration(data: dict[str, Any]) -> bool:
    """Whether a checkpoint reopened by `reopen_stopped` goes on inside an iteration whose beam is not chosen yet."""
    return int(data.get("iteration", 0)) >= 1 and data.get("phase") in _MID_ITERATION
