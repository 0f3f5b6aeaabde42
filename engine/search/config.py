"""The search parameters of one run. Pure Python: no Django."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

BEAM = "beam"
REPEATED_SAMPLING = "repeated_sampling"
# The paper's central comparison: beam search against the same budget spent on independent samples from
# the start kernel (each iteration expands the start kernel as many times as beam search would expand its
# beam; the best kernels found are kept, but never planned from).
STRATEGIES = {BEAM: "Beam search", REPEATED_SAMPLING: "Repeated sampling (from the start kernel, no beam)"}


# Which memory the Planner is shown. CURATED: the global memory, ranked for the kernel at hand
# (engine.memory.selection). ACCELOPT: as the paper's scripts build it, per problem: the rewrites this run learned
# last plus a seeded random sample of its older ones, up to memory_size.
CURATED, ACCELOPT_MEMORY = "curated", "accelopt"
MEMORY_MODES = {CURATED: "Curated global memory (ranked by relevance and evidence)",
                ACCELOPT_MEMORY: "AccelOpt-style (this run's latest rewrites + a random sample of older ones)"}


@dataclass(frozen=True)
class SearchConfig:
    """Search parameters. Defaults follow the public AccelOpt NKIBench experiment scripts."""

    iterations: int = 15
    beam_width: int = 6  # kernels kept per iteration (AccelOpt TOPK_CANDIDATES)
    plans_per_candidate: int = 12  # Planner breadth per beam kernel
    samples_per_plan: int = 2  # Executor samples per plan
    memory_size: int = 16  # entries shown to the Planner
    rewrites_per_iteration: int = 8  # memory entries written per iteration (at most half positive)
    positive_speedup: float = 1.04  # a positive rewrite must be faster than this
    negative_slowdown: float = 1.15  # a negative rewrite must be slower than this (speedup < 1/x)
    suspicious_speedup: float = 10.0  # a correct kernel this much faster than its parent is held for review
    fix_attempts: int = 1  # Fixer rounds per failing kernel (0 disables the Fixer)
    seed: int = 0
    agent_batch: int = 8  # agent calls started together in one step (execution only, not semantics)
    evaluation_batch: int = 8  # evaluations started together in one step (execution only)
    memory_mode: str = CURATED  # CURATED or ACCELOPT_MEMORY (MEMORY_MODES)
    executor_memory: bool = False  # show the memory to the Executor too (AccelOpt does not: it doubles that prompt)
    strategy: str = BEAM  # BEAM or REPEATED_SAMPLING
    # The backend measures no latency (the Triton interpreter): rank by correctness, keep kernels as "correct,
    # unmeasured", let a failing start be repaired, learn only from failed rewrites (engine.search.unmeasured).
    correctness_only: bool = False
    # Evaluate each candidate on the problem's mini shapes first and only the correct ones at full size
    # (engine.search.cascade). Off here: the launcher turns it on where the problem has mini shapes, and the
    # run's config records the choice, so a resumed run does the same.
    mini_first: bool = False

    def __post_init__(self) -> None:
        if self.memory_mode not in MEMORY_MODES:
            raise ValueError(f"SearchConfig.memory_mode must be one of {', '.join(MEMORY_MODES)}, got {self.memory_mode!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"SearchConfig.strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        for name in ("iterations", "beam_width", "plans_per_candidate", "samples_per_plan",
                     "agent_batch", "evaluation_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"SearchConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("memory_size", "rewrites_per_iteration", "fix_attempts"):
            if getattr(self, name) < 0:
                raise ValueError(f"SearchConfig.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("positive_speedup", "negative_slowdown", "suspicious_speedup"):
            if getattr(self, name) < 1.0:
                raise ValueError(f"SearchConfig.{name} must be >= 1.0, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, strict: bool = True) -> SearchConfig:
        """`strict=False` ignores keys that are not search parameters (a Run's config also names the
        platform, backend and models)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown and strict:
            raise ValueError(f"unknown search parameters {unknown}; known: {sorted(known)}")
        return cls(**{k: v for k, v in data.items() if k in known})

