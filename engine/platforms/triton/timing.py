"""Timing a callable on an NVIDIA GPU the way GPU benchmarks do it (docs/evaluation.md, "Triton: timing").

- warm-up: calls until `WARMUP_S` has passed (at least `MIN_WARMUP` calls): compilation, autotuning, caches;
- repetitions: each one flushes the L2 (writes a buffer of at least twice the L2 size, so no input is served
  from a warm cache), then records a CUDA event, calls the kernel, records another; the count is chosen so
  the timed part takes about `TARGET_S` (between `MIN_REPS` and `MAX_REPS`);
- the latency is the median of the per-call event times; the spread is (max - min) / median over the
  medians of `GROUPS` consecutive groups of repetitions (slow drift, clock changes, a neighbour), and a
  measurement spreading more than `MAX_GPU_SPREAD` is `unstable` (the caller repeats or reports it);
- the wall time around the whole timed loop (host clock, after a device synchronize) is returned too, for
  the plausibility check (`implausible_events`).
"""

from __future__ import annotations

import math
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WARMUP_S = 0.05
MIN_WARMUP = 3
TARGET_S = 0.3
MIN_REPS = 10
MAX_REPS = 200
GROUPS = 5
MAX_GPU_SPREAD = 0.05  # (max - min) / median of the group medians
# Host time a repetition may spend outside the two events: the flush is inside the loop but outside the
# events, plus Python and launch overhead. Generous, so only grossly wrong event times are refused.
LAUNCH_ALLOWANCE_S = 200e-6


@dataclass
class GpuTiming:
    median_ms: float
    spread: float
    samples_ms: list[float]
    wall_s: float  # host time around the timed loop, synchronized
    flush_ms: float  # median event time of one L2 flush (measured before the kernel's loop)
    reps: int
    stable: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"median_ms": self.median_ms, "spread": self.spread, "reps": self.reps, "stable": self.stable,
                "wall_s": self.wall_s, "flush_ms": self.flush_ms, "min_ms": min(self.samples_ms),
                "max_ms": max(self.samples_ms), **self.extra}


def group_spread(samples: list[float], groups: int = GROUPS) -> float:
    size = max(1, len(samples) // groups)
    medians = [statistics.median(samples[i:i + size]) for i in range(0, size * groups, size) if samples[i:i + size]]
    middle = statistics.median(medians)
    return (max(medians) - min(medians)) / middle if middle > 0 else math.inf


def time_cuda(fn: Callable[[], Any], *, l2_bytes: int, target_s: float = TARGET_S, max_reps: int = MAX_REPS) -> GpuTiming:
    import torch  # lazy: torch is optional (a GPU host's)

    flush = torch.empty(max(2 * l2_bytes, 1 << 20) // 4, dtype=torch.int32, device="cuda")
    start_all = time.perf_counter()
    calls = 0
    while calls < MIN_WARMUP or time.perf_counter() - start_all < WARMUP_S:
        fn()
        calls += 1
        torch.cuda.synchronize()
    # One flush's time and the kernel's rough time decide the repetition count.
    probe = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    probe[0].record()
    flush.zero_()
    probe[1].record()
    fn()
    probe[2].record()
    torch.cuda.synchronize()
    flush_ms = probe[0].elapsed_time(probe[1])
    estimate_ms = max(probe[1].elapsed_time(probe[2]), 1e-3)
    reps = int(min(max_reps, max(MIN_REPS, target_s * 1e3 / (estimate_ms + flush_ms))))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    torch.cuda.synchronize()
    wall0 = time.perf_counter()
    for i in range(reps):
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    wall = time.perf_counter() - wall0
    samples = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=False)]
    spread = group_spread(samples)
    return GpuTiming(median_ms=statistics.median(samples), spread=spread, samples_ms=samples, wall_s=wall,
                     flush_ms=flush_ms, reps=reps, stable=spread <= MAX_GPU_SPREAD)


# Seen from outside the kernel's process, the measure request also holds the warm-up (>= WARMUP_S), the
# probe and the reply: this much of it is not counted against the events.
OUTSIDE_SLACK_S = 0.5


def implausible_events(timing: GpuTiming, outside_wall_s: float | None = None) -> str:
    """Why the event times cannot be true, or "".

    Inside (`outside_wall_s` None): the events add up to more than the wall time around the loop (impossible),
    or to less than half of it after allowing each repetition its flush and `LAUNCH_ALLOWANCE_S`.
    Outside: the same lower bound against the time the parent saw the request take, less `OUTSIDE_SLACK_S`;
    it needs no number from the kernel's process, but only catches a loop that really took over ~1 s.
    Only gross misreports are caught: up to the allowance per call goes unnoticed."""
    events_s = sum(timing.samples_ms) / 1e3
    allowance = timing.reps * (timing.flush_ms / 1e3 * 1.5 + LAUNCH_ALLOWANCE_S)
    if outside_wall_s is None:
        wall = timing.wall_s
        if events_s > wall * 1.05 + 1e-3:
            return f"the event times add up to {events_s:.4f} s, more than the {wall:.4f} s that passed"
        where = "the timed loop took"
    else:
        wall = max(outside_wall_s - OUTSIDE_SLACK_S, 0.0)
        where = "seen from outside the kernel's process, the timing took at least"
    if events_s + allowance < wall * 0.5:
        return (f"the event times add up to {events_s * 1e3:.3f} ms but {where} {wall * 1e3:.3f} ms "
                f"({timing.reps} calls, {allowance * 1e3:.3f} ms allowed for flushes and launches)")
    return ""


def gpu_environment() -> dict[str, Any]:
    """The GPU's model, SM count, memory and clocks (torch, and nvidia-smi where installed)."""
    import torch  # lazy: torch is optional (a GPU host's)

    props = torch.cuda.get_device_properties(0)
    env: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0), "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory, "l2_bytes": getattr(props, "L2_cache_size", None),
        "capability": f"{props.major}.{props.minor}", "torch": torch.__version__, "cuda": torch.version.cuda,
    }
    try:
        import triton  # lazy: triton is optional (a GPU host's)

        env["triton"] = triton.__version__
    except ImportError:
        pass
    env["nvidia_smi"] = nvidia_smi()
    return env


NVIDIA_SMI_QUERY = "clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,temperature.gpu,driver_version"


def nvidia_smi(device: str = "0") -> dict[str, str] | None:
    """Clocks, power, temperature and driver of GPU `device` (an index or UUID) from nvidia-smi; None where it
    cannot run: not installed, or in an evaluation child, whose audit guard refuses it (the parent asks)."""
    try:
        line = subprocess.run(["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits",
                               "-i", device], capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return None
    return dict(zip(NVIDIA_SMI_QUERY.split(","), (v.strip() for v in line.split(",")), strict=False))
