"""NeuronCore hardware constants, one `NeuronCoreSpec` per Trainium generation, each value with its source.

Pure Python: imported by the simulator (capacities, rules) and the performance model (rates). A platform
(`benchmark.platforms`) names the spec it targets; this module knows chips, not platforms. Keep every
constant here and nowhere else. Sources, abbreviated in the comments:

- [ARCH-V2]  Neuron docs, "Trainium/Inferentia2 Architecture Guide for NKI" and "NeuronCore-v2 Architecture"
             (2 NeuronCores and 32 DMA engines per Trainium device, HBM 820 GB/s per device).
- [ARCH-V3]  Neuron docs, "Trainium2 Architecture Guide for NKI", "NeuronCore-v3 Architecture", "Trainium2
             Architecture" (8 NeuronCore-v3 and 128 DMA engines per device, HBM 2.9 TB/s per device,
             79 BF16 TFLOPS per core, 181 FP32 TFLOPS per 8-core chip).
- [ISA]      `nki.isa` reference pages, SDK 2.21-2.26, "Estimated instruction cost" of each instruction
             (MIN_II ~64 cycles; activation/tensor_scalar max(MIN_II, N); tensor_tensor max(MIN_II, 2N) with
             both inputs in SBUF; reciprocal max(MIN_II, 8N); nc_matmul 4*max(min(64, N_st), N_mov) for
             fp32; GpSimd startup ~150 cycles; activation_reduce/tensor_scalar_reduce + MIN_II).
- [DESIGN]   ../shared/DESIGN.md section 11: the trn1 peak figures NKIBench uses.
- [FIT]      fitted to ../shared/calibration/trn1_nkibench_baselines.csv by measurements/fit_perf_model.py; the
             fitted values are written below by hand, with the fit's date in docs/benchmarks.md.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


@dataclass(frozen=True)
class NeuronCoreSpec:
    name: str  # the chip generation's instance family, e.g. "trn1"
    core: str
    partitions: int  # SBUF/PSUM partitions (the partition dimension limit)
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    psum_bank_bytes_per_partition: int  # one PSUM tile: 2 KiB = 512 fp32 per partition

    # --- performance model: peaks (what "fraction of peak" divides by) --------------------------------
    hbm_bytes_per_s: float  # HBM bandwidth one NeuronCore can draw
    vector_flops_per_s: float  # Vector + Scalar elementwise peak (NKIBench's definition)
    matmul_fp32_flops_per_s: float  # Tensor Engine peak, fp32 operands

    # --- performance model: engines ----------------------------------------------------------------------
    engine_clock_hz: float  # Vector / Scalar / GpSimd cycle (the ISA cost formulas count these)
    engine_lanes: int  # one lane per partition
    min_ii_cycles: float  # minimum instruction initiation interval
    gpsimd_start_cycles: float  # GpSimd per-instruction startup
    engine_dispatch_cycles: float  # extra fixed cost per compute instruction (semaphores, decode)
    tensor_clock_hz: float  # PE-array cycle of the nc_matmul cost formula
    tensor_fp32_passes: float  # fp32 operands take this many passes through the PE array
    tensor_min_stationary: int  # the min(64, N_stationary) term of the nc_matmul formula
    tensor_fixed_cycles: float  # per-matmul fixed cost (stationary load not hidden by back-to-back issue)
    tensor_efficiency: float  # fraction of the formula's back-to-back rate sustained (PSUM/semaphore stalls)
    tensor_tensor_cycles_per_elem: float  # nisa.tensor_tensor, both inputs in SBUF, fp32 (ISA: 2)
    nl_binary_cycles_per_elem: float  # nl.add/subtract/multiply/... on two SBUF tiles (fitted from active time)
    reciprocal_cycles_per_elem: float  # Vector Engine reciprocal (ISA says 8; fitted)

    # --- performance model: DMA ----------------------------------------------------------------------------
    dma_queues: int  # DMA engines one core may drive concurrently
    dma_fixed_s: float  # fixed latency of one DMA (descriptor processing, round trip)
    dma_efficiency: float  # fraction of HBM bandwidth a stream of large DMAs reaches
    dma_sbuf_bytes_per_s: float  # SBUF->SBUF DMA rate (no HBM involved)

    sync_latency_s: float  # a result crossing engines (semaphore signal and wait) arrives this much later
    issue_window: int  # at most this many instructions in flight, in program order (0: unbounded)
    sbuf_usable_fraction: float  # of SBUF the allocator can give live data (the rest: pipelining buffers)

    # --- performance model: the profile counters ------------------------------------------------------------
    hfu_peak_flops_per_s: float  # denominator of neuron-profile's hfu_estimated_percent


TRN1 = NeuronCoreSpec(
    name="trn1",
    core="NeuronCore-v2",
    partitions=128,
    # Trainium architecture page: 24 MiB SBUF, 2 MiB PSUM per NeuronCore-v2, 128 partitions.
    sbuf_bytes_per_partition=24 * MIB // 128,
    psum_bytes_per_partition=2 * MIB // 128,
    psum_bank_bytes_per_partition=2 * KIB,
    hbm_bytes_per_s=410 * GIB,  # [DESIGN]; [ARCH-V2]: 820 GB/s per device, 2 cores
    vector_flops_per_s=2 * 128 * 1.12e9,  # [DESIGN]
    matmul_fp32_flops_per_s=23.75e12,  # [DESIGN]
    engine_clock_hz=1.12e9,  # [DESIGN]: the 1.12e9 of the vector peak is the engine clock
    engine_lanes=128,  # [ARCH-V2]: one lane per SBUF partition
    min_ii_cycles=64,  # [ISA]
    gpsimd_start_cycles=150,  # [ISA] iota / affine_select
    engine_dispatch_cycles=64.0,  # [FIT]
    # [DESIGN] + [ISA]: 23.75 TFLOP/s = 2*128*128 MACs * clock / 4 fp32 passes -> clock 2.9 GHz equivalent.
    tensor_clock_hz=23.75e12 * 4 / (2 * 128 * 128),
    tensor_fp32_passes=4,  # [ISA] nc_matmul: 4x the bf16 cost for fp32 inputs
    tensor_min_stationary=64,  # [ISA]
    tensor_fixed_cycles=0.0,  # [FIT]: tried up to 768; tensor_efficiency fits the matmul problems better
    tensor_efficiency=0.75,  # [FIT]; the CSV's hfu_estimated_percent (0.36-0.43 on every matmul problem) agrees
    tensor_tensor_cycles_per_elem=2.0,  # [ISA]; rope's measured Vector active time agrees (2.2)
    # [FIT] from measured Vector Engine active time: silu (multiply + reciprocal = 4.8 cycles/elem) and adamw
    # (6 nl binary ops + reciprocal = 11.5) give 1.33 for the nl ops and 3.5 for reciprocal.
    nl_binary_cycles_per_elem=1.33,
    reciprocal_cycles_per_elem=3.5,  # [FIT] (ISA: 8), see nl_binary_cycles_per_elem
    dma_queues=16,  # [ARCH-V2]: 32 DMA engines per device, 2 NeuronCores
    dma_fixed_s=2.0e-6,  # [FIT]: 1, 2 and 4 us tried; 2 us fits best
    dma_efficiency=0.85,  # [FIT]
    dma_sbuf_bytes_per_s=410 * GIB,  # assumption: the DMA engines' own rate, same as HBM's
    sync_latency_s=0.0,  # [FIT]
    issue_window=0,  # [FIT]: stands for the compiler's finite buffers (a tile's buffer is reused B tiles later)
    sbuf_usable_fraction=0.9,  # [FIT]: below 0.9 matmul_add_rmsnorm re-fetches its weights, above it matmul does not
    hfu_peak_flops_per_s=4 * 23.75e12,  # [DESIGN] x [ISA]: bf16 rate (4x fp32) is what hfu divides by
)

TRN2 = NeuronCoreSpec(
    name="trn2",
    core="NeuronCore-v3",
    partitions=128,
    # Trainium2 architecture page: 24 MiB SBUF, 2 MiB PSUM per NeuronCore-v3 (to be re-checked by the perf work).
    sbuf_bytes_per_partition=24 * MIB // 128,
    psum_bytes_per_partition=2 * MIB // 128,
    psum_bank_bytes_per_partition=2 * KIB,
    hbm_bytes_per_s=2.9e12 / 8,  # [ARCH-V3]: 2.9 TB/s per device shared by 8 NeuronCore-v3
    # Assumption: the docs corpus gives no Vector/Scalar clock for NeuronCore-v3; we keep trn1's 1.12 GHz.
    vector_flops_per_s=2 * 128 * 1.12e9,
    matmul_fp32_flops_per_s=181e12 / 8,  # [ARCH-V3]: 181 FP32 TFLOPS per chip, 8 cores
    engine_clock_hz=1.12e9,  # assumption, see vector_flops_per_s
    engine_lanes=128,
    min_ii_cycles=64,  # [ISA]
    gpsimd_start_cycles=150,  # [ISA]
    engine_dispatch_cycles=64.0,  # [FIT] on trn1, carried over
    tensor_clock_hz=79e12 / (2 * 128 * 128),  # [ARCH-V3]: 79 BF16 TFLOPS per core, one pass for bf16
    tensor_fp32_passes=79e12 / (181e12 / 8),  # [ARCH-V3]: bf16/fp32 ratio (~3.5)
    tensor_min_stationary=64,  # [ISA]
    tensor_fixed_cycles=0.0,  # [FIT] on trn1, carried over
    tensor_efficiency=0.75,  # [FIT] on trn1, carried over
    tensor_tensor_cycles_per_elem=2.0,  # [ISA]
    nl_binary_cycles_per_elem=1.33,  # [FIT] on trn1, carried over
    reciprocal_cycles_per_elem=3.5,  # [FIT] on trn1, carried over (ISA: 8)
    dma_queues=16,  # [ARCH-V3]: 128 DMA engines per device, 8 cores
    dma_fixed_s=2.0e-6,  # [FIT] on trn1, carried over
    dma_efficiency=0.85,  # [FIT] on trn1, carried over
    dma_sbuf_bytes_per_s=2.9e12 / 8,  # assumption, as trn1
    sync_latency_s=0.0,  # [FIT] on trn1, carried over
    issue_window=0,  # [FIT] on trn1, carried over
    sbuf_usable_fraction=0.9,  # [FIT] on trn1, carried over
    hfu_peak_flops_per_s=79e12,  # [ARCH-V3]
)

CORE_SPECS: dict[str, NeuronCoreSpec] = {spec.name: spec for spec in (TRN1, TRN2)}


def get_core_spec(name: str) -> NeuronCoreSpec:
    try:
        return CORE_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown platform {name!r}; expected one of {sorted(CORE_SPECS)}") from None
