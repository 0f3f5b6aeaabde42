"""What the evaluation service hands an executor for a Triton kernel: the solution, its definition and the
workloads it is judged on, as one picklable request (`TritonEvaluationRequest`, with `run()` and `key` like
`EvaluationRequest`), and how one result comes from several workloads.

`triton.pipeline.evaluate_triton` evaluates one workload in the sandbox. Which workloads: the cuda backend
checks and times every workload. The Triton interpreter is slow (a Python loop over the kernel's programs)
and reports no latency, so it checks correctness on the smallest workload and then, smallest first, up to
INTERPRETER_WORKLOADS in all while their bytes stay within INTERPRETER_BYTES: a kernel wrong only at a
larger shape (a partial tail block, a second row block) is caught wherever such a shape is small enough. The kernel's result is its first failing workload's (named in the
message), else correct with, on cuda, the mean latency over the workloads and the mean roofline floor
against it; each workload's numbers stay in `profile["workloads"]`.

Pure Python (no Django): Ray workers and the measurement scripts import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.evaluator.executors import evaluation_key, source_digest
from engine.evaluator.result import STATUS_OK, EvaluationResult
from engine.evaluator.sandbox.process import Limits
from engine.platforms.registry import Backend

# The interpreter's workloads: the smallest always, then the next smallest while, together, the chosen ones
# are at most INTERPRETER_WORKLOADS and their tensors (inputs and outputs: `workload_size`) at most
# INTERPRETER_BYTES. 4 MiB is a few seconds per workload for an elementwise kernel on the interpreter.
INTERPRETER_WORKLOADS = 4
INTERPRETER_BYTES = 4 * 1024 * 1024


def workload_size(definition: Any, workload: Any) -> int:
    """Bytes of a workload's tensors (inputs and outputs) at its axis values: how large it is to run."""
    from engine.platforms.triton.flashinfer import DTYPE_BYTES

    axes = definition.axis_values(workload)
    size = 0
    for spec in [*definition.inputs.values(), *definition.outputs.values()]:
        elements = 1
        for axis in spec.shape or ():
            elements *= axes[axis]
        size += elements * DTYPE_BYTES[spec.dtype] if spec.shape is not None else 0
    return size


def chosen_workloads(definition: Mapping[str, Any], workloads: Sequence[Mapping[str, Any]], backend: str, *,
                     count: int = INTERPRETER_WORKLOADS, budget: int = INTERPRETER_BYTES) -> list[Mapping[str, Any]]:
    """The workloads a backend judges a kernel on: all (in order) on cuda; on the interpreter the smallest,
    then the next smallest while at most `count` of them total at most `budget` bytes."""
    if backend == Backend.CUDA.value:
        return list(workloads)
    from engine.platforms.triton.flashinfer import parse_definition, parse_workload

    parsed = parse_definition(definition)
    ranked = sorted((workload_size(parsed, parse_workload(w)), i) for i, w in enumerate(workloads))
    chosen, used = [], 0
    for size, index in ranked:
        if chosen and (len(chosen) >= count or used + size > budget):
            break
        chosen.append(workloads[index])
        used += size
    return chosen


def _uuid(workload: Mapping[str, Any]) -> str:
    inner = workload.get("workload", workload)
    return str(inner.get("uuid", "")) if isinstance(inner, Mapping) else ""


def combine(results: Sequence[tuple[str, EvaluationResult]]) -> EvaluationResult:
    """One result from each workload's (all correct so far, or the last one failed)."""
    uuid, last = results[-1]
    if not last.ok:
        message = f"workload {uuid}: {last.error_message}" if len(results) > 1 or uuid else last.error_message
        return replace(last, error_message=message)
    per_workload = [
        {"uuid": u, "latency_ms": r.latency_ms, "peak_fraction": r.peak_fraction, "floor_ms": r.theoretical_peak_ms,
         "spread": r.profile.get("spread")}
        for u, r in results
    ]
    errors = tuple(row for _, r in results for row in r.relative_l2_errors)
    latencies = [r.latency_ms for _, r in results]
    floors = [r.theoretical_peak_ms for _, r in results]
    latency = sum(latencies) / len(latencies) if all(v is not None for v in latencies) else None
    floor = sum(floors) / len(floors) if latency is not None and all(v is not None for v in floors) else None
    profile = {**last.profile, "workloads": per_workload}
    return replace(last, status=STATUS_OK, relative_l2_errors=errors, latency_ms=latency, theoretical_peak_ms=floor,
                   peak_fraction=floor / latency if floor and latency else None, profile=profile,
                   wall_time_s=round(sum(r.wall_time_s for _, r in results), 4),
                   attempts=sum(r.attempts for _, r in results))


@dataclass(frozen=True)
class TritonEvaluationRequest:
    """One Triton kernel (a FlashInfer-Bench solution) against its definition's workloads on one backend."""

    solution: Mapping[str, Any]
    definition: Mapping[str, Any]
    workloads: tuple[Mapping[str, Any], ...]
    platform: str
    backend: str = Backend.TRITON_INTERPRETER.value
    seeds: Sequence[int] | None = None
    limits: Limits = field(default_factory=Limits)

    @property
    def key(self) -> str:
        sources = "\n".join(str(s.get("content", "")) for s in self.solution.get("sources", ()))
        return evaluation_key(source_digest(sources), source_digest(repr(self.definition)), self.platform,
                              self.backend)

    def run(self) -> EvaluationResult:
        from engine.platforms.triton.pipeline import evaluate_triton

        if not self.workloads:
            raise ValueError(f"definition {self.definition.get('name')!r} has no workloads to evaluate on")
        results: list[tuple[str, EvaluationResult]] = []
        for workload in chosen_workloads(self.definition, self.workloads, self.backend):
            result = evaluate_triton(self.solution, self.definition, workload, platform=self.platform,
                                     backend=self.backend, seeds=self.seeds, limits=self.limits)
            results.append((_uuid(workload), result))
            if not result.ok:
                break
        return combine(results)
