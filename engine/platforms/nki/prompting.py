"""What the agents' prompts say about NKI kernels on Trainium: the hardware rules (from the platform's
`NeuronCoreSpec`), the meaning of each counter the performance model reports, where the model's time goes
(`format_breakdown`), and which NKI generation a kernel is written in. The registry's "prompts" part for NKI
(`PROMPTS`); the templates are `prompts/*.md` beside this file.
"""

from __future__ import annotations

from typing import Any

from engine.agents.prompting import LanguagePrompts
from engine.platforms.nki.generations import CURRENT, LEGACY, kernel_generation
from engine.platforms.nki.hardware import NeuronCoreSpec
from engine.platforms.nki.migration import MigrationError, migrate_source

# Profile counters (neuron-profile summary names, as our performance model reports them) and what each
# tells the Planner, beside the shared ones (latency, peak fraction: engine.agents.prompting.PROFILE_MEANINGS).
NKI_PROFILE_MEANINGS: dict[str, str] = {
    "hbm_read_bytes": "bytes read from device memory (HBM); ideally each input once",
    "hbm_write_bytes": "bytes written to HBM; ideally each output once",
    "psum_read_bytes": "bytes read from the matmul accumulator (PSUM)",
    "psum_write_bytes": "bytes written to PSUM by matmuls and copies",
    "sbuf_read_bytes": "bytes read from on-chip SBUF by the engines",
    "sbuf_write_bytes": "bytes written to SBUF (loads and engine outputs)",
    "spill_reload_bytes": "bytes reloaded after SBUF ran out of space; nonzero means live data is too large",
    "spill_save_bytes": "bytes saved to HBM because SBUF ran out of space",
    "hardware_flops": "floating-point operations executed by the Tensor Engine",
    "transpose_flops": "Tensor Engine work spent on transposes rather than useful matmuls",
    "peak_flops_bandwidth_ratio": "peak FLOP rate over memory bandwidth of the hardware",
    "mm_arithmetic_intensity": "matmul FLOPs per HBM byte; low means the kernel is memory-bound",
    "hfu_estimated_percent": "fraction of the Tensor Engine's peak FLOP rate achieved",
    "scalar_engine_active_time_percent": "share of the time the Scalar (activation) Engine is busy",
    "vector_engine_active_time_percent": "share of the time the Vector Engine is busy",
    "gpsimd_engine_active_time_percent": "share of the time the GpSimd Engine is busy",
    "dma_active_time_percent": "share of the time the DMA queues move data",
}


def nki_rules(p: NeuronCoreSpec) -> list[str]:
    psum_fp32 = p.psum_bank_bytes_per_partition // 4
    return [
        f"# Hardware rules ({p.name}, {p.core})",
        f"- On-chip tiles have a partition dimension (the first one) of at most {p.partitions}.",
        f"- SBUF holds {p.sbuf_bytes_per_partition // 1024} KiB per partition; PSUM "
        f"{p.psum_bytes_per_partition // 1024} KiB per partition, in tiles of at most "
        f"{p.psum_bank_bytes_per_partition // 1024} KiB ({psum_fp32} float32) per partition.",
        "- `nl.load` / `nl.store` (DMA) move data between HBM and SBUF; engines compute on SBUF and PSUM.",
        f"- `nisa.nc_matmul(stationary, moving)` contracts over the partition dimension (at most {p.partitions}); "
        f"it computes `stationary.T @ moving` with stationary [K, M<={p.partitions}] and moving [K, N<={psum_fp32}], "
        "and the [M, N] result lands in PSUM (accumulate with `+=`, copy to SBUF before storing).",
        "- `nl.affine_range` iterations must be independent (the hardware may overlap them); use "
        "`nl.sequential_range` when an iteration depends on the previous one.",
        "- Fewer, larger DMAs beat many small ones; every instruction has a fixed cost, so larger free sizes "
        "amortize it; engines (Tensor, Vector, Scalar, GpSimd, DMA) run in parallel when data allows.",
        "- `nisa.activation(op, data, bias, scale)` computes op(data * scale + bias) in one Scalar Engine pass.",
    ]


