"""What makes two memory entries the same lesson, and what a kernel looks like to the memory. Pure Python.

* `lesson_text` / `lesson_digest`: an entry's title and summary normalised (case, whitespace, numbers,
  code blocks and the problem's name dropped), so a lesson learned again on another pair of kernels (other
  speedup, other diff) has the same digest and strengthens the entry instead of adding a copy.
* `similarity`: how alike two normalised lessons are (0..1, difflib's ratio over words); above
  `AUTO_MERGE_SIMILARITY` the new entry is merged into the old one, above `PROPOSE_SIMILARITY` a merge is
  proposed to curators.
* `kernel_operations` and `profile_bottleneck`: what `engine.memory.selection` ranks entries by (the operations a
  kernel calls, and which engine or memory bounds it).

No embedding model: none ships inside a package installable here without a download at run time, and the
lessons are short, templated texts where word overlap already separates them (docs/architecture.md).
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence

AUTO_MERGE_SIMILARITY = 0.9  # merged automatically (curators can undo it)
PROPOSE_SIMILARITY = 0.7  # proposed to curators on the memory page

_FENCED = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?x?")
_WORD = re.compile(r"[a-z_#]+(?:\.[a-z_]+)?")
# A call of a kernel language's module: nl.load(, nisa.nc_matmul(, tl.load(, nki.language.exp(.
_CALL = re.compile(r"\b(nl|nisa|nki\.language|nki\.isa|tl|triton\.language)\.(\w+)\s*\(")
_ALIASES = {"nki.language": "nl", "nki.isa": "nisa", "triton.language": "tl"}


def lesson_text(title: str, summary: str, *, problem_slug: str = "") -> str:
    """The words of a lesson that say what it is: no code blocks, numbers or problem name, lower case."""
    text = f"{title}\n{summary}".lower()
    text = _FENCED.sub(" ", text)
    if problem_slug:
        text = re.sub(rf"\b{re.escape(problem_slug.lower())}\b", " ", text)
    text = _NUMBER.sub("#", text)
    return " ".join(_WORD.findall(text))


def lesson_digest(title: str, summary: str, *, polarity: str, language: str = "", problem_slug: str = "") -> str:
    """Equal for the same lesson (normalised text), direction (polarity) and kernel language."""
    key = f"{polarity}\0{language}\0{lesson_text(title, summary, problem_slug=problem_slug)}"
    return hashlib.sha256(key.encode()).hexdigest()


def similarity(a: str, b: str) -> float:
    """How alike two normalised lessons are, 0..1 (difflib's ratio over their words)."""
    wa, wb = a.split(), b.split()
    if not wa or not wb:
        return 0.0
    matcher = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    # quick_ratio is an upper bound: skip the full comparison when it cannot reach the lower threshold.
    if matcher.quick_ratio() < PROPOSE_SIMILARITY:
        return matcher.quick_ratio()
    return matcher.ratio()


def most_similar(text: str, candidates: Iterable[tuple[object, str]]) -> tuple[object, float] | None:
    """The candidate (key, normalised text) most like `text`, with its similarity; None when there is none."""
    best: tuple[object, float] | None = None
    for key, other in candidates:
        score = similarity(text, other)
        if best is None or score > best[1]:
            best = (key, score)
    return best


def kernel_operations(source: str) -> frozenset[str]:
    """The kernel-language calls a kernel makes, e.g. {"nl.load", "nisa.nc_matmul", "tl.store"}."""
    return frozenset(f"{_ALIASES.get(module, module)}.{name}" for module, name in _CALL.findall(source or ""))


# Profile counters (fractions of the kernel's time, 0..1) that say an engine is busy.
_ENGINE_SHARES = {
    "tensor": "hfu_estimated_percent",
    "scalar": "scalar_engine_active_time_percent",
    "vector": "vector_engine_active_time_percent",
    "gpsimd": "gpsimd_engine_active_time_percent",
    "dma": "dma_active_time_percent",
}
SATURATED = 0.5  # below this share no engine bounds the kernel: it waits on memory


def profile_bottleneck(profile: Mapping[str, object] | None) -> str:
    """What bounds a kernel, from its profile: "spill" (SBUF ran out), the busiest engine when it is busy at
    least half the time ("tensor", "scalar", "vector", "gpsimd", "dma"), else "memory"; "" with no profile."""
    if not profile:
        return ""
    values = {k: v for k, v in profile.items() if isinstance(v, int | float)}
    if values.get("spill_reload_bytes", 0) > 0 or values.get("spill_save_bytes", 0) > 0:
        return "spill"
    shares = {engine: float(values[name]) for engine, name in _ENGINE_SHARES.items() if name in values}
    if not shares:
        return ""
    engine, share = max(shares.items(), key=lambda item: (item[1], item[0]))
    return engine if share >= SATURATED else "memory"


# --- what problems an entry speaks for ------------------------------------------------------------------

FAMILY_SEPARATOR = ", "
_NAMED_PROBLEMS = 4  # a title names this many problems, then "and N more"


def split_families(family: str) -> list[str]:
    """The families an entry's `family` field names ("elementwise, matmul" -> both; blank -> none)."""
    return [part.strip() for part in (family or "").split(FAMILY_SEPARATOR.strip()) if part.strip()]


def family_text(families: Iterable[str]) -> str:
    """The `family` field of an entry learned on problems of these families: each once, in first-seen order."""
    seen: list[str] = []
    for family in families:
        for part in split_families(family):
            if part not in seen:
                seen.append(part)
    return FAMILY_SEPARATOR.join(seen)[:100]


def problems_phrase(slugs: Sequence[str]) -> str:
    """"silu", "silu and gelu", "silu, gelu and swiglu", "a, b, c, d and 3 more"."""
    if len(slugs) > _NAMED_PROBLEMS:
        return f"{', '.join(slugs[:_NAMED_PROBLEMS])} and {len(slugs) - _NAMED_PROBLEMS} more"
    if len(slugs) <= 1:
        return "".join(slugs)
    return f"{', '.join(slugs[:-1])} and {slugs[-1]}"


def title_for_problems(title: str, slugs: Sequence[str], known: Iterable[str] = ()) -> str:
    """`title` with its mention of problems rewritten to name all of `slugs` ("X: slower on silu" learned
    again on gelu -> "X: slower on silu and gelu"). The mention is the first run of problem names (any of
    `slugs` or `known`, e.g. ones an undone merge took away) joined by commas or "and"; a title naming no
    problem is general already and stays as it is."""
    names = sorted({*slugs, *known}, key=len, reverse=True)  # longest first: "silu_mul" before "silu"
    if not slugs or not names:
        return title
    one = "(?:" + "|".join(re.escape(name) for name in names) + ")"
    more = r"(?:\d+ more)"
    pattern = re.compile(rf"(?<![\w-]){one}(?:(?:,\s*|\s+and\s+|,\s*and\s+)(?:{one}|{more}))*(?![\w-])")
    return pattern.sub(lambda _: problems_phrase(list(slugs)), title, count=1)[:300]
