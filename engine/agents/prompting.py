"""Prompt templates (the `prompts/*.md` files) and what fills them: profile counters with their
meanings, the platform's language, hardware and rules, and memory entries.

What the prompts say about the platform comes from its definition (`engine.platforms.registry`): the language
and hardware names, and the rules written for its kernel language (`RULES_BY_LANGUAGE`). A language may
has its templates in its platform folder, `engine/platforms/<language>/prompts/` (Triton's has `contract.md`,
its entry-point contract, as the `{{contract}}` value); a role a language lacks falls back to NKI's.

A template is a system part and a user part separated by a line `<!-- user -->`; placeholders are
`{{name}}` (double braces, so kernel code with `{}` needs no escaping). Rendering fails loudly on a
placeholder that has no value, so a template edit cannot silently send `{{kernel}}` to a model.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from engine.agents.base import (
    NEGATIVE,
    POSITIVE,
    FixRequest,
    KernelView,
    MemoryItem,
    PlanRequest,
    ProblemContext,
    SummaryRequest,
    WriteRequest,
)
from engine.platforms.nki.generations import CURRENT, LEGACY, kernel_generation
from engine.platforms.nki.hardware import NeuronCoreSpec
from engine.platforms.registry import NKI, get_definition
from engine.platforms.triton import prompting as triton_prompts

PLATFORMS_DIR = Path(__file__).resolve().parents[1] / "platforms"


def prompt_dir(language: str) -> Path:
    """Where a language's templates live: its platform folder's `prompts/`."""
    return PLATFORMS_DIR / language / "prompts"
_SEPARATOR = "<!-- user -->"
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

# Profile counters (neuron-profile summary names, as our performance model reports them) and what each
# tells the Planner. Counters not listed are shown without a meaning.
PROFILE_MEANINGS: dict[str, str] = {
    "latency_ms": "end-to-end kernel time; the number to lower",
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
    "peak_fraction": "theoretical-peak latency over this latency; 1.0 is the hardware limit",
}


def hardware_rules(platform: str, extra: str = "") -> str:
    """The rules every kernel must follow on `platform`, in the words the simulator's errors use."""
    definition = get_definition(platform)
    try:
        write_rules = RULES_BY_LANGUAGE[definition.language]
    except KeyError:
        raise ValueError(f"no prompt rules for {definition.language!r} kernels (platform {platform!r})") from None
    rules = write_rules(definition.hardware)
    if extra.strip():
        rules.append(extra.strip())
    return "\n".join(rules)


def _nki_rules(p: NeuronCoreSpec) -> list[str]:
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


# The rules the prompts state, per kernel language (a platform's `language`).
RULES_BY_LANGUAGE: dict[str, Callable[[Any], list[str]]] = {
    NKI: _nki_rules, triton_prompts.LANGUAGE: triton_prompts.triton_rules,
}
# Profile meanings that differ from PROFILE_MEANINGS, per language; and what an empty profile means.
MEANINGS_BY_LANGUAGE: dict[str, dict[str, str]] = {triton_prompts.LANGUAGE: triton_prompts.TRITON_PROFILE_MEANINGS}
NO_PROFILE_BY_LANGUAGE: dict[str, str] = {triton_prompts.LANGUAGE: triton_prompts.NO_LATENCY}


def format_profile(kernel: KernelView, language: str = NKI) -> str:
    if kernel.failure:  # a failing start kernel of a correctness-only run: say so before anything else
        return (f"This kernel FAILS its correctness check ({kernel.failure}): a plan should make it correct first."
                f"\n\n{format_profile(replace(kernel, failure=''), language)}")
    meanings = {**PROFILE_MEANINGS, **MEANINGS_BY_LANGUAGE.get(language, {})}
    rows = []
    if kernel.latency_ms is not None:
        rows.append(("latency_ms", kernel.latency_ms))
    if kernel.peak_fraction is not None:
        rows.append(("peak_fraction", kernel.peak_fraction))
    rows.extend(sorted(kernel.profile.items()))
    if not rows:
        return NO_PROFILE_BY_LANGUAGE.get(language, "(no profile: this kernel has not been profiled)")
    order_seed = _PROFILE_ORDER_SEED.get()
    if order_seed is not None:  # set by planner_messages_shuffled
        random.Random(order_seed).shuffle(rows)
    lines = ["| counter | value | meaning |", "| --- | --- | --- |"]
    for name, value in rows:
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        lines.append(f"| {name} | {shown} | {meanings.get(name, '')} |")
    if language == NKI and kernel.breakdown:  # Triton kernels have no performance model to explain them
        lines.extend(("", format_breakdown(kernel.breakdown)))
    return "\n".join(lines)


