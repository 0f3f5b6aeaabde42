"""Rewrites that fuse instructions into one Scalar or Vector Engine instruction.

    visit_fold_scale            a multiply (or divide) by a constant folded into the activation's scale
    visit_scalar_tensor_tensor  multiply-by-constant then add/subtract a tile: one scalar_tensor_tensor
    visit_activation_reduce     a row sum of an activation's output computed by nisa.activation_reduce
"""

from __future__ import annotations

import ast

from engine.agents.rewrites import Site, dotted
from engine.platforms.nki.rewrites.kernel import (
    ACTIVATIONS,
    Kernel,
    assignments_to,
    line_of,
    remove_statement,
    replace_node,
    short,
    stored_names,
    walk_kernel,
)

# ---------------------------------------------------------------------------------------------------
# fold a multiply (or divide) by a constant into the activation's free scale


def scaled_operand(kernel: Kernel, node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    if kernel.is_nl(node, "multiply") and len(node.args) == 2 and not node.keywords:
        a, b = node.args
        if kernel.is_scalar(b) and not kernel.is_scalar(a):
            return a, b
        if kernel.is_scalar(a) and not kernel.is_scalar(b):
            return b, a
    if kernel.is_nl(node, "divide") and len(node.args) == 2 and not node.keywords:
        a, b = node.args
        if kernel.is_scalar(b) and not kernel.is_scalar(a):
            return a, ast.BinOp(left=ast.Constant(1.0), op=ast.Div(), right=b)
    return None


def _scaled_operand_or_definition(
    kernel: Kernel, operand: ast.expr, user: ast.AST
) -> tuple[tuple[ast.expr, ast.expr] | None, ast.Assign | None]:
    """(data, scale) of `operand` when it is a multiply/divide by a constant, written in place or in a
    single-use `name = ...` before the statement of `user`; with that definition (to remove), or None."""
    found = scaled_operand(kernel, operand)
    if found is not None:
        return found, None
    definition = kernel.single_use_definition(operand, kernel.statement_of(user))
    return (scaled_operand(kernel, definition.value) if definition else None), definition


def visit_fold_scale(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for node in list(walk_kernel(kernel)):
        if not (isinstance(node, ast.Call) and kernel.is_nl(node, *ACTIVATIONS) and len(node.args) == 1
                and not node.keywords):
            continue
        found, definition = _scaled_operand_or_definition(kernel, node.args[0], node)
        if found is None:
            continue
        op = dotted(node.func).rsplit(".", 1)[1]
        if len(sites) == target:
            data, scale = found
            new = kernel.isa_call("activation", op=kernel.nl_attr(op), data=data, scale=scale)
            replace_node(kernel, node, new)
            if definition is not None:
                remove_statement(kernel, definition)
        sites.append(Site(f"`{short(node)}` (line {line_of(node)}) becomes one activation with scale", line_of(node)))
    return sites


# ---------------------------------------------------------------------------------------------------
# fuse a multiply-by-constant followed by an add/subtract of a tile into nisa.scalar_tensor_tensor


def visit_scalar_tensor_tensor(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for node in list(walk_kernel(kernel)):
        if not (kernel.is_nl(node, "add", "subtract") and len(node.args) == 2 and not node.keywords):
            continue
        op1 = dotted(node.func).rsplit(".", 1)[1]
        match = None
        for position in (0, 1):
            inner, other = node.args[position], node.args[1 - position]
            found, definition = _scaled_operand_or_definition(kernel, inner, node)
            if found is not None and not kernel.is_scalar(other):
                match = (position, found, other, definition)
                break
        if match is None:
            continue
        if len(sites) == target:
            position, (data, scale), other, definition = match
            keywords = {"data": data, "op0": kernel.nl_attr("multiply"), "operand0": scale,
                        "op1": kernel.nl_attr(op1), "operand1": other}
            if op1 == "subtract" and position == 1:
                keywords["reverse1"] = ast.Constant(True)  # other - (data * scale)
            replace_node(kernel, node, kernel.isa_call("scalar_tensor_tensor", **keywords))
            if definition is not None:
                remove_statement(kernel, definition)
        sites.append(Site(f"`{short(node)}` (line {line_of(node)}) becomes one scalar_tensor_tensor", line_of(node)))
    return sites


# ---------------------------------------------------------------------------------------------------
# reduce in the activation instead of a separate sum: nisa.activation_reduce


def _activation_parts(kernel: Kernel, node: ast.AST) -> dict[str, ast.expr] | None:
    if isinstance(node, ast.Call) and kernel.is_nl(node, *ACTIVATIONS) and len(node.args) == 1 and not node.keywords:
        return {"op": kernel.nl_attr(dotted(node.func).rsplit(".", 1)[1]), "data": node.args[0]}
    if isinstance(node, ast.Call) and dotted(node.func) == f"{kernel.nisa}.activation" and not node.args:
        parts = {k.arg: k.value for k in node.keywords if k.arg}
        if set(parts) <= {"op", "data", "bias", "scale"} and {"op", "data"} <= set(parts):
            return parts
    return None


def _is_row_sum(kernel: Kernel, node: ast.AST) -> bool:
    if not (kernel.is_nl(node, "sum") and len(node.args) == 1):
        return False
    kw = {k.arg: k.value for k in node.keywords}
    axis, keep = kw.get("axis"), kw.get("keepdims")
    return (set(kw) == {"axis", "keepdims"} and isinstance(axis, ast.Constant) and axis.value in (1, -1)
            and isinstance(keep, ast.Constant) and keep.value is True)


def visit_activation_reduce(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for node in list(walk_kernel(kernel)):
        if not _is_row_sum(kernel, node):
            continue
        arg = node.args[0]
        stmt = kernel.statement_of(node)
        parts = _activation_parts(kernel, arg)
        definition = None
        if parts is None and isinstance(arg, ast.Name) and kernel.fn and assignments_to(kernel.fn, arg.id) == 1:
            block, index = kernel.block_of(stmt)
            for j in range(index - 1, -1, -1):
                s = block[j]
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and dotted(s.targets[0]) == arg.id:
                    if not (stored_names(block[j + 1:index]) & {arg.id}):
                        definition = s
                    break
            parts = _activation_parts(kernel, definition.value) if definition else None
        if parts is None or not isinstance(parts["data"], ast.Name):
            continue  # the row count comes from data.shape[0]: a named tile keeps that simple
        if len(sites) == target:
            anchor = definition or stmt
            block, index = kernel.block_of(anchor)
            sums = kernel.fresh_name(f"{parts['data'].id}_row_sums")
            shape = ast.Tuple(elts=[ast.Subscript(value=ast.Attribute(value=ast.Name(parts["data"].id, ast.Load()),
                                                                       attr="shape", ctx=ast.Load()),
                                                  slice=ast.Constant(0), ctx=ast.Load()), ast.Constant(1)],
                              ctx=ast.Load())
            alloc = ast.Assign(targets=[ast.Name(sums, ast.Store())], value=ast.Call(
                func=kernel.nl_attr("ndarray"), args=[shape],
                keywords=[ast.keyword("dtype", kernel.nl_attr("float32")), ast.keyword("buffer", kernel.nl_attr("sbuf"))]))
            call = kernel.isa_call("activation_reduce", **parts, reduce_op=kernel.nl_attr("add"),
                                   reduce_res=ast.Name(sums, ast.Load()))
            if definition is not None:
                definition.value = call  # the activated tile is still used elsewhere
                block.insert(index, alloc)
            else:
                discard = kernel.fresh_name(f"{parts['data'].id}_activated")
                block[index:index] = [alloc, ast.Assign(targets=[ast.Name(discard, ast.Store())], value=call)]
            replace_node(kernel, node, ast.Name(sums, ast.Load()))
        sites.append(Site(f"`{short(node)}` (line {line_of(node)}) is computed by the activation's reduction", line_of(node)))
    return sites
