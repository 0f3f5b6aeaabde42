"""A Triton kernel as the FlashInfer-Bench solution it is (its entry file is `Kernel.source`; a multi-file
solution's other files are in `solution_meta["sources"]`): what the evaluation hands the Triton core and what an
export writes. The lowest services module (models and the Triton core's format module only), so evaluations,
kernels and the FlashInfer-Bench import/export all build on it.
"""

from __future__ import annotations

from typing import Any

from benchmark.models import Kernel

# A Triton kernel is one file whose `run` is the entry point, as FlashInfer-Bench names it.
TRITON_ENTRY_POINT = "main.py::run"
# Who an exported solution of ours names as its author, unless it came with one.
EXPORT_AUTHOR = "AccelOpt Studio"


def solution_document(kernel: Kernel) -> dict[str, Any]:
    """The kernel of a Triton problem as a FlashInfer-Bench solution object. What an imported solution said
    (name, author, description, target hardware, dependencies, other fields) comes back as it was."""
    from engine.platforms.triton import flashinfer  # pure, but only Triton problems need it

    problem = kernel.problem
    meta = kernel.solution_meta or {}
    entry_point = kernel.entry_point or TRITON_ENTRY_POINT
    entry_file = entry_point.split("::", 1)[0]
    # A multi-file solution: the entry file is the kernel's source, the others were stored beside it.
    others = meta.get("sources") or {}
    order = meta.get("order") or [entry_file, *others]
    solution = flashinfer.Solution(
        name=meta.get("name") or f"accelopt_{problem.slug}_{kernel.sha256[:10]}",
        definition=problem.definition.get("name") or problem.slug,
        author=meta.get("author") or EXPORT_AUTHOR,
        language=problem.language,
        target_hardware=tuple(meta.get("target_hardware") or (p.value.upper() for p in problem.platforms)),
        entry_point=entry_point,
        sources={path: kernel.source if path == entry_file else others[path] for path in order},
        dependencies=tuple(meta.get("dependencies") or ()),
        description=meta.get("description") or "",
        extra=dict(meta.get("extra") or {}),
    )
    return flashinfer.solution_to_dict(solution)
