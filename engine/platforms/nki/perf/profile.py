"""neuron-profile summary counters and the per-engine timeline, from a trace and its schedule.

Counter names and meanings follow the columns of ../shared/calibration/trn1_nkibench_baselines.csv:
- hbm/sbuf/psum bytes moved by DMA instructions (compute engines' own SBUF/PSUM traffic is not in these
  counters: on the CSV, silu's sbuf_write_bytes equals its hbm_read_bytes), plus what SBUF pressure adds (hbm_read includes spill
  reloads and re-fetches of evicted input tiles, hbm_write includes spill saves, as neuron-profile counts them);
- hardware_flops counts a multiply-add as 2 FLOPs on each of the 2 passes neuron-profile sees per matmul,
  i.e. 2x the 2*M*N*K of the trace (checked on the CSV: matmul's 1.16e12 = 2*(2*4096*12288*5120) + transposes);
  transpose_flops likewise for Tensor Engine transposes;
- mm_arithmetic_intensity = (hardware_flops - transpose_flops) / HBM bytes;
- *_engine_active_time_percent are fractions of the latency in [0, 1], as the CSV stores them.
"""

from __future__ import annotations

import numpy as np

from engine.platforms.nki.hardware import NeuronCoreSpec
from engine.platforms.nki.perf.spills import SpillPlan
from engine.platforms.nki.simulator.trace import Engine, Trace

MAX_TIMELINE_INTERVALS = 300
TIMELINE_ENGINES = {Engine.TENSOR: "tensor", Engine.VECTOR: "vector", Engine.SCALAR: "scalar",
                    Engine.GPSIMD: "gpsimd", Engine.DMA: "dma"}

COUNTER_NAMES = (
    "hbm_read_bytes", "hbm_write_bytes", "psum_read_bytes", "psum_write_bytes", "sbuf_read_bytes",
    "sbuf_write_bytes", "spill_reload_bytes", "spill_save_bytes", "hardware_flops", "transpose_flops",
    "peak_flops_bandwidth_ratio", "mm_arithmetic_intensity", "hfu_estimated_percent",
    "scalar_engine_active_time_percent", "vector_engine_active_time_percent",
    "gpsimd_engine_active_time_percent",
)


def counters(trace: Trace, platform: NeuronCoreSpec, spills: SpillPlan, latency_s: float,
             busy_s: dict[int, float]) -> dict[str, float]:
    c = trace.columns
    engine = np.asarray(c["engine"])
    dma = (engine == Engine.DMA) & ~spills.elided
    # neuron-profile's sbuf/psum byte counters see DMA traffic only (silu: sbuf_write == hbm_read).
    total = {k: float(np.asarray(c[k], dtype=np.float64)[dma].sum()) for k in
             ("hbm_read", "hbm_write", "sbuf_read", "sbuf_write", "psum_read", "psum_write")}
    flops = np.asarray(c["flops"], dtype=np.float64)
    on_pe = (engine == Engine.TENSOR) & ~spills.elided  # loop-invariant computation runs once (valnum.py)
    transpose = on_pe & (np.asarray(c["is_transpose"]) != 0)
    hardware_flops = 2.0 * float(flops[on_pe].sum())
    transpose_flops = 2.0 * float(flops[transpose].sum())
    hbm_read = total["hbm_read"] + spills.spill_reload_total + spills.refetch_total
    hbm_write = total["hbm_write"] + spills.spill_save_total
    hbm_bytes = hbm_read + hbm_write
    latency = max(latency_s, 1e-12)
    return {
        "hbm_read_bytes": hbm_read,
        "hbm_write_bytes": hbm_write,
        "psum_read_bytes": total["psum_read"],
        "psum_write_bytes": total["psum_write"],
        "sbuf_read_bytes": total["sbuf_read"],
        "sbuf_write_bytes": total["sbuf_write"],
        "spill_reload_bytes": spills.spill_reload_total,
        "spill_save_bytes": spills.spill_save_total,
        "hardware_flops": hardware_flops,
        "transpose_flops": transpose_flops,
        "peak_flops_bandwidth_ratio": platform.matmul_fp32_flops_per_s / platform.hbm_bytes_per_s,
        "mm_arithmetic_intensity": (hardware_flops - transpose_flops) / hbm_bytes if hbm_bytes else 0.0,
        "hfu_estimated_percent": hardware_flops / (latency * platform.hfu_peak_flops_per_s),
        "scalar_engine_active_time_percent": busy_s.get(Engine.SCALAR, 0.0) / latency,
        "vector_engine_active_time_percent": busy_s.get(Engine.VECTOR, 0.0) / latency,
        "gpsimd_engine_active_time_percent": busy_s.get(Engine.GPSIMD, 0.0) / latency,
    }


def merged_intervals(start_s: np.ndarray, end_s: np.ndarray,
                     cap: int = MAX_TIMELINE_INTERVALS) -> list[tuple[float, float]]:
    """Union of busy intervals in microseconds, with the smallest gaps closed until at most `cap` remain."""
    if len(start_s) == 0:
        return []
    order = np.argsort(start_s, kind="stable")
    s = start_s[order] * 1e6
    e = np.maximum.accumulate(end_s[order] * 1e6)
    # A new interval begins where the start lies beyond every earlier end.
    breaks = np.flatnonzero(s[1:] > e[:-1]) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks - 1, [len(s) - 1]))
    seg_s, seg_e = s[starts], e[ends]
    if len(seg_s) > cap:
        gaps = seg_s[1:] - seg_e[:-1]
        keep = np.sort(np.argsort(gaps, kind="stable")[-(cap - 1):])  # the widest gaps stay gaps
        new_starts = np.concatenate(([0], keep + 1))
        new_ends = np.concatenate((keep, [len(seg_s) - 1]))
        seg_s, seg_e = seg_s[new_starts], seg_e[new_ends]
    return [(float(a), float(b)) for a, b in zip(seg_s, seg_e, strict=True)]


def timeline(engine: np.ndarray, start_s: np.ndarray, end_s: np.ndarray) -> dict[str, list[tuple[float, float]]]:
    """Per engine (the one each instruction ran on), its merged busy intervals in microseconds."""
    return {name: merged_intervals(start_s[engine == eng], end_s[engine == eng])
            for eng, name in TIMELINE_ENGINES.items()}
