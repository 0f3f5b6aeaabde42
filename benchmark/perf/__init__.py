"""Trainium performance model: a trace from the simulator in, a latency and neuron-profile counters out.

Pure Python + numpy, no Django. `estimate(trace, platform)` replays the trace as a schedule on one
NeuronCore (schedule.py) with per-instruction costs from the ISA reference (costs.py), dependencies through
tensor regions (deps.py) and SBUF spills, and returns a `PerfReport`. Bump PERF_MODEL_VERSION whenever a
change alters what the model predicts: every stored result carries it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from benchmark.hardware import get_platform
from benchmark.nki.trace import Engine, Trace
from benchmark.perf.costs import instruction_costs
from benchmark.perf.deps import build_dependencies, sequential_barriers, spill_bytes
from benchmark.perf.profile import COUNTER_NAMES, counters, timeline
from benchmark.perf.schedule import replay

PERF_MODEL_VERSION = "perf-1"

__all__ = ["PERF_MODEL_VERSION", "COUNTER_NAMES", "PerfReport", "estimate"]


@dataclass(frozen=True)
class PerfReport:
    latency_ms: float
    profile: dict[str, float]
    timeline: dict[str, list[tuple[float, float]]] = field(repr=False)
    version: str = PERF_MODEL_VERSION
    platform: str = "trn1"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["timeline"] = {k: [list(iv) for iv in v] for k, v in self.timeline.items()}
        return d


def estimate(trace: Trace, platform: str = "trn1") -> PerfReport:
    """Predicted latency and profile of one kernel run, from the simulator's instruction trace."""
    p = get_platform(platform)
    trace.freeze()
    costs = instruction_costs(trace, p)
    deps = build_dependencies(trace)
    spills = spill_bytes(deps.sbuf_live_bytes, p.sbuf_bytes_per_partition, p.partitions)
    barriers = sequential_barriers(trace)
    sched = replay(trace, p, costs, deps, barriers, spills)
    engine = np.asarray(trace.columns["engine"])
    busy = {int(e): float(costs.seconds[engine == e].sum()) for e in (Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD)}
    profile = counters(trace, p, float(spills.sum()), sched.latency_s, busy)
    return PerfReport(
        latency_ms=sched.latency_s * 1e3,
        profile=profile,
        timeline=timeline(trace, sched.start_s, sched.end_s),
        platform=p.name,
    )
