"""Executor replies written the AccelOpt way: the kernel function without its imports.

AccelOpt's Executor is asked for the optimized `kernel` function only, and its harness writes a fixed header
of imports above the reply before running it. A reply like that is accepted here too: `complete_imports`
adds, from the platform language's standard imports, each one whose name the kernel uses and does not bind
itself. A reply that has its imports is left as it is.

Per language: `standard_imports` of its prompts part (`engine.agents.prompting.LanguagePrompts`, in its
platform folder) lists (bound name, import line) pairs.
"""

from __future__ import annotations

import ast
import builtins

from engine.agents.prompting import language_prompts
from engine.platforms.registry import get_definition


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
    the evaluation reports the syntax error itself). `generation`: a dialect whose header differs (its language's
    `generation_imports`), else the language's standard header."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    bound, used = _bound_and_used(tree)
    free = used - bound - set(dir(builtins))
    prompts = language_prompts(language)
    header = prompts.generation_imports.get(generation, prompts.standard_imports)
    return [line for name, line in header if name in free]


def complete_imports(source: str, platform: str, generation: str = "") -> str:
    """`source` with the platform's standard imports it uses but does not import put on top (those of
    `generation` where its language's prompts part has a header for it)."""
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


def in_target_generation(source: str, target: str, language: str) -> str:
    """A candidate kernel in the dialect its run returns (`target`; '' keeps each kernel's own): converted by its
    language's prompts part (for NKI, a legacy neuronxcc.nki source migrated mechanically); one that cannot be
    raises ValueError naming the construct."""
    convert = language_prompts(language).to_generation
    return convert(source, target) if target and convert is not None else source
