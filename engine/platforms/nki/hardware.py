"""Trainium hardware constants: one `NeuronCoreSpec` per Trainium generation, each value with its source
(the GPUs' specs are the Triton platform's: engine/platforms/triton/hardware.py).

Pure Python: imported by the simulator (capacities, rules) and the performance model (rates). A platform
(`engine.platforms.registry`) names the spec it targets; this module knows chips, not platforms. Keep every
constant here and nowhere else. Sources, abbreviated in the comments:

- [ARCH-V2]  Neuron docs, "Trainium/Inferentia2 Architecture Guide for NKI" and "NeuronCore-v2 Architecture"
             (2 NeuronCores and 32 DMA engines per Trainium device, HBM 820 GB/s per device; 16 DMA engines per
             NeuronCore at 27 GiB/s each, one buffer per SBUF partition row; VectorE: "a static instruction
             overhead of 100 engine cycles" for back-to-back instructions that depend on the previous one's
             output; 8 PSUM banks of 2 KiB per partition, so at most 8 outstanding matmul accumulation groups).
             Read at aws-neuron-sdk 81ce03a, nki/guides/architecture/trainium_inferentia2_arch.rst.
- [ARCH-V3]  Neuron docs, "Trainium2 Architecture Guide for NKI", "NeuronCore-v3 Architecture", "Trainium2
             Architecture" (8 NeuronCore-v3 and 128 DMA engines per device, HBM 2.9 TB/s per device,
             79 BF16 TFLOPS per core, 181 FP32 TFLOPS per 8-core chip).
- [ISA]      `nki.isa` reference pages, SDK 2.21-2.26, "Estimated instruction cost" of each instruction
             (MIN_II ~64 cycles; activation/tensor_scalar max(MIN_II, N); tensor_tensor max(MIN_II, 2N) with
             both inputs in SBUF; reciprocal max(MIN_II, 8N); nc_matmul 4*max(min(64, N_st), N_mov) for
             fp32; GpSimd startup ~150 cycles; activation_reduce/tensor_scalar_reduce + MIN_II).
- [ARCH-V4]  Neuron docs, "Trainium3 Architecture Guide for NKI" (nki/guides/architecture/trainium3_arch.rst,
             aws-neuron-sdk 81ce03a): 8 NeuronCore-v4 and 128 DMA engines per device, HBM 4.7 TB/s per device
             (about-neuron/arch/neuron-hardware/trainium3.rst says 4.9 TB/s; we take the NKI guide's), SBUF 32 MiB
             and PSUM 2 MiB per core; engine clocks Tensor 2.4 GHz, Vector/Scalar/GpSimd 1.2 GHz; Tensor Engine
             79 BF16/FP16/TF32 and 20 FP32 TFLOPS per core; Vector Engine 1.2 FP32 TFLOPS. The guide also says
             NeuronCore-v3 has 28 MiB of SBUF, where TRN2 below has 24 MiB from the Trainium2 page (not changed
             here: a trn2 result would move).
- [DESIGN]   ../shared/DESIGN.md section 11: the trn1 peak figures NKIBench uses.
- [DMA-BW]   Neuron docs, "Guideline to Avoid Under-Utilizing DMA Bandwidth" (nki/deep-dives/
             nki-dma-bandwidth-guide.rst, aws-neuron-sdk 81ce03a, 2026-04): 16 DMA engines per NeuronCore at
             17 B/ns each on TRN1 (272 GB/s), 23 B/ns on TRN2, 33 B/ns on TRN3 (528 GB/s); every transfer pays descriptor setup, sync and
             ~1300 ns semaphore-to-start latency; per partition, < 256 B is severely overhead-bound, 256 B-2 KiB
             improving, >= 2 KiB approaches peak, >= 4 KiB saturates.
- [DMA-OV]   Neuron docs, "Introduction to Direct Memory Access (DMA) with NKI" (nki/get-started/about/
             nki-dma-overview.rst, aws-neuron-sdk 81ce03a): DMA transfers are submitted to queues; "DMA transfers
             within a queue on the same DMA engine are executed in order", different queues round robin; "the queue
             ID is typically tied to the trigger engine and the method of descriptor generation".
- [DMA-CURVE] the same page's figure nki/img/overviews/nki-dma-intro-1.jpg: throughput of 128-partition DMAs
             against bytes per partition, read off the plot (no y labels; as a fraction of the 32 KiB point):
             32 B 1.4%, 64 B 2.6%, 128 B 5.0%, 256 B 10.3%, 512 B 20.9%, 1 KiB 42.4%, 2 KiB 81.3%, 4 KiB 96.6%,
             8 KiB 98.3%, 16 KiB 99.0%. Proportional to the bytes up to 1 KiB: a fixed time per DMA.
- [NKI-AFFINE] `nki.language.affine_range` docstring, aws-neuron-sdk 82231d6 (2025-02),
             general/nki/api/nki/language/__init__.py: "different iterations could be parallelized/pipelined on
             different compute engines within a NeuronCore depending on the invoked instructions (engines) and
             data dependency in the loop body"; `static_range`: "No loop-level optimizations will be performed".
- [TILING]   Neuron docs, "What is Tiling?" (nki/get-started/about/tiling-overview.rst, aws-neuron-sdk 81ce03a):
             "[Tile-Size Constraint#2] For tiles in PSUM, the F dimension size must not exceed
             nki.language.tile_size.psum_bank_fmax == 512" (fp32). With [ARCH-V2]'s "Alternative Use Case" (NKI
             runs `broadcast_to((M, F))` of a one-partition tile as a Tensor Engine matmul, whose output is PSUM):
             a broadcast wider than 512 cannot stay in PSUM (engine/platforms/nki/perf/lowering.py).
- [STREAM]   Neuron docs, "Software pipelining" (nki/guides/tutorials/tiled-grid-streaming.rst, 2026-10) and the
             `nki.language.alloc_stream_buffers` reference: a stream pool of num_slots SBUF slots (default 2); the
             slot count sets how many steps can be in flight at once; one slot runs load and compute in sequence,
             two (double buffering) overlap the next step's load with the current step's compute; the compiler
             enforces the waits before a slot is overwritten.
- [MAMBA-TUT] Neuron docs, "Fused Mamba" tutorial (nki/guides/tutorials/fused_mamba.rst, aws-neuron-sdk 81ce03a):
             in the profiles of mamba_v1 (4K channels) and mamba_v2 (8K seq_len) the Vector Engine goes idle on a
             semaphore wait for qSyncIO0 (loading `u`) and for qSyncSpillReload0: a blocking load or spill reload.
- [NKI-SEQ]  `nki.language.sequential_range` reference (Neuron docs, awsdocs-neuron "latest", nki/api/generated/
             nki.language.sequential_range): "Using sequential_range prevents Neuron compiler from unrolling the loops
             until entering compiler backend"; it "informs Neuron compiler to respect inter-loop dependency and
             perform much more conservative loop-level optimizations compared to affine_range".
- [MM-TUT]   NKI "Matrix multiplication" tutorial, aws-neuron-sdk 2ae3525
             general/nki/tutorials/matrix_multiplication.rst: [4096,8192]@[8192,8192] BF16 on trn1.32xlarge:
             51.80 / 42.96 / 22.07 / 6.97 ms, HFU 10.98 / 13.24 / 26.51 / 85.24% (tiled, hoisted loads, blocked
             free dimensions, fully optimized).
- [PERF-GUIDE] Neuron docs, NKI performance guide (nki/deep-dives/nki_perf_guide.rst, aws-neuron-sdk 81ce03a),
             "Opt #4. Overlap data loading with computation": an engine idle behind a wait on `qSyncIO0` (the
             queue of the kernel's `nl.load`s) is fixed like the engine pipelining of "Opt #3", the DMAs of
             the next tiles running while the engines compute the current ones; the fused Mamba tutorial
             (nki/guides/tutorials/fused_mamba.rst) names the same rows and loads delta and u per channel tile.
- [FIT]      fitted to ../shared/calibration/trn1_nkibench_baselines.csv by measurements/fit_perf_model.py; the
             fitted values are written below by hand, with the fit's date in docs/benchmarks.md.
"""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# [DMA-BW]: ~1300 ns per transfer; [DMA-CURVE]'s linear part reads 128 x 1 KiB / (0.424 x 272 GB/s) = 1.14 us per
# DMA of a stream. TRN1's NeuronCoreSpec.dma_queue_issue_s (on since perf-8; off on TRN2).
DMA_QUEUE_ISSUE_S = 1.3e-6


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
    tensor_efficiency: float  # fraction of the formula's back-to-back rate sustained (PSUM/semaphore stalls)
    tensor_tensor_cycles_per_elem: float  # nisa.tensor_tensor and nl.add & co., both inputs in SBUF, fp32 (ISA: 2)
    reciprocal_cycles_per_elem: float  # Vector Engine reciprocal (ISA says 8; fitted)

    # --- performance model: DMA ----------------------------------------------------------------------------
    dma_queues: int  # DMA engines one core may drive concurrently
    dma_fixed_s: float  # fixed latency of one DMA (descriptor processing, round trip)
    dma_efficiency: float  # fraction of the DMA engines' peak rate a stream of large DMAs reaches
    dma_sbuf_bytes_per_s: float  # SBUF->SBUF DMA rate (no HBM involved)
    dma_engine_bytes_per_s: float  # one DMA engine's peak rate; dma_queues of them per core
    dma_descriptor_bytes: float  # fixed cost of one contiguous DMA buffer (descriptor), in bytes of engine time

    sbuf_usable_fraction: float  # of SBUF the allocator can give live data (the rest: pipelining buffers)

    # --- performance model: the profile counters ------------------------------------------------------------
    hfu_peak_flops_per_s: float  # denominator of neuron-profile's hfu_estimated_percent

    # --- performance model: DMA transfers and engine clocks (perf-4 candidates, issue 19) ---------------------
    # A DMA queue starts at most one DMA per this long: its transfers run in order ([DMA-OV]), each paying the
    # fixed per-transfer cost before its data moves, the next one's while the previous one's data moves; a stream
    # of small DMAs on one queue therefore takes this long per DMA whatever its size ([DMA-CURVE]). Loads, stores
    # and SBUF-to-SBUF copies go to three queues (an assumption: [DMA-OV] ties a queue to the engine that
    # triggers the DMA and to the data's kind, which the trace does not record). 0: off (perf-3).
    dma_queue_issue_s: float = 0.0
    # [ARCH-V2]'s engine table: Vector 1.12 GHz, Scalar and GpSimd 1.4 GHz; the ISA cost formulas count each
    # engine's own cycles. 0: engine_clock_hz (perf-3 ran every engine at Vector's clock).
    scalar_clock_hz: float = 0.0
    gpsimd_clock_hz: float = 0.0
    # [ARCH-V2]: "Vector Engine and Scalar Engine cannot access PSUM in parallel", so splitting PSUM reads between
    # them gains nothing and the faster Scalar Engine takes an op either may run when it reads PSUM (neuron-profile:
    # matmul, bmm, transpose_matmul evacuate PSUM with Vector idle). False: balanced like any other (perf-3).
    psum_reads_on_scalar: bool = False
    # --- performance model: the compiler's schedule-time SBUF working set (helper SBUF, issue 19) ---------------
    # [NKI-AFFINE]: the iterations of an affine_range loop "could be parallelized/pipelined on different compute
    # engines within a NeuronCore" (static_range: "no loop-level optimizations"). A software pipeline over the
    # engines a loop body uses keeps one iteration per engine in flight, so their tiles are live together:
    # spills.py takes the live set with that many iterations of each innermost affine loop side by side, at most
    # this many (5: the four compute engines and the DMA queues of [ARCH-V2]; 1 turns the effect off).
    affine_interleave: int = 5
    # ... but no deeper than the live set fits the usable SBUF: a software pipeline needs one SBUF slot per step in
    # flight ([STREAM]: the number of slots "sets how many steps can be in flight at once", and the compiler makes
    # a step wait before its slot is overwritten), so spills.pipeline_depth takes the deepest of 1..affine_interleave
    # that fits, for the spills and the DMA queues' order alike. Where even program order does not fit, the compiler
    # still double-buffers ([STREAM]: two slots, `alloc_stream_buffers`' default num_slots=2, "double buffering
    # exposes independent DMA and compute work in the steady state") and spills: this many iterations in flight.
    # 0: no SBUF bound, always affine_interleave (perf-5).
    affine_interleave_unfit: int = 2
    # The affine loops around an innermost one software-pipelined too: each iteration's loads (in its body or in
    # loops of loads only: adamw's four tiles in `for i0, i1`, the Mamba tutorial's delta and u per channel tile)
    # issued one iteration ahead of the compute and store of the iteration in flight, the depth
    # spills.pipeline_depth finds with them in the live set; the spills' order and the DMA queues' alike.
    # [PERF-GUIDE] "Opt #4" (overlap data loading with computation, like the engine pipelining of "Opt #3"),
    # [NKI-AFFINE] (no loop-carried dependency, so iterations may overlap), [STREAM] (double buffering).
    # False: only the innermost affine loops are interleaved (perf-8). On since perf-9 with the next flag (helper HBMA).
    affine_outer_pipeline: bool = True
    # ... and where that prefetch fits only without the kept copies of repeated loads, the loops are pipelined
    # anyway and the kept copies give way: a prefetched tile is not evicted before its first read, an evicted
    # kept copy's repeat runs (helper HBMA). Evidence: trn1 reads matmul_add_rmsnorm's 16 MiB weights 1.85 times
    # (54 of the 2,048 [128, 512] tiles re-read, 1.75 per row block: neuron-profile), the 3.2 KiB per partition
    # by which the next row block's x and z (16 KiB) overflow the usable SBUF beside the 128 KiB of weights
    # ([PERF-GUIDE] "Opt #4"; docs/history/performance-model.md, "perf-9 candidates: weights re-read"). The kept tiles to re-read
    # are the fewest that cover the excess (spills._cover). And where even the inner loops overflow SBUF, nothing
    # is fetched an iteration ahead ([STREAM]: a slot per step in flight). Needs affine_outer_pipeline.
    affine_outer_over_kept_copies: bool = True
    # --- performance model: DMA bandwidth in time order, trigger queues (helper QUEUES, issue 19) ---------------
    # Book DMA bandwidth earliest start first (schedule_timed.py) instead of in program order, so a DMA held back
    # does not land behind later-starting ones already booked. False: program order (perf-4). On since perf-5.
    dma_time_order: bool = True
    # With dma_time_order, the in-order trigger queues ([DMA-OV]: "DMA transfers within a queue on the same DMA
    # engine are executed in order"; "the queue ID is typically tied to the trigger engine"): "none", "kind"
    # (loads, stores, on-chip copies), "one", or "trigger" (the engine that produces a store's data or first
    # reads a load's tile). A DMA starts no earlier than its queue's previous one plus dma_queue_issue_s.
    # perf-5 ships "trigger" with no interval (perf-8 turns dma_queue_issue_s on for TRN1): it meets the
    # leave-one-out goal and lowers the pairs' error, not their count (docs/history/performance-model.md, perf-5 candidates:
    # DMA queues in time order).
    dma_queue_assignment: str = "trigger"
    # A queue's order: the compiler's ([NKI-AFFINE]: affine_range iterations software-pipelined, affine_interleave
    # of them in lockstep, as spills.py) instead of the trace's program order. False: program order (perf-4).
    dma_queue_compiler_order: bool = True
    # --- performance model: partition broadcasts as the compiler lowers them (helper PAIRS, issue 19) -------------
    # [ARCH-V2] "Alternative Use Case": `broadcast_to` of a one-partition tile is a Tensor Engine matmul into PSUM;
    # [TILING]: a PSUM tile is at most psum_bank_bytes_per_partition (512 fp32) wide. lowering.py adds the matmuls;
    # up to 512 wide the consumer reads PSUM (1 cycle per element), wider ones are copied to SBUF on the Scalar
    # Engine (ceil(F / 512) copies) and read at the SBUF rate. Alone, the pairs' signs are all right but the Mamba
    # baseline's leave-one-out fold falls off a spill cliff (docs/history/performance-model.md, perf-6 candidates: pairs
    # and engine shares). On with affine_interleave_unfit (helper PIPE): the lowering's extra instructions no longer
    # change which data spills.py evicts, and the pipelined depth is bounded by SBUF. False: the broadcast is free
    # and read from SBUF (perf-5). The same for every kernel since perf-12: up to perf-10 the pairs the NKI tutorials
    # measured read a one-bank broadcast from PSUM and every other kernel (AccelOpt's optimized Mamba's counters
    # suggest its compiler copied them) from an SBUF copy; a per-source setting cannot predict a new kernel, and only
    # the PSUM read is documented (docs/history/performance-model.md, "perf-12 … one model for every kernel").
    partition_broadcast_matmul: bool = True
    # --- performance model: loop-invariant computation (helper VN, issue 19) -------------------------------------
    # The compiler hoists a loop-invariant load and what is computed from it, and keeps the product (spilling it
    # when it does not fit): neuron-profile's transpose_flops are the trace's divided by the repeat count where a
    # loaded tile is transposed inside a loop that does not index it (trn1_nkibench_baselines.csv: swiglu 6.00, bmm
    # and bmm_softmax 4.00, lora 3.50). The SDK names "redundant TensorEngine transposes" and "intermediate-data
    # spilling" as the profile's known inefficiency patterns (about-neuron/whats-new.rst, Neuron Agentic
    # Development), and the compiler has a dead code elimination pass (release-notes/components/compiler.rst);
    # aws-neuron-sdk @81ce03ae. valnum.py value-numbers the trace, elides the repeated transposes and copies and the
    # loads only they read, and keeps the product as dirty data (spilled when it does not fit). False: every
    # compute instruction runs as traced (perf-7).
    value_numbering: bool = True
    # The compiler's loop fusion (nki/index.rst: the loop-level stage "performs layout, tiling and loop fusion
    # optimizations"; nki/library/specs/design-rmsnorm-quant.rst: the middle end's "loop-reordering and
    # loop-fusion"; aws-neuron-sdk @81ce03ae): spills.py takes the SBUF working set with adjacent producer-consumer
    # affine loops of one trip count run iteration by iteration together, at every nest level, a fused iteration's
    # load-only loops first (fusion.py). False: program order (perf-7).
    loop_fusion: bool = True
    # A sequential_range loop run outermost (perf-10 candidate, helper LORA; interchange.sequential_major_order): an
    # affine loop whose body holds a sequential loop repeating loop-invariant work in the affine loop's later
    # iterations is distributed and interchanged, the sequential loop outside, so the product is live one
    # sequential iteration at a time and kept when that much fits SBUF (valnum.py). [NKI-SEQ] (nki.language.
    # sequential_range): the compiler does "much more conservative loop-level optimizations" on a sequential loop
    # than on affine ones, whose iterations carry no dependency and may be reordered; the middle end does
    # "loop-reordering" (nki/library/specs/design-rmsnorm-quant.rst, aws-neuron-sdk @81ce03ae). Evidence: lora's
    # trn1 counters (docs/history/performance-model.md, "perf-10 candidates: lora"): x read twice, transposed twice, the transposed
    # x saved once and reloaded in 11 of 12 column blocks, the K-chunk accumulators saved 4 times per block. Of the
    # 14 baselines and the pair kernels only lora moves (hbm 0.92 / 0.79 -> 1.01 / 1.02, 32.90 -> 30.02 ms, measured
    # 30.17); the matmul baseline (no sequential loop) still transposes its input in all 12 column blocks. False:
    # products bounded whole, program order (perf-9).
    sequential_outermost: bool = True
    # A spill save or reload costed as a DMA of its shape (perf-10 candidate, helper BMM): one descriptor per SBUF
    # partition row its chunks span, as dma_descriptors counts a load's ([ARCH-V2]: at least one contiguous buffer
    # per partition row; [DMA-BW]'s per-packet floor, dma_packet_s, applies per descriptor). False: every spill
    # transfer counts `partitions` (128) descriptors whatever it spans (perf-9), so bmm's 1,026 reloads of
    # [64 partitions x 512 B] chunks pay the 12.8 us packet floor of 128 descriptors for 32 KiB each (41 GB/s).
    # On since perf-10 (the lead: grounded, and of the 14 baselines only gqa_full moves, +0.009 -> +0.012).
    spill_descriptors_per_row: bool = True
    # --- performance model: loads across a sequential_range boundary (helper MM, issue 19) -------------------
    # [NKI-SEQ]: a sequential_range loop is kept rolled "until entering compiler backend" so that the compiler
    # "respect[s] inter-loop dependency"; the backend's engines then run as [ARCH-V2]'s four instruction streams
    # synchronised by semaphores on the data they share. The loop-carried dependency holds the next iteration's
    # compute, not a load that reads nothing the loop writes: the DMA queues fetch it one iteration ahead (double
    # buffering, [STREAM]). Measured: the matmul tutorial's fully optimized kernel (a sequential K-block loop)
    # runs at 85.24% HFU on trn1 (6.97 ms, [MM-TUT]), so at the PE's peak at most 1.18 ms of it is stall; a full
    # drain at each of its 56 iteration boundaries (a 6 MiB refill before the next matmul group) costs 1.23 ms.
    # True: an HBM load waits for the barrier before its iteration's (data dependencies still apply);
    # False: every instruction of an iteration waits for the previous one to drain (perf-7). Time-ordered replay only.
    sequential_prefetch: bool = True
    # --- performance model: a queue per load statement of an affine loop (helper MM, issue 19) -----------------
    # With "trigger": a load whose innermost loop is an affine_range gets an in-order queue of its own per load
    # statement; other DMAs keep their trigger engine's queue. [NKI-AFFINE]: an affine loop's iterations are
    # software-pipelined, and [DMA-OV] ties a queue to "the method of descriptor generation" as well as to the
    # trigger engine. Measured: the tutorial's tiled kernel (two load statements per affine iteration, 1 KiB and
    # 256 B rows, each stream 1.2 us per DMA alone) takes 1.58 us per iteration on trn1, not 2.4 ([MM-TUT]);
    # rope's loads (a Python range loop) wait behind its stores (perf-8 SYNC). False: trigger queues only (perf-7).
    affine_load_queues: bool = True
    # --- performance model: DMA packet rate (helper MM, issue 19) ------------------------------------------------
    # [DMA-BW]: small payloads make "the DMA packet rate -- not HBM bandwidth -- the limiting factor" (a packet: one
    # partition row's contiguous run, a descriptor here). An engine spends at least this long per packet, whatever
    # its bytes; [DMA-CURVE] bounds it: one 128-packet DMA of <= 1 KiB per partition takes 1.14 us on 16 engines,
    # <= 0.14 us per packet. 0: off, a packet costs only its bytes plus dma_descriptor_bytes (perf-7).
    dma_packet_s: float = 0.0


