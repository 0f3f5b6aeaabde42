"""Executor replies written the AccelOpt way: the kernel function without its imports.

AccelOpt's Executor is asked for the optimized `kernel` function only, and its harness writes a fixed header
of imports above the reply before running it. A reply like that is accepted here too: `complete_imports`
adds, from the platform language's standard imports, each one whose name the kernel uses and does not bind
itself. A reply that has its imports is left as it is.

Per-language hook: `STANDARD_IMPORTS_BY_LANGUAGE[language]` (a platform's `language`, engine.platforms.registry)
lists (bound name, import line) pairs; another language adds its entry here.
"""

from __future__ import annotations

import ast
import builtins

from engine.platforms.nki.generations import CURRENT, LEGACY, kernel_generation
from engine.platforms.nki.migration import MigrationError, migrate_source
from engine.platforms.registry import NKI, TRITON, get_definition

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

# A Triton solution's usual header (FlashInfer-Bench's main.py; prompts/triton/contract.md).
TRITON_IMPORTS: tuple[tuple[str, str], ...] = (
    ("math", "import math"),
    ("torch", "import torch"),
    ("triton", "import triton"),
    ("tl", "import triton.language as tl"),
)

STANDARD_IMPORTS_BY_LANGUAGE: dict[str, tuple[tuple[str, str], ...]] = {NKI: NKI_IMPORTS, TRITON: TRITON_IMPORTS}


def _bound_and_used(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names the module binds anywhere (imports, definitions, assignments, parameters) and names it reads."""
    bound: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store | ast.Del) else used).add(node.id)
    return bound, used


def missing_imports(source: str, language: str, generation: str = "") -> list[str]:
    """The standard import lines `source` needs and lacks, in the header's order ([] when it parses badly:
    the evaluation reports the syntax error itself). `generation` CURRENT: NKI's current-generation header."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    bound, used = _bound_and_used(tree)
    free = used - bound - set(dir(builtins))
    header = CURRENT_NKI_IMPORTS if language == NKI and generation == CURRENT else STANDARD_IMPORTS_BY_LANGUAGE.get(language, ())
    return [line for name, line in header if name in free]


def complete_imports(source: str, platform: str, generation: str = "") -> str:
    """`source` with the platform's standard imports it uses but does not import put on top (for NKI, those of
    `generation`: CURRENT, or by default the legacy header AccelOpt's harness writes)."""
    lines = missing_imports(source, get_definition(platform).language, generation)
    if not lines:
        return source
    # After a docstring and `from __future__` imports, which must stay first.
    body = ast.parse(source).body
    head = 0
    for index, node in enumerate(body):
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            head = node.end_lineno or 0
        else:
            break
    source_lines = source.splitlines(keepends=True)
    top, rest = "".join(source_lines[:head]), "".join(source_lines[head:]).lstrip("\n")
    return top + "\n".join(lines) + "\n\n" + rest


def in_target_generation(source: str, target: str) -> str:
    """A candidate kernel in the generation its run returns: with `target` CURRENT, a legacy neuronxcc.nki source
    is migrated mechanically (engine.platforms.nki.migration); one that cannot be raises ValueError naming the
    construct. Any other source is returned as it is."""
    if target != CURRENT or kernel_generation(source) != LEGACY:
        return source
    try:
        return migrate_source(source).source
    except MigrationError as error:
        raise ValueError(f"this run returns kernels in NKI 0.6 (the nki package), and this legacy neuronxcc.nki "
                         f"kernel cannot be migrated mechanically: {error}") from error
