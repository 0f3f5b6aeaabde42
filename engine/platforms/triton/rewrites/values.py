"""Where a launch parameter's value is written: the literal itself, or the assignments of the name it is.

Kernels are usually launched with names the host computes (`BLOCK_M=bm, num_warps=warps`, with
`bm, warps = 128, 8` above, perhaps once per branch of an `if`), not with literals. A rewrite of the launch
parameter must then change the assignment, where the grid reads the same name, or the grid and the block
disagree. `value_sites` follows a name to every statement that binds it in the launching function (or, when
that function never binds it, at module level) and returns, per statement, the int literals that make up the
value: a literal, a conditional expression of them (`16 if h >= 8192 else 4`), or `min`/`max` of them. A
name bound any other way (a parameter, a loop, `+=`, a call) has no sites: we cannot change it safely.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from engine.platforms.triton.rewrites.source import int_value, line_of


@dataclass
class ValueSite:
    """One place a launch value is written: the int literals to change together, and how to show it."""

    leaves: list[ast.Constant]
    via: str  # '' for a literal in the launch itself, else the name followed (`bm`)
    line: int

    def values(self) -> list[int]:
        return [int(leaf.value) for leaf in self.leaves]

    def describe(self, new: list[int]) -> str:
        old_text = "/".join(str(v) for v in self.values())
        new_text = "/".join(str(v) for v in new)
        return f"{old_text} -> {new_text}" if not self.via else f"`{self.via}` {old_text} -> {new_text} (line {self.line})"

    def set(self, new: list[int]) -> None:
        for leaf, value in zip(self.leaves, new, strict=True):
            leaf.value = value


def literal_leaves(expr: ast.expr) -> list[ast.Constant] | None:
    """The int literals an expression of literals is made of (the results of a conditional expression,
    the arguments of min/max), or None when anything else takes part."""
    if int_value(expr) is not None:
        assert isinstance(expr, ast.Constant)
        return [expr]
    if isinstance(expr, ast.IfExp):  # the test may read anything: only the results are values
        body, orelse = literal_leaves(expr.body), literal_leaves(expr.orelse)
        return None if body is None or orelse is None else body + orelse
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("min", "max")
            and expr.args and not expr.keywords):
        leaves: list[ast.Constant] = []
        for arg in expr.args:
            inner = literal_leaves(arg)
            if inner is None:
                return None
            leaves += inner
        return leaves
    return None


def _bound_value(stmt: ast.stmt, name: str) -> ast.expr | None:
    """The expression `stmt` binds `name` to (`name = v`, `name: T = v`, `a, name = x, v`), or None."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
        return stmt.value
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return None
    target = stmt.targets[0]
    if isinstance(target, ast.Name) and target.id == name:
        return stmt.value
    if (isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple)
            and len(target.elts) == len(stmt.value.elts)
            and not any(isinstance(e, ast.Starred) for e in target.elts + stmt.value.elts)):
        for element, value in zip(target.elts, stmt.value.elts, strict=True):
            if isinstance(element, ast.Name) and element.id == name:
                return value
    return None


def _bindings(scope: ast.AST, name: str, nodes: list[ast.AST]) -> list[ast.expr] | None:
    """The values `name` is bound to by the statements in `nodes` (all within `scope`), or None when some
    binding of it in `scope` is not a plain assignment."""
    stores = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    if not stores:
        return []
    values = []
    for stmt in nodes:
        value = _bound_value(stmt, name) if isinstance(stmt, ast.stmt) else None
        if value is not None:
            values.append(value)
    return values if len(values) == len(stores) else None


def value_sites(expr: ast.expr, caller: ast.FunctionDef | None, tree: ast.Module) -> list[ValueSite] | None:
    """Every place the launch value `expr` is written, or None when one of them is not literals."""
    leaves = literal_leaves(expr)
    if leaves is not None:
        return [ValueSite(leaves, "", line_of(expr))]
    if not isinstance(expr, ast.Name):
        return None
    name = expr.id
    if caller is not None:
        params = caller.args.posonlyargs + caller.args.args + caller.args.kwonlyargs
        if any(a.arg == name for a in params) or name in (caller.args.vararg and caller.args.vararg.arg,
                                                          caller.args.kwarg and caller.args.kwarg.arg):
            return None
        values = _bindings(caller, name, list(ast.walk(caller)))
        if values is None:
            return None
        if not values:  # never bound in the launcher: a module constant
            values = _bindings(ast.Module(tree.body, []), name, list(tree.body))
    else:
        values = _bindings(ast.Module(tree.body, []), name, list(tree.body))
    if not values:
        return None
    sites = []
    for value in values:
        leaves = literal_leaves(value)
        if leaves is None:
            return None
        sites.append(ValueSite(leaves, name, line_of(value)))
    return sites
