"""Which top-level statement of a kernel last names each tensor it declares, read from the source.

The block recycler (`memory.BlockPool`) guesses which on-chip blocks are dead at the end of an outermost
loop iteration. Compiler-style kernels fill a tensor in one top-level loop and read it in a later one;
the source says so, and a block of such a tensor is kept instead of guessed dead. When the source cannot
be read, or a loop is not a top-level `for` of the kernel, nothing is known and the recycler guesses as
before (a wrong guess still only costs a re-run).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Liveness:
    # declaration line -> last line of the last top-level statement that names the declared variable
    used_until: dict[int, int] = field(default_factory=dict)
    # line of each top-level `for` statement -> its last line
    loop_end: dict[int, int] = field(default_factory=dict)


def kernel_liveness(func: Any) -> Liveness:
    try:
        source = textwrap.dedent(inspect.getsource(func))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return Liveness()
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return Liveness()
    offset = func.__code__.co_firstlineno - 1
    declared: dict[str, list[int]] = {}
    last_use: dict[str, int] = {}
    loop_end: dict[int, int] = {}
    for stmt in fn.body:
        end = (stmt.end_lineno or stmt.lineno) + offset
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Call):
            declared.setdefault(stmt.targets[0].id, []).append(stmt.lineno + offset)
        if isinstance(stmt, ast.For):
            loop_end[stmt.lineno + offset] = end
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                last_use[node.id] = max(last_use.get(node.id, 0), end)
    used_until = {line: last_use.get(name, line) for name, lines in declared.items() for line in lines}
    return Liveness(used_until=used_until, loop_end=loop_end)