TRN1 = NeuronCoreSpec(
    name="trn1",
    core="NeuronCore-v2",
    partitions=128,
    # Trainium architecture page: 24 MiB SBUF, 2 MiB PSUM per NeuronCore-v2, 128 partitions.
    sbuf_bytes_per_partition=24 * MIB // 128,
    psum_bytes_per_partition=2 * MIB // 128,
    # [ARCH-V2] 8 banks of 2 KiB; [TILING] psum_bank_fmax 512 fp32: the widest PSUM tile, so the widest partition
    # broadcast a consumer reads from PSUM (lowering.py; wider ones are evacuated to SBUF).
    psum_bank_bytes_per_partition=2 * KIB,
    hbm_bytes_per_s=410 * GIB,  # [DESIGN]; [ARCH-V2]: 820 GB/s per device, 2 cores
    vector_flops_per_s=2 * 128 * 1.12e9,  # [DESIGN]
    matmul_fp32_flops_per_s=23.75e12,  # [DESIGN]
    engine_clock_hz=1.12e9,  # [DESIGN]: the 1.12e9 of the vector peak is the engine clock
    engine_lanes=128,  # [ARCH-V2]: one lane per SBUF partition
    min_ii_cycles=64,  # [ISA]
    gpsimd_start_cycles=150,  # [ISA] iota / affine_select
    engine_dispatch_cycles=32.0,  # [FIT] (perf-3: 64; perf-4's refit, with Scalar at its own 1.4 GHz: 32)
    # [DESIGN] + [ISA]: 23.75 TFLOP/s = 2*128*128 MACs * clock / 4 fp32 passes -> clock 2.9 GHz equivalent.
    tensor_clock_hz=23.75e12 * 4 / (2 * 128 * 128),
    tensor_fp32_passes=4,  # [ISA] nc_matmul: 4x the bf16 cost for fp32 inputs
    tensor_min_stationary=64,  # [ISA]
    tensor_efficiency=0.8,  # [FIT] (perf-2: 0.75); the CSV's hfu_estimated_percent is 0.36-0.43 on every matmul problem
    # [ISA]; rope's measured Vector active time agrees (2.03 per element of its six tensor_tensors). nl.add & co.
    # run the same instruction, so they cost the same since perf-13 (a rate of their own, 1.2, had been fitted
    # to silu's and adamw's Vector active time: a label the kernel chooses cannot buy a price).
    tensor_tensor_cycles_per_elem=2.0,
    # [FIT] (ISA: 8) from measured Vector Engine active time: silu (multiply + reciprocal = 4.8 cycles/elem) and
    # adamw (6 nl binary ops + reciprocal = 11.5), fitted with the nl ops at 1.33 (perf-3's refit: 1.2).
    reciprocal_cycles_per_elem=3.5,
    dma_queues=16,  # [ARCH-V2]: 32 DMA engines per device, 2 NeuronCores
    dma_fixed_s=1.3e-6,  # [DMA-BW]: ~1300 ns semaphore-to-start latency per transfer (perf-2 fitted 2 us)
    # [FIT] of the engines' documented rate, fitted within the documented range: 1.0 is [DMA-BW]'s 17 B/ns,
    # 1.7 [ARCH-V2]'s "27 GiB/s per DMA engine" (the two pages disagree; trn1 measurements reach 294 GB/s).
    dma_efficiency=1.15,  # perf-4's refit (perf-3: 1.0)
    dma_sbuf_bytes_per_s=410 * GIB,  # assumption: the DMA engines' own rate, same as HBM's
    dma_engine_bytes_per_s=17e9,  # [DMA-BW] TRN1: 17 B/ns per engine, x16 = 272 GB/s
    # [DMA-BW]: the guide's saturation curve with one number: a buffer costs 256 B of engine time on top of its
    # bytes, so 256 B per partition runs at 50% (the guide's "severely overhead-bound" boundary), 2 KiB at 89%
    # ("approaches peak"), 4 KiB at 94% ("saturates").
    dma_descriptor_bytes=256.0,
    sbuf_usable_fraction=0.9,  # [FIT]: below 0.9 matmul_add_rmsnorm re-fetches its weights, above it matmul does not
    hfu_peak_flops_per_s=4 * 23.75e12,  # [DESIGN] x [ISA]: bf16 rate (4x fp32) is what hfu divides by
    # [DMA-BW]'s small-payload cost, in two parts that ship together (perf-8 candidates: matmul tutorial, helper MM):
    # each in-order queue starts one DMA per DMA_QUEUE_ISSUE_S ([DMA-CURVE]: one stream of <= 1 KiB DMAs runs at
    # a fixed time per DMA), and each engine spends at least dma_packet_s per packet. Measured: the tutorial's
    # hoisted and blocked kernels move their 1 KiB-row loads at 1.2 us per DMA (103 GB/s; perf-7 predicted 245),
    # their fully optimized one is compute-bound. perf-4 and perf-5 kept the interval off: it moved no count alone
    # (perf-8: pairs 10 of 15 either way; leave-one-out 0.107 alone, 0.074 with the packet rate).
    dma_queue_issue_s=DMA_QUEUE_ISSUE_S,
    # [FIT] within [DMA-CURVE]'s bound (<= 0.14 us): 0.08-0.12 us give the same counts (gqa_full's loads are
    # packet-bound: -0.076 -> +0.006); at 0.142 matmul's 512 B-run loads slow it by 16%.
    dma_packet_s=0.1e-6,
    scalar_clock_hz=1.4e9,  # [ARCH-V2]
    gpsimd_clock_hz=1.4e9,  # [ARCH-V2]
    psum_reads_on_scalar=True,  # [ARCH-V2]
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
    engine_dispatch_cycles=32.0,  # [FIT] on trn1, carried over
    tensor_clock_hz=79e12 / (2 * 128 * 128),  # [ARCH-V3]: 79 BF16 TFLOPS per core, one pass for bf16
    tensor_fp32_passes=79e12 / (181e12 / 8),  # [ARCH-V3]: bf16/fp32 ratio (~3.5)
    tensor_min_stationary=64,  # [ISA]
    tensor_efficiency=0.8,  # [FIT] on trn1, carried over
    tensor_tensor_cycles_per_elem=2.0,  # [ISA]
    reciprocal_cycles_per_elem=3.5,  # [FIT] on trn1, carried over (ISA: 8)
    dma_queues=16,  # [ARCH-V3]: 128 DMA engines per device, 8 cores
    dma_fixed_s=1.3e-6,  # [DMA-BW], as trn1
    dma_efficiency=1.15,  # [FIT] on trn1, carried over
    dma_sbuf_bytes_per_s=2.9e12 / 8,  # assumption, as trn1
    dma_engine_bytes_per_s=23e9,  # [DMA-BW] TRN2: 23 B/ns per engine
    dma_descriptor_bytes=256.0,  # [DMA-BW], as trn1
    sbuf_usable_fraction=0.9,  # [FIT] on trn1, carried over
    hfu_peak_flops_per_s=79e12,  # [ARCH-V3]
    dma_queue_issue_s=0.0,  # off: no trn2 measurement to check it on (trn1 ships it on)
)

