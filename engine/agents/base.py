"""What the search hands to the four agent roles and what they hand back. Pure Python, no Django.

Every role is an async method taking one request record and returning an `AgentResult`:

* Planner   `plan(PlanRequest) -> AgentResult[list[str]]`      up to `request.count` plans (plain text)
* Executor  `write(WriteRequest) -> AgentResult[str]`          a complete kernel source implementing a plan
* Fixer     `fix(FixRequest) -> AgentResult[str]`              a repaired kernel source
* Summarizer `summarize(SummaryRequest) -> AgentResult[MemoryDraft]`  a memory entry for a slow/fast pair

An agent never raises for a bad reply or a failed call: it returns `value=None` with `unusable` saying
why, and the `calls` it made (one `CallRecord` per model request, successful or not), which the caller
stores as `AgentCall` rows. Requests carry a `seed` derived from the run seed and the task's key, so a
deterministic agent (the offline one, or a model served with a fixed seed) answers the same way on resume.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

ROLES = ("planner", "executor", "fixer", "summarizer")
POSITIVE = "positive"  # the rewrite made the kernel faster
NEGATIVE = "negative"  # the rewrite made it slower: a lesson about what not to do


@dataclass(frozen=True)
class ProblemContext:
    """The problem a run optimizes, as the agents see it."""

    slug: str
    reference_source: str  # NKIBench reference: get_inputs / forward / transform_* functions
    platform: str = "trn1"
    family: str = ""
    description: str = ""
    hardware_rules: str = ""  # extra platform rules; the prompts already state the common ones
    # A Triton solution's entry file (what every candidate rewrites) and its other files as (path, text): the
    # Planner, Executor and Fixer see them read-only, since a rewrite keeps them as they are.
    entry_file: str = ""
    helper_files: tuple[tuple[str, str], ...] = ()
    # NKI: "current" when the run returns kernels in the current generation (NKI 0.6, the nki package) even from
    # a legacy neuronxcc.nki start; "" keeps each kernel's own generation.
    target_generation: str = ""


@dataclass(frozen=True)
class KernelView:
    """A kernel with what we know about its speed."""

    source: str
    latency_ms: float | None = None
    peak_fraction: float | None = None
    profile: dict[str, float] = field(default_factory=dict)
    # Set only for a failing start kernel of a correctness-only run: its error kind and message.
    failure: str = ""
    # Where the performance model's time goes (engine.platforms.nki.perf.explain.Breakdown.to_dict()); NKI only.
    breakdown: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryItem:
    """One optimization-memory entry, as shown to the Planner (and stored by the OptimizationMemory)."""

    key: str  # stable identity: adding the same key twice must not duplicate the entry
    title: str
    summary: str
    polarity: str = POSITIVE
    speedup: float = 1.0  # always >= 1: how much faster the fast kernel is than the slow one
    slow_kernel: str = ""
    fast_kernel: str = ""
    problem: str = ""
    family: str = ""
    provenance: dict[str, object] = field(default_factory=dict)
    pinned: bool = False
    # What engine.memory.selection ranks by: the kernel-language calls of the pair's kernels, what bounded the kernel
    # the rewrite was applied to (engine.memory.lessons.profile_bottleneck), and how many times it was learned.
    operations: tuple[str, ...] = ()
    bottleneck: str = ""
    evidence: int = 1

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> MemoryItem:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})  # type: ignore[arg-type]


@dataclass(frozen=True)
class PlanRequest:
    problem: ProblemContext
    kernel: KernelView
    memory: tuple[MemoryItem, ...]
    count: int
    seed: int
    key: str = ""  # the task key, for the audit trail


@dataclass(frozen=True)
class WriteRequest:
    problem: ProblemContext
    kernel: KernelView
    plan: str
    memory: tuple[MemoryItem, ...]
    seed: int
    sample: int = 0
    key: str = ""


@dataclass(frozen=True)
class FixRequest:
    problem: ProblemContext
    kernel: KernelView  # the parent kernel, known to be correct
    plan: str
    failing_source: str
    error_kind: str
    error_message: str
    attempt: int
    seed: int
    key: str = ""


@dataclass(frozen=True)
class SummaryRequest:
    problem: ProblemContext
    slow_source: str
    fast_source: str
    speedup: float  # >= 1
    polarity: str  # POSITIVE: the planned rewrite is the fast side; NEGATIVE: it is the slow side
    plan: str
    seed: int
    key: str = ""
    # A rewrite that failed its check (NEGATIVE; `speedup` is then 1.0, not a measurement): the error kind and
    # message of the failed kernel, which is the slow side. Empty for a measured speedup or slowdown.
    failure: str = ""


@dataclass(frozen=True)
class MemoryDraft:
    title: str
    summary: str


@dataclass
class CallRecord:
    """One request to a model (or one offline decision), shaped like an `AgentCall` row."""

    role: str
    model: str
    prompt: list[dict[str, str]]  # the chat messages sent
    response: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    # None when the cost is unknown (the server reported no token usage, or the model has no price): never
    # counted as $0. The offline agent's decisions cost 0.0.
    cost_usd: float | None = 0.0
    reasoning: str = ""  # the model's reasoning, when the server returns it apart from the answer
    error: str = ""  # empty when the call succeeded
    attempts: int = 1  # 1 + retries
    finish_reason: str = ""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["total_tokens"] = self.total_tokens
        return data


@dataclass
class AgentResult(Generic[T]):
    value: T | None
    calls: list[CallRecord] = field(default_factory=list)
    unusable: str = ""  # why `value` is None (empty when it is set)

    @property
    def ok(self) -> bool:
        return self.value is not None
