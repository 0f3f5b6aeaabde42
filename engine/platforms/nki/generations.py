"""Which NKI generation a kernel is written in, read from its imports: the legacy `neuronxcc.nki`
namespace or the standalone `nki` package.

Why it matters to a user (Neuron docs, "Announcing the removal of the neuronxcc.nki namespace from
neuronx-cc in Neuron 2.34", 2026-11-30): the standalone `nki` package arrived in Neuron 2.27; from Neuron
2.28 on, using `neuronxcc.nki` inside an NKI kernel is a compilation error, and Neuron 2.34 removes the
namespace from the package. The APIs changed too, so moving a kernel takes more than its imports (the NKI
migration guides, one section per NKI version). The simulator runs both generations.
"""

from __future__ import annotations

import ast
import functools

LEGACY = "legacy"  # imports neuronxcc.nki (alone or beside nki): a current SDK refuses it
CURRENT = "current"  # imports only the standalone nki package

LABELS = {
    LEGACY: "legacy: neuronxcc.nki",
    CURRENT: "current: the nki package",
}
LEGACY_NOTE = (
    "This kernel imports the legacy neuronxcc.nki namespace. Neuron SDK 2.28 and later refuse it inside a "
    "kernel (a compilation error) and Neuron 2.34 removes it, so this source does not build on a current SDK; "
    "the simulator still runs it. Moving it means importing the standalone nki package (import nki.language "
    "as nl, import nki.isa as nisa) and following AWS's NKI migration guides: the APIs changed beyond the imports. "
    "The Migrate action does that mechanically, as a new kernel evaluated on the same reference."
)


@functools.lru_cache(maxsize=256)
def kernel_generation(source: str) -> str | None:
    """LEGACY, CURRENT, or None for a source that imports neither namespace or does not parse. Remembered:
    pages label every kernel they list, and a parse holds the server's GIL."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    legacy = current = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from neuronxcc import nki` names the legacy package through its parent
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == "neuronxcc.nki" or name.startswith("neuronxcc.nki."):
                legacy = True
            elif name == "nki" or name.startswith("nki."):
                current = True
    if legacy:
        return LEGACY
    return CURRENT if current else None