# NeuronCore-v4 (issue 34). Uncalibrated: no trn3 measurement exists; every [FIT] value is trn1's, carried over.
TRN3 = NeuronCoreSpec(
    name="trn3",
    core="NeuronCore-v4",
    partitions=128,
    sbuf_bytes_per_partition=32 * MIB // 128,  # [ARCH-V4]: 32 MiB SBUF
    psum_bytes_per_partition=2 * MIB // 128,  # [ARCH-V4]: 2 MiB PSUM
    psum_bank_bytes_per_partition=2 * KIB,  # [TILING]: psum_bank_fmax 512 fp32, unchanged
    hbm_bytes_per_s=4.7e12 / 8,  # [ARCH-V4]: 4.7 TB/s per device, 8 cores
    vector_flops_per_s=1.2e12,  # [ARCH-V4]: the Vector Engine's 1.2 FP32 TFLOPS
    matmul_fp32_flops_per_s=20e12,  # [ARCH-V4]: 20 FP32 TFLOPS per core
    engine_clock_hz=1.2e9,  # [ARCH-V4]: Vector 1.2 GHz
    # One element per partition per cycle, as the ISA cost formulas count; [ARCH-V4]'s wider data paths (256 or
    # 512 elements per cycle) are not modelled, so trn3's elementwise costs are an upper bound.
    engine_lanes=128,
    min_ii_cycles=64,  # [ISA]
    gpsimd_start_cycles=150,  # [ISA]
    engine_dispatch_cycles=32.0,  # [FIT] on trn1, carried over
    tensor_clock_hz=79e12 / (2 * 128 * 128),  # [ARCH-V4]: 79 BF16 TFLOPS per core (= 2.4 GHz x 128 x 128 x 2)
    tensor_fp32_passes=79e12 / 20e12,  # [ARCH-V4]: bf16 / fp32 rate
    tensor_min_stationary=64,  # [ISA]
    tensor_efficiency=0.8,  # [FIT] on trn1, carried over
    tensor_tensor_cycles_per_elem=2.0,  # [ISA]
    reciprocal_cycles_per_elem=3.5,  # [FIT] on trn1, carried over (ISA: 8)
    dma_queues=16,  # [ARCH-V4]: 128 DMA engines per device, 8 cores; [DMA-BW]: 16 per core
    dma_fixed_s=1.3e-6,  # [DMA-BW], as trn1
    dma_efficiency=1.15,  # [FIT] on trn1, carried over
    dma_sbuf_bytes_per_s=4.7e12 / 8,  # assumption, as trn1: the HBM rate
    dma_engine_bytes_per_s=33e9,  # [DMA-BW] TRN3: 33 B/ns per engine
    dma_descriptor_bytes=256.0,  # [DMA-BW], as trn1
    sbuf_usable_fraction=0.9,  # [FIT] on trn1, carried over
    hfu_peak_flops_per_s=79e12,  # [ARCH-V4]
    dma_queue_issue_s=0.0,  # off, as trn2: no measurement to check it on
    scalar_clock_hz=1.2e9,  # [ARCH-V4]
    gpsimd_clock_hz=1.2e9,  # [ARCH-V4]
)

CORE_SPECS: dict[str, NeuronCoreSpec] = {spec.name: spec for spec in (TRN1, TRN2, TRN3)}
# Platforms whose performance model no measurement has checked: pages and boards say "uncalibrated".
UNCALIBRATED = frozenset({"trn2", "trn3"})


def get_core_spec(name: str) -> NeuronCoreSpec:
    try:
        return CORE_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown platform {name!r}; expected one of {sorted(CORE_SPECS)}") from None