def format_breakdown(breakdown: dict[str, Any]) -> str:
    """Where the performance model's time goes (engine.platforms.nki.perf.explain), for the Planner: the verdict first,
    then per engine its busy time, its idle time waiting on another engine and its critical-path share."""
    # lazy: the NKI performance model (numpy), for an NKI breakdown only
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


def format_memory(items: tuple[MemoryItem, ...] | list[MemoryItem]) -> str:
    if not items:
        return "(the memory is empty)"
    parts = []
    for n, item in enumerate(items, 1):
        verdict = (f"made a kernel {item.speedup:.2f}x faster" if item.polarity == POSITIVE
                   else f"made a kernel {item.speedup:.2f}x slower: avoid it" if item.speedup > 1.0
                   # a negative entry with no slowdown is a rewrite that failed its check (SummaryRequest.failure)
                   else "broke a kernel (the result failed its check): avoid it")
        origin = f" (from {item.problem})" if item.problem else ""
        parts.append(f"## {n}. {item.title}{origin}\nThis rewrite {verdict}.\n{item.summary.strip()}")
    return "\n\n".join(parts)


@cache
def load_template(role: str, language: str = NKI) -> tuple[str, str]:
    """The system and user parts of `role`'s template: the language's own if it has one, else the default."""
    path = prompt_dir(language) / f"{role}.md"
    if not path.exists():
        path = prompt_dir(NKI) / f"{role}.md"
    text = path.read_text(encoding="utf-8")
    if _SEPARATOR not in text:
        raise ValueError(f"prompt template {path} has no '{_SEPARATOR}' line between system and user parts")
    system, user = text.split(_SEPARATOR, 1)
    return system.strip(), user.strip()


def fill(template: str, values: dict[str, str], name: str) -> str:
    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"prompt template {name!r} uses {{{{{key}}}}} but no value was given for it")
        return values[key]

    # One pass: a value that itself contains "{{x}}" (kernel code, memory text) is never re-expanded.
    return _PLACEHOLDER.sub(replace, template)


def render(role: str, values: dict[str, str], language: str = NKI) -> list[dict[str, str]]:
    system, user = load_template(role, language)
    return [{"role": "system", "content": fill(system, values, role)},
            {"role": "user", "content": fill(user, values, role)}]


def _platform_values(problem: ProblemContext) -> dict[str, str]:
    definition = get_definition(problem.platform)
    return {"language": definition.language_name, "hardware": definition.hardware_name,
            "contract": _contract(definition.language)}


def _language(problem: ProblemContext) -> str:
    return get_definition(problem.platform).language


@cache
def _contract(language: str) -> str:
    """The language's entry-point contract (`prompts/contract.md` in its folder), or '' when it has none."""
    path = prompt_dir(language) / "contract.md"
    return path.read_text(encoding="utf-8").strip() if path.exists() else ""


def _problem_values(problem: ProblemContext) -> dict[str, str]:
    return {
        **_platform_values(problem),
        "problem_slug": problem.slug,
        "platform": problem.platform,
        "reference": problem.reference_source.strip(),
        "hardware_rules": hardware_rules(problem.platform, problem.hardware_rules),
        "entry_file": problem.entry_file or "main.py",
        "helper_files": format_helper_files(problem),
    }


def format_helper_files(problem: ProblemContext) -> str:
    """A multi-file solution's other files, named and read-only ('' for a one-file kernel): the kernel's code
    imports from them, and a rewrite of the entry file keeps them exactly as they are."""
    if not problem.helper_files:
        return ""
    entry = problem.entry_file or "main.py"
    parts = [f"# Helper files of this solution (read-only)\n`{entry}` is the solution's entry file; these other "
             "files stay exactly as they are. Use what they define (as the kernel imports it); never change, "
             "copy or return them."]
    for path, text in problem.helper_files:
        parts.append(f"## `{path}`\n```python\n{text.strip()}\n```")
    return "\n\n".join(parts) + "\n"


