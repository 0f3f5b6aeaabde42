"""Prompt templates (the `prompts/*.md` files) and what fills them: profile counters with their
meanings, the platform's language, hardware and rules, and memory entries.

What the prompts say about the platform comes from the registry (`engine.platforms.registry`): the language
and hardware names from its definition, and its kernel language's rules, counter meanings and breakdown from the
language's "prompts" part (`LanguagePrompts`, in its platform folder). A language has its templates in its
platform folder, `engine/platforms/<language>/prompts/` (Triton's has `contract.md`, its entry-point contract,
as the `{{contract}}` value); a role a language lacks falls back to DEFAULT_TEMPLATES' folder.

A template is a system part and a user part separated by a line `<!-- user -->`; placeholders are
`{{name}}` (double braces, so kernel code with `{}` needs no escaping). Rendering fails loudly on a
placeholder that has no value, so a template edit cannot silently send `{{kernel}}` to a model.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
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
from engine.platforms.registry import get_definition, load_part

PLATFORMS_DIR = Path(__file__).resolve().parents[1] / "platforms"


def prompt_dir(language: str) -> Path:
    """Where a language's templates live: its platform folder's `prompts/`."""
    return PLATFORMS_DIR / language / "prompts"


# The templates a language without its own for a role gets: NKI's name nothing of their language (every
# platform-specific word is a placeholder filled from the definition and the prompts part), so they serve any.
DEFAULT_TEMPLATES = prompt_dir("nki")
_SEPARATOR = "<!-- user -->"
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

# Profile counters every language shares and what each tells the Planner; a language adds its own counters'
# meanings (`LanguagePrompts.profile_meanings`). Counters not listed are shown without a meaning.
PROFILE_MEANINGS: dict[str, str] = {
    "latency_ms": "end-to-end kernel time; the number to lower",
    "peak_fraction": "theoretical-peak latency over this latency; 1.0 is the hardware limit",
}
NO_PROFILE = "(no profile: this kernel has not been profiled)"


@dataclass(frozen=True)
class LanguagePrompts:
    """What the agents' prompts say about one kernel language: its registry part "prompts", kept in its platform
    folder (`engine/platforms/<language>/prompting.py`), with its templates in `prompts/` beside it."""

    rules: Callable[[Any], list[str]]  # the hardware rules, written from the platform's hardware spec
    profile_meanings: dict[str, str] = field(default_factory=dict)  # its counters' meanings (over PROFILE_MEANINGS)
    no_profile: str = NO_PROFILE  # what an empty profile means
    explain: Callable[[dict[str, Any]], str] | None = None  # a performance model's breakdown, for the Planner
    # The line naming the kernel's dialect, which a reply must keep, or the one a run returns (source, target).
    generation_line: Callable[[str, str], str] | None = None
    generation_of: Callable[[str], str] | None = None  # a source's dialect ('' when its imports say none)
    # A source in the run's target dialect (source, target): converted, or ValueError naming what blocks it.
    to_generation: Callable[[str, str], str] | None = None
    # The header of imports an Executor reply may leave out (engine.agents.imports): (bound name, import line);
    # a dialect's own header by its name, where it differs.
    standard_imports: tuple[tuple[str, str], ...] = ()
    generation_imports: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


def language_prompts(language: str) -> LanguagePrompts:
    """The prompts part the registry names for `language`; ValueError when it has none."""
    return load_part(language, "prompts")


def hardware_rules(platform: str, extra: str = "") -> str:
    """The rules every kernel must follow on `platform`, in the words the simulator's errors use."""
    definition = get_definition(platform)
    try:
        write_rules = language_prompts(definition.language).rules
    except ValueError:
        raise ValueError(f"no prompt rules for {definition.language!r} kernels (platform {platform!r})") from None
    rules = write_rules(definition.hardware)
    if extra.strip():
        rules.append(extra.strip())
    return "\n".join(rules)


def format_profile(kernel: KernelView, language: str) -> str:
    if kernel.failure:  # a failing start kernel of a correctness-only run: say so before anything else
        return (f"This kernel FAILS its correctness check ({kernel.failure}): a plan should make it correct first."
                f"\n\n{format_profile(replace(kernel, failure=''), language)}")
    prompts = language_prompts(language)
    meanings = {**PROFILE_MEANINGS, **prompts.profile_meanings}
    rows = []
    if kernel.latency_ms is not None:
        rows.append(("latency_ms", kernel.latency_ms))
    if kernel.peak_fraction is not None:
        rows.append(("peak_fraction", kernel.peak_fraction))
    rows.extend(sorted(kernel.profile.items()))
    if not rows:
        return prompts.no_profile
    order_seed = _PROFILE_ORDER_SEED.get()
    if order_seed is not None:  # set by planner_messages_shuffled
        random.Random(order_seed).shuffle(rows)
    lines = ["| counter | value | meaning |", "| --- | --- | --- |"]
    for name, value in rows:
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        lines.append(f"| {name} | {shown} | {meanings.get(name, '')} |")
    if kernel.breakdown and prompts.explain is not None:  # a language with a performance model that explains it
        lines.extend(("", prompts.explain(kernel.breakdown)))
    return "\n".join(lines)


def format_breakdown(breakdown: dict[str, Any], language: str) -> str:
    """Where a performance model's time goes, in the words of its language's prompts ('' if it explains none)."""
    explain = language_prompts(language).explain
    return explain(breakdown) if explain is not None and breakdown else ""


def generation_line(source: str, language: str, target: str = "") -> str:
    """The line telling the agents which dialect of its language the kernel is written in, or which one the run
    returns (`target`; '' for the kernel's own); '' when the language has none."""
    line = language_prompts(language).generation_line
    return line(source, target) if line is not None else ""


def generation_of(source: str, language: str) -> str:
    """The dialect of its language `source` is written in ('' when the language has none or it says none)."""
    find = language_prompts(language).generation_of
    return find(source) if find is not None else ""


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
def load_template(role: str, language: str) -> tuple[str, str]:
    """The system and user parts of `role`'s template: the language's own if it has one, else the default."""
    path = prompt_dir(language) / f"{role}.md"
    if not path.exists():
        path = DEFAULT_TEMPLATES / f"{role}.md"
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


def render(role: str, values: dict[str, str], language: str) -> list[dict[str, str]]:
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