def format_breakdown(breakdown: dict[str, Any]) -> str:
    """Where the performance model's time goes (engine.platforms.nki.perf.explain), for the Planner: the verdict first,
    then per engine its busy time, its idle time waiting on another engine and its critical-path share."""
    # lazy: the performance model (numpy) loads for a breakdown only, not with the agents
    from engine.platforms.nki.perf.explain import ENGINE_NAMES, LABELS, PATH_CATEGORIES

    share = breakdown.get("path_share") or {}
    if not share:
        return ""
    busy, stall = breakdown.get("busy_s", {}), breakdown.get("stall_s", {})
    latency = breakdown.get("latency_s") or 0.0
    lines = [f"Where the time goes (critical path: the chain of instructions and waits that sets the latency; "
             f"shorten its largest share first): {breakdown.get('verdict', '')}",
             "| part | busy (us) | share of latency | idle waiting on another engine (us) | share of critical path |",
             "| --- | --- | --- | --- | --- |"]
    for name in PATH_CATEGORIES:
        engine = name in ENGINE_NAMES
        if not share.get(name) and not (engine and busy.get(name)):
            continue
        if engine:
            lines.append(f"| {LABELS[name]} | {busy.get(name, 0.0) * 1e6:.4g} | "
                         f"{busy.get(name, 0.0) / latency if latency else 0.0:.0%} | {stall.get(name, 0.0) * 1e6:.4g} | "
                         f"{share.get(name, 0.0):.0%} |")
        else:
            lines.append(f"| {LABELS[name]} | - | - | - | {share.get(name, 0.0):.0%} |")
    dma, queues = breakdown.get("dma_s", {}), [q for q in breakdown.get("dma_queue_s", []) if q > 0]
    if queues:
        lines.append(f"DMA: {len(queues)} queues used; loads {dma.get('load', 0.0) * 1e6:.4g} us, stores "
                     f"{dma.get('store', 0.0) * 1e6:.4g} us (DMA-seconds, summed over concurrent transfers).")
    spill = breakdown.get("spill", {})
    if spill.get("save_bytes") or spill.get("reload_bytes") or spill.get("refetch_bytes"):
        lines.append(f"SBUF overflow: {spill.get('save_bytes', 0.0):.4g} bytes spilled, {spill.get('reload_bytes', 0.0):.4g} "
                     f"reloaded, {spill.get('refetch_bytes', 0.0):.4g} bytes of evicted inputs loaded again "
                     f"({spill.get('seconds', 0.0) * 1e6:.4g} us at the HBM bandwidth).")
    return "\n".join(lines)


CURRENT_GENERATION_RULES = (
    "write it with `import nki`, `import nki.language as nl` and `import nki.isa as nisa` (never neuronxcc): ISA "
    "instructions take their destination tile first and return nothing (`nisa.tensor_copy(dst, src)`, "
    "`nisa.nc_matmul(psum_tile, stationary, moving, accumulate=True)`); declare each destination with "
    "`nl.ndarray(shape, dtype=..., buffer=nl.sbuf or nl.psum)`; there is no `mask=`, no `nl.arange`/`nl.mgrid` "
    "(index with integer slices) and no block dimension (the partition dimension comes first)")


def generation_line(source: str, target: str = "") -> str:
    """Which NKI generation the kernel is written in and which one the reply is in: its own (the agents must not
    mix namespaces, and a legacy kernel's reader should know current SDKs refuse it), or NKI 0.6 when the run
    returns kernels in the current generation (`target` CURRENT); '' when its imports say neither."""
    generation = kernel_generation(source)
    if target == CURRENT:
        if generation == LEGACY:
            return ("- The kernel imports the legacy neuronxcc.nki namespace, which Neuron SDK 2.28 and later refuse. "
                    "This run returns kernels in the current generation, NKI 0.6 (Neuron SDK 2.32): rewrite the "
                    f"whole kernel for it as you apply the plan; {CURRENT_GENERATION_RULES}.")
        return ("- The kernel imports the nki package (NKI 0.6, Neuron SDK 2.32), and this run returns kernels in "
                f"that generation: keep to it; {CURRENT_GENERATION_RULES}.")
    if generation == LEGACY:
        return ("- The kernel imports the legacy neuronxcc.nki namespace (Neuron SDK 2.27 and earlier; later SDKs "
                "refuse it, the simulator runs it): keep to that namespace.")
    if generation == CURRENT:
        return "- The kernel imports the nki package (NKI 0.6, Neuron SDK 2.32): keep to that package."
    return ""


def in_generation(source: str, target: str) -> str:
    """`source` in the generation its run returns: with `target` CURRENT, a legacy neuronxcc.nki source migrated
    mechanically (engine.platforms.nki.migration); ValueError naming the construct when it cannot be."""
    if target != CURRENT or kernel_generation(source) != LEGACY:
        return source
    try:
        return migrate_source(source).source
    except MigrationError as error:
        raise ValueError(f"this run returns kernels in NKI 0.6 (the nki package), and this legacy neuronxcc.nki "
                         f"kernel cannot be migrated mechanically: {error}") from error


# The header AccelOpt's harness puts above an NKI kernel, in its order (name the kernel uses -> import).
NKI_IMPORTS: tuple[tuple[str, str], ...] = (
    ("np", "import numpy as np"),
    ("math", "import math"),
    ("nki", "import neuronxcc.nki as nki"),
    ("nl", "import neuronxcc.nki.language as nl"),
    ("nisa", "import neuronxcc.nki.isa as nisa"),
    ("nt", "import neuronxcc.nki.typing as nt"),
    ("par_dim", "from neuronxcc.nki.language import par_dim"),
)


# The same header for the current generation (NKI 0.6, the nki package): what a reply of a run that returns
# current-generation kernels, or of a kernel already in it, gets.
CURRENT_NKI_IMPORTS: tuple[tuple[str, str], ...] = (
    ("np", "import numpy as np"),
    ("math", "import math"),
    ("nki", "import nki"),
    ("nl", "import nki.language as nl"),
    ("nisa", "import nki.isa as nisa"),
    ("nt", "import nki.typing as nt"),
)


PROMPTS = LanguagePrompts(rules=nki_rules, profile_meanings=NKI_PROFILE_MEANINGS, explain=format_breakdown,
                          generation_line=generation_line, generation_of=kernel_generation, to_generation=in_generation,
                          standard_imports=NKI_IMPORTS, generation_imports={CURRENT: CURRENT_NKI_IMPORTS})
