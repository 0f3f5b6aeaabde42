"""Trainium performance model: a trace from the simulator in, a latency and neuron-profile counters out.

Pure Python + numpy, no Django. `estimate(trace, platform)` replays the trace as a schedule on one
NeuronCore (schedule.py) with per-instruction costs from the ISA reference (costs.py), dependencies through
tensor regions (deps.py) and SBUF spills, and returns a `PerfReport`. Bump PERF_MODEL_VERSION whenever a
change alters what the model predicts: every stored result carries it.
"""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from engine.platforms.nki.hardware import NeuronCoreSpec, get_core_spec
from engine.platforms.nki.perf.costs import instruction_costs
from engine.platforms.nki.perf.deps import Dependencies, sequential_barriers
from engine.platforms.nki.perf.explain import Breakdown, explain_schedule
from engine.platforms.nki.perf.interchange import sequential_major_order
from engine.platforms.nki.perf.lowering import lower_partition_broadcasts, statement_weight
from engine.platforms.nki.perf.profile import COUNTER_NAMES, counters, timeline
from engine.platforms.nki.perf.schedule import replay
from engine.platforms.nki.perf.schedule_timed import replay_time_ordered
from engine.platforms.nki.perf.spills import outer_fits, pipeline_depth, plan_spills
from engine.platforms.nki.perf.valnum import numbered_dependencies
from engine.platforms.nki.simulator.trace import Engine, Trace

# perf-2: calibrated on the 14 trn1 NKIBench baselines. perf-3 (issue 19): DMA engine time by access pattern
# (bytes per buffer, strided/transposed runs, narrow DMAs), repeated loads kept only when the whole input fits
# SBUF, the documented DMA latency; refit.
# perf-4 (issue 19): the SBUF working set in the compiler's pipelined order (affine_range iterations side by
# side), a kept copy of a repeated load counted once, Scalar and GpSimd at their own 1.4 GHz clock, PSUM reads
# on the Scalar Engine; refit (engine_dispatch_cycles 64 -> 32, dma_efficiency 1.0 -> 1.15).
# perf-5 (issue 19): DMA bandwidth booked in time order (schedule_timed.py), each DMA on the in-order queue of
# the engine that triggers it, queues in the compiler's software-pipelined order; constants unchanged.
# perf-6 (issue 19): a repeated load is one load statement run again (two statements loading one region are two
# DMAs, deps._repeated_loads); the partition-broadcast lowering (lowering.py) is built but off.
# perf-7 (issue 19): partition broadcasts lowered as the compiler does (a Tensor Engine matmul into PSUM per 512
# columns, a Scalar copy above one bank: lowering.py), the spill planner's gaps counted in the kernel's own
# statements, and the pipeline only as deep as SBUF holds (spills.pipeline_depth); constants unchanged.
# perf-8, perf-9 (issue 19): docs/benchmarks.md, "Where the model stands". perf-10 (issue 19): a sequential_range
# loop holding loop-invariant work runs outermost (interchange.sequential_major_order: lora's transposed input made
# once per K chunk and kept), and a spill transfer costed as a DMA of its shape (one descriptor per partition row it
# spans: spill_descriptors_per_row); constants unchanged.
# perf-11 (issue 35): labels that stand for one instruction cost the same (semantics/ops.py): nl.sum, max, min,
# prod, all, any are tensor_reduce on the device and, like it, are not floored at MIN_II; the 14 baselines' predictions
# did not move.
# perf-12 (issue 38): one model for every kernel. A partition broadcast one PSUM bank wide is read from PSUM in
# every kernel (up to perf-10 only in the pairs the NKI tutorials measured: pairs.SOURCE_SPECS, gone); the
# mechanisms that were off on every platform and the constants fitted to 0 are removed (predictions unchanged by
# those); constants unchanged.
# perf-13 (issue 35): a binary costs the same whichever label it carries (tensor_tensor or its ALU op, the kernel's
# choice): on two SBUF tiles the ISA's 2 cycles per element (`nl_binary_cycles_per_elem`, 1.2 for the nl labels, is
# gone), with its other operand broadcast along the free axis ([P, 1]) one, as the tensor_scalar it is.
PERF_MODEL_VERSION = "perf-13"

__all__ = ["PERF_MODEL_VERSION", "COUNTER_NAMES", "Breakdown", "PerfReport", "PreparedTrace", "estimate", "lowered",
           "prepare"]


@dataclass(frozen=True)
class PerfReport:
    latency_ms: float
    profile: dict[str, float]
    timeline: dict[str, list[tuple[float, float]]] = field(repr=False)
    version: str = PERF_MODEL_VERSION
    platform: str = "trn1"
    breakdown: Breakdown | None = field(default=None, repr=False)  # where the time goes (explain.py)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["timeline"] = {k: [list(iv) for iv in v] for k, v in self.timeline.items()}
        d["breakdown"] = self.breakdown.to_dict() if self.breakdown is not None else None
        return d


@dataclass(frozen=True)
class PreparedTrace:
    """The platform-independent part of a replay (dependencies, barriers), reusable across platforms/fits."""

    trace: Trace
    deps: Dependencies
    barriers: np.ndarray


