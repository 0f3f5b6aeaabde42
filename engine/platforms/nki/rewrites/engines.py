"""Rewrites that move work from a busy engine to an idle one.

    visit_scale_on_scalar_engine  a multiply (or divide) of a tile by a compile-time constant, which the
                                  Vector Engine runs, becomes the Scalar Engine's activation `copy` with
                                  that constant as its scale; a tile multiplied by itself becomes the
                                  activation `square`, and a multiply by a per-partition column (a row
                                  reduction's result) the activation with that column as its scale: the
                                  same values, computed on the other engine

The Scalar Engine computes f(data * scale + bias) at about one element per cycle and lane, as the Vector
Engine does a tensor-scalar multiply; an elementwise kernel whose Vector Engine does most of the work
while its Scalar Engine idles finishes sooner when constant multiplies move over.
"""

from __future__ import annotations

import ast

from engine.agents.rewrites import Site
from engine.platforms.nki.rewrites.fusion import scaled_operand
from engine.platforms.nki.rewrites.kernel import (
    ACTIVATIONS,
    Kernel,
    assignments_to,
    line_of,
    replace_node,
    short,
    walk_kernel,
)


def _inside_activation(kernel: Kernel, node: ast.AST) -> bool:
    """The multiply is an activation function's argument: fold_scale_into_activation's site, not ours."""
    parent = kernel.parents.get(node)
    return isinstance(parent, ast.Call) and kernel.is_nl(parent, *ACTIVATIONS)


ROW_REDUCTIONS = {"sum", "max", "min", "mean"}
COLUMN_MAPS = {"reciprocal", "rsqrt", "sqrt", "exp", "negative", "abs", "square"}


def _is_column(kernel: Kernel, expr: ast.AST, depth: int = 0) -> bool:
    """A [partitions, 1] tile for certain: a row reduction with keepdims, or an elementwise function of one
    (or a name bound once to either). The activation takes it as a per-partition scale."""
    if depth > 4:
        return False
    if isinstance(expr, ast.Name) and kernel.fn is not None:
        definition = [n for n in ast.walk(kernel.fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                      and isinstance(n.targets[0], ast.Name) and n.targets[0].id == expr.id]
        return (len(definition) == 1 and assignments_to(kernel.fn, expr.id) == 1
                and _is_column(kernel, definition[0].value, depth + 1))
    if kernel.is_nl(expr, *ROW_REDUCTIONS) and len(expr.args) == 1:
        keywords = {k.arg: k.value for k in expr.keywords}
        axis, keep = keywords.get("axis"), keywords.get("keepdims")
        return (set(keywords) == {"axis", "keepdims"} and isinstance(axis, ast.Constant) and axis.value in (1, -1)
                and isinstance(keep, ast.Constant) and keep.value is True)
    if kernel.is_nl(expr, "ndarray", "zeros") and expr.args and isinstance(expr.args[0], ast.Tuple):
        shape = expr.args[0].elts
        return len(shape) == 2 and isinstance(shape[1], ast.Constant) and shape[1].value == 1
    if kernel.is_nl(expr, *COLUMN_MAPS) and len(expr.args) == 1 and not expr.keywords:
        return _is_column(kernel, expr.args[0], depth + 1)
    return False


def _column_scaled(kernel: Kernel, node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    """(data, column) of `nl.multiply(tile, column)` with a per-partition column."""
    if kernel.is_nl(node, "multiply") and len(node.args) == 2 and not node.keywords:
        a, b = node.args
        if _is_column(kernel, b) and not _is_column(kernel, a) and not kernel.is_scalar(a):
            return a, b
        if _is_column(kernel, a) and not _is_column(kernel, b) and not kernel.is_scalar(b):
            return b, a
    return None


def _self_product(kernel: Kernel, node: ast.AST) -> ast.expr | None:
    """`x` of `nl.multiply(x, x)` for a plain name `x` (the same tile twice)."""
    if (kernel.is_nl(node, "multiply") and len(node.args) == 2 and not node.keywords
            and isinstance(node.args[0], ast.Name) and isinstance(node.args[1], ast.Name)
            and node.args[0].id == node.args[1].id and not kernel.is_scalar(node.args[0])):
        return node.args[0]
    return None


def visit_scale_on_scalar_engine(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for node in list(walk_kernel(kernel)):
        found = scaled_operand(kernel, node) or _column_scaled(kernel, node)
        squared = _self_product(kernel, node) if found is None else None
        if (found is None and squared is None) or _inside_activation(kernel, node):
            continue
        if found is not None and _is_column(kernel, found[0]):
            continue  # a [partitions, 1] tile: one instruction's fixed cost either way
        if len(sites) == target:
            if squared is not None:
                new = kernel.isa_call("activation", op=kernel.nl_attr("square"), data=squared)
            else:
                new = kernel.isa_call("activation", op=kernel.nl_attr("copy"), data=found[0], scale=found[1])
            replace_node(kernel, node, new)
        sites.append(Site(f"`{short(node)}` (line {line_of(node)}) runs on the Scalar Engine as an activation "
                          "with scale", line_of(node)))
    return sites
