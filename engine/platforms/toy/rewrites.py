"""The toy language's offline catalog: one rewrite, which drops a statement that multiplies a name by one."""

from __future__ import annotations

import ast

from engine.agents.rewrites import Rewrite, Site


def _is_times_one(node: ast.stmt) -> bool:
    """`x = x * 1` or `x = x * 1.0`: a step that changes nothing."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
        return False
    value = node.value
    return (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult) and isinstance(value.left, ast.Name)
            and value.left.id == node.targets[0].id and isinstance(value.right, ast.Constant)
            and value.right.value == 1)


def _drop_times_one(tree: ast.Module, target: int | None) -> list[Site]:
    sites: list[Site] = []
    for function in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
        for statement in list(function.body):
            if _is_times_one(statement):
                if target == len(sites):
                    function.body.remove(statement)
                sites.append(Site(f"`{ast.unparse(statement)}` changes nothing", statement.lineno))
    return sites


CATALOG = (Rewrite(name="toy_drop_times_one", title="Drop a multiplication by one",
                   lesson="Multiplying by one costs a step and changes nothing.", visit=_drop_times_one),)