def prepare(trace: Trace) -> PreparedTrace:
    trace.freeze()
    return PreparedTrace(trace, numbered_dependencies(trace), sequential_barriers(trace))


_LOWERED: dict[tuple[int, int], PreparedTrace] = {}


def lowered(prepared: PreparedTrace, psum_bank_bytes: int) -> PreparedTrace:
    """The prepared trace with the compiler's partition-broadcast matmuls made explicit (lowering.py), kept for
    as long as `prepared` lives (a fit replays one trace under many constant sets)."""
    key = (id(prepared), psum_bank_bytes)
    hit = _LOWERED.get(key)
    if hit is None:
        trace = lower_partition_broadcasts(prepared.trace, psum_bank_bytes)
        hit = prepared if trace is prepared.trace else PreparedTrace(trace, numbered_dependencies(trace),
                                                                     sequential_barriers(trace))
        _LOWERED[key] = hit
        weakref.finalize(prepared, _LOWERED.pop, key, None)
    return hit


def estimate(trace: Trace | PreparedTrace, platform: str | NeuronCoreSpec = "trn1", *,
             breakdown: bool = True) -> PerfReport:
    """Predicted latency and profile of one kernel run, from the simulator's instruction trace.
    `breakdown=False` skips explaining where the time goes (a fit that needs the latency only)."""
    p = platform if isinstance(platform, NeuronCoreSpec) else get_core_spec(platform)
    prepared = trace if isinstance(trace, PreparedTrace) else prepare(trace)
    weight = None
    if p.partition_broadcast_matmul:
        original_tensors = len(prepared.trace.tensors)
        prepared = lowered(prepared, p.psum_bank_bytes_per_partition)
        weight = statement_weight(prepared.trace, original_tensors)
    trace, deps = prepared.trace, prepared.deps
    costs = instruction_costs(trace, p)
    use = deps.sbuf if p.value_numbering or deps.sbuf.plain is None else deps.sbuf.plain
    if p.sequential_outermost and use.sequential_major is not None:
        use = use.sequential_major  # products bounded per sequential iteration (valnum.py)
    if not p.loop_fusion and use.fused is not None:
        use = replace(use, fused=None)
    if p.sequential_outermost and len(use.vn_elided) == len(trace):
        # A sequential loop that repeats loop-invariant work across the affine loop around it runs outermost, the
        # product kept per sequential iteration (interchange.sequential_major_order).
        swapped = sequential_major_order(trace, use.vn_elided, use.fused)
        if swapped is not None:
            use = replace(use, fused=swapped)
    if len(use.vn_elided) == len(trace) and use.vn_elided.any():
        # Loop-invariant computation runs once (valnum.py): no engine time, nor in the Vector/Scalar balance.
        costs = replace(costs, seconds=np.where(use.vn_elided, 0.0, costs.seconds), scalar_seconds=np.where(
            use.vn_elided, 0.0, costs.scalar_seconds) if len(costs.scalar_seconds) else costs.scalar_seconds)
    capacity = p.sbuf_bytes_per_partition * p.sbuf_usable_fraction
    outer = p.affine_outer_pipeline
    depth = pipeline_depth(use, len(trace), capacity, p.partitions, p.affine_interleave, p.affine_interleave_unfit,
                           outer=outer)
    over_kept = False
    if outer and p.affine_outer_over_kept_copies:
        # Pipelined past the kept copies only where they alone stood in the way (spills.pipeline_depth).
        deeper = pipeline_depth(use, len(trace), capacity, p.partitions, p.affine_interleave,
                                p.affine_interleave_unfit, outer=True, outer_over_kept=True)
        over_kept, depth = deeper != depth, deeper
        if not over_kept and depth > 1 and not outer_fits(use, len(trace), capacity, p.partitions, depth):
            # Where even the inner loops overflow SBUF, no next iteration is fetched ahead ([STREAM]: a slot each).
            outer, p = False, replace(p, affine_outer_pipeline=False)
            depth = pipeline_depth(use, len(trace), capacity, p.partitions, p.affine_interleave,
                                   p.affine_interleave_unfit)
    spills = plan_spills(use, len(trace), capacity, p.partitions, depth, weight=weight, outer=outer,
                         keep_prefetch=over_kept)
    if depth != p.affine_interleave:
        p = replace(p, affine_interleave=depth)
    # DMA bandwidth booked in time order (schedule_timed) or in program order (schedule, perf-4).
    replay_fn = replay_time_ordered if p.dma_time_order and len(trace) else replay
    sched = replay_fn(trace, p, costs, deps, prepared.barriers, spills)
    ran = sched.end_s - sched.start_s  # a flexible op's duration on the engine it ran on
    busy = {int(e): float(ran[sched.engine == e].sum()) for e in (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)}
    profile = counters(trace, p, spills, sched.latency_s, busy)
    return PerfReport(
        latency_ms=sched.latency_s * 1e3,
        profile=profile,
        timeline=timeline(sched.engine, sched.start_s, sched.end_s),
        platform=p.name,
        breakdown=explain_schedule(trace, p, deps, spills, sched) if breakdown else None,
    )
