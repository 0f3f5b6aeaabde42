"""Where each tensor a kernel declares lives, read from the source: the loop its blocks die with.

The block recycler (`recycling.BlockRecycler`) reuses the storage of on-chip blocks that are dead. Compiler-style
kernels declare every tensor at the top of the kernel and touch it only inside one loop nest: a PSUM
accumulator only inside the loop that fills and drains it, an SBUF intermediate only inside the loop
that writes and reads it. The innermost `for` whose body holds every use of the tensor's name is the
tensor's *home*: a block touched in one iteration of the home loop is dead once that iteration ends,
unless a later iteration touches it again (an accumulator), which revives it. A tensor named by more
than one top-level statement, or that escapes under another name (`same = kept`), is LIVE: its blocks
are never recycled. When the source cannot be read, or a tensor is declared outside the kernel's own
body, nothing is known and the recycler guesses (a wrong guess costs a re-run, never a wrong value).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field
from typing import Any

LIVE = 0  # the home of a tensor whose blocks are never recycled


@dataclass(frozen=True)
class Liveness:
    # declaration line -> line of the home loop's `for` (its iterator call), or LIVE
    home: dict[int, int] = field(default_factory=dict)
    # the lines of the loops that are some tensor's home: the recycler runs at the end of their iterations
    home_loops: frozenset[int] = frozenset()


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
    for stmt in fn.body:
        name = _declared_name(stmt)
        if name is not None:
            declared.setdefault(name, []).append(stmt.lineno + offset)
    # Per name: the common prefix of the enclosing loop stacks of its uses (None until the first use).
    nests: dict[str, tuple[int, ...] | None] = {}
    escaped: set[str] = set()

    def visit(node: ast.AST, loops: tuple[int, ...], parent: ast.AST | None) -> None:
        if isinstance(node, ast.Name) and node.id in declared:
            if isinstance(node.ctx, ast.Store) or not _consumed_in_place(node, parent):
                escaped.add(node.id)  # reassigned, or bound to another name / stored away
            common = nests.get(node.id)
            nests[node.id] = loops if common is None else _common_prefix(common, loops)
            return
        if isinstance(node, ast.For):
            visit(node.iter, loops, node)
            inner = (*loops, node.iter.lineno + offset)
            for child in (node.target, *node.body, *node.orelse):
                visit(child, inner, node)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, loops, node)

    for stmt in fn.body:
        if _declared_name(stmt) is not None:
            visit(stmt.value, (), stmt)  # type: ignore[attr-defined]  # the declaration itself is not a use
        else:
            visit(stmt, (), None)
    home: dict[int, int] = {}
    for name, lines in declared.items():
        nest = nests.get(name)
        where = LIVE if len(lines) > 1 or name in escaped or not nest else nest[-1]
        for line in lines:
            home[line] = where
    return Liveness(home=home, home_loops=frozenset(h for h in home.values() if h != LIVE))


def _declared_name(stmt: ast.stmt) -> str | None:
    """`name = call(...)` at the kernel's top level: a declaration (nl.ndarray, nl.zeros, ...)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
            and isinstance(stmt.value, ast.Call):
        return stmt.targets[0].id
    return None


def _consumed_in_place(node: ast.Name, parent: ast.AST | None) -> bool:
    """A use that reads or writes the tensor where it is: `t[...]`, `t.shape`, or an argument of a call."""
    if isinstance(parent, (ast.Subscript, ast.Attribute)) and parent.value is node:
        return True
    if isinstance(parent, ast.Call) and node in parent.args:
        return True
    return isinstance(parent, ast.keyword)


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]