CURRENT_GENERATION_RULES = (
    "write it with `import nki`, `import nki.language as nl` and `import nki.isa as nisa` (never neuronxcc): ISA "
    "instructions take their destination tile first and return nothing (`nisa.tensor_copy(dst, src)`, "
    "`nisa.nc_matmul(psum_tile, stationary, moving, accumulate=True)`); declare each destination with "
    "`nl.ndarray(shape, dtype=..., buffer=nl.sbuf or nl.psum)`; there is no `mask=`, no `nl.arange`/`nl.mgrid` "
    "(index with integer slices) and no block dimension (the partition dimension comes first)")


def generation_line(source: str, language: str, target: str = "") -> str:
    """For an NKI kernel, which generation it is written in and which one the reply is in: its own (the agents
    must not mix namespaces, and a legacy kernel's reader should know current SDKs refuse it), or NKI 0.6 when
    the run returns kernels in the current generation (`target` CURRENT); '' otherwise."""
    if language != NKI:
        return ""
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


def planner_messages(request: PlanRequest) -> list[dict[str, str]]:
    return render("planner", {
        **_problem_values(request.problem),
        "kernel": request.kernel.source.strip(),
        "generation": generation_line(request.kernel.source, _language(request.problem),
                                      request.problem.target_generation),
        "profile": format_profile(request.kernel, _language(request.problem)),
        "memory": format_memory(request.memory),
        "count": str(request.count),
    }, _language(request.problem))


# The seed that shuffles the profile's rows while planner_messages_shuffled renders (None: sorted order).
_PROFILE_ORDER_SEED: ContextVar[int | None] = ContextVar("profile_order_seed", default=None)


def planner_messages_shuffled(request: PlanRequest, profile_order_seed: int) -> list[dict[str, str]]:
    """`planner_messages` with the profile's rows in an order shuffled by `profile_order_seed`: AccelOpt shows
    each independent Planner call the profile fields in a random order, so the calls do not all anchor on
    the same first counters."""
    token = _PROFILE_ORDER_SEED.set(profile_order_seed)
    try:
        return planner_messages(request)
    finally:
        _PROFILE_ORDER_SEED.reset(token)


def executor_messages(request: WriteRequest) -> list[dict[str, str]]:
    return render("executor", {
        **_problem_values(request.problem),
        "kernel": request.kernel.source.strip(),
        "generation": generation_line(request.kernel.source, _language(request.problem),
                                      request.problem.target_generation),
        "profile": format_profile(request.kernel, _language(request.problem)),
        "plan": request.plan.strip(),
        "memory": format_memory(request.memory),
        # Off by default (SearchConfig.executor_memory): the request then has no memory and no section is shown.
        "memory_section": ("# Related lessons from the optimization memory\n" + format_memory(request.memory)
                           if request.memory else ""),
    }, _language(request.problem))


def fixer_messages(request: FixRequest) -> list[dict[str, str]]:
    return render("fixer", {
        **_problem_values(request.problem),
        "kernel": request.kernel.source.strip(),
        "generation": generation_line(request.kernel.source, _language(request.problem),
                                      request.problem.target_generation),
        "plan": request.plan.strip(),
        "failing_kernel": request.failing_source.strip(),
        "attempt": str(request.attempt),
        "error_kind": request.error_kind,
        "error_message": request.error_message.strip(),
    }, _language(request.problem))


def summarizer_messages(request: SummaryRequest) -> list[dict[str, str]]:
    direction = ("The planned change made the kernel faster: describe what to do."
                 if request.polarity == POSITIVE else
                 "The planned change made the kernel slower (the slow kernel is the changed one): "
                 "describe what to avoid and why it hurt.")
    if request.failure:
        direction = ("The planned change broke the kernel: the 'slow kernel' below is the changed one, and it "
                     f"failed its check ({request.failure}); the 'fast kernel' is the correct kernel it started "
                     "from, and the speedup shown is not a measurement. Describe what to avoid and why it broke.")
    if request.polarity not in (POSITIVE, NEGATIVE):
        raise ValueError(f"summary polarity must be {POSITIVE!r} or {NEGATIVE!r}, got {request.polarity!r}")
    return render("summarizer", {
        **_platform_values(request.problem),
        "problem_slug": request.problem.slug,
        "direction": direction,
        "slow_kernel": request.slow_source.strip(),
        "fast_kernel": request.fast_source.strip(),
        "speedup": f"{request.speedup:.3f}",
        "plan": request.plan.strip(),
    }, _language(request.problem))
