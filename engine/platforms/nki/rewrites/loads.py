"""Rewrites that load less from HBM.

    visit_hoist_loads  a loop-invariant load moves before its loop, or a whole inner loop nest's tiles are
                       cached in SBUF before the loop that repeated them
    visit_reuse_loads  a region loaded again while its first tile is still live reads that tile instead
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from engine.agents.rewrites import Site, dotted
from engine.platforms.nki.rewrites.kernel import (
    Kernel,
    assignments_to,
    line_of,
    loaded_names,
    remove_statement,
    rename_loads,
    replace_node,
    short,
    simplify,
    statement_blocks,
    stored_names,
    subscript_stores_to,
)

# ---------------------------------------------------------------------------------------------------
# load loop-invariant tiles once: hoist them, or cache a whole inner loop nest's tiles in SBUF


@dataclass
class _Invariant:
    call: ast.Call
    outer: ast.For
    path: list[ast.For]
    prefix: dict[str, ast.expr]  # scalar names assigned along the path, by their defining expression


def _range_count(kernel: Kernel, loop: ast.For) -> ast.expr | None:
    it = loop.iter
    if (isinstance(it, ast.Call) and dotted(it.func) in {f"{kernel.nl}.affine_range", f"{kernel.nl}.sequential_range", "range"}
            and len(it.args) == 1 and not it.keywords and isinstance(loop.target, ast.Name)):
        return it.args[0]
    return None


def _invariant_loads(kernel: Kernel) -> list[_Invariant]:
    found: list[_Invariant] = []
    if kernel.fn is None:
        return found
    loops = [n for n in ast.walk(kernel.fn) if isinstance(n, ast.For)]
    for outer in loops:
        if _range_count(kernel, outer) is None:
            continue
        variant = stored_names(outer)  # everything written in the loop, its index included

        def scan(body: list[ast.stmt], path: list[ast.For], prefix: dict[str, ast.expr], allowed: set[str],
                 outer: ast.For = outer, variant: set[str] = variant) -> None:
            prefix, allowed = dict(prefix), set(allowed)
            for stmt in body:
                if isinstance(stmt, ast.For):
                    count = _range_count(kernel, stmt)
                    if count is not None and not (loaded_names(count) & variant):
                        scan(stmt.body, path + [stmt], prefix, allowed | {stmt.target.id})
                    continue
                if (path and isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], ast.Name)
                        and assignments_to(kernel.fn, stmt.targets[0].id) == 1
                        and not any(isinstance(n, ast.Call) for n in ast.walk(stmt.value))
                        and loaded_names(stmt.value) & variant <= allowed):
                    # An index computed from the inner loops' indices (n0 = n * tile_n): copied into the cache nest.
                    prefix[stmt.targets[0].id] = stmt.value
                    allowed.add(stmt.targets[0].id)
                    continue
                for node in ast.walk(stmt):
                    if (kernel.is_nl(node, "load") and len(node.args) == 1 and isinstance(node.args[0], ast.Subscript)
                            and dotted(node.args[0].value) in kernel.params
                            and loaded_names(node) & variant <= allowed):
                        found.append(_Invariant(node, outer, path, prefix))

        scan(outer.body, [], {}, set())
    return found


def _substitute(expr: ast.expr, values: dict[str, ast.expr]) -> ast.expr:
    class Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:  # noqa: N802 (ast API)
            if isinstance(node.ctx, ast.Load) and node.id in values:
                return copy.deepcopy(values[node.id])
            return node

    return Sub().visit(copy.deepcopy(expr))


def _tile_extents(inv: _Invariant) -> list[ast.expr] | None:
    """Extent of each sliced dimension, as an expression of loop-invariant names only."""
    source = inv.call.args[0]
    elements = source.slice.elts if isinstance(source.slice, ast.Tuple) else [source.slice]
    zero = {loop.target.id: ast.Constant(0) for loop in inv.path}
    resolved: dict[str, ast.expr] = dict(zero)
    for name, expr in inv.prefix.items():
        resolved[name] = _substitute(expr, resolved)
    extents = []
    for element in elements:
        if isinstance(element, ast.Slice):
            if element.lower is None or element.upper is None or element.step is not None:
                return None
            extents.append(simplify(ast.BinOp(left=_substitute(element.upper, resolved), op=ast.Sub(),
                                              right=_substitute(element.lower, resolved))))
    return extents if len(extents) == 2 else None


def visit_hoist_loads(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for inv in _invariant_loads(kernel):
        extents = _tile_extents(inv) if inv.path else []
        if extents is None:
            continue
        source_name = dotted(inv.call.args[0].value)
        if inv.path:
            loops = " x ".join(f"`{loop.target.id}`" for loop in inv.path)
            what = (f"load of `{short(inv.call.args[0])}` (line {line_of(inv.call)}) repeats for every "
                    f"`{inv.outer.target.id}`: cache its tiles over {loops} in SBUF before that loop")
        else:
            what = f"load of `{short(inv.call.args[0])}` (line {line_of(inv.call)}) moves before the `{inv.outer.target.id}` loop"
        if len(sites) == target:
            _hoist(kernel, inv, extents, source_name)
        sites.append(Site(what, line_of(inv.call)))
    return sites


def _hoist(kernel: Kernel, inv: _Invariant, extents: list[ast.expr], source_name: str) -> None:
    block, index = kernel.block_of(inv.outer)
    if not inv.path:
        name = kernel.fresh_name(f"{source_name}_tile")
        hoisted = ast.Assign(targets=[ast.Name(name, ast.Store())], value=inv.call)
        replace_node(kernel, inv.call, ast.Name(name, ast.Load()))
        block.insert(index, hoisted)
        return
    partitions, free = extents
    counts = [_range_count(kernel, loop) for loop in inv.path]
    total: ast.expr = copy.deepcopy(counts[0])
    for count in counts[1:]:
        total = ast.BinOp(left=total, op=ast.Mult(), right=copy.deepcopy(count))
    flat: ast.expr = ast.Name(inv.path[0].target.id, ast.Load())
    for loop, count in zip(inv.path[1:], counts[1:], strict=True):
        flat = ast.BinOp(left=ast.BinOp(left=flat, op=ast.Mult(), right=copy.deepcopy(count)), op=ast.Add(),
                         right=ast.Name(loop.target.id, ast.Load()))

    def window() -> ast.Subscript:
        lower = ast.BinOp(left=copy.deepcopy(flat), op=ast.Mult(), right=copy.deepcopy(free))
        upper = ast.BinOp(left=ast.BinOp(left=copy.deepcopy(flat), op=ast.Add(), right=ast.Constant(1)),
                          op=ast.Mult(), right=copy.deepcopy(free))
        return ast.Subscript(value=ast.Name(cache, ast.Load()),
                             slice=ast.Tuple(elts=[ast.Slice(), ast.Slice(lower=lower, upper=upper)], ctx=ast.Load()),
                             ctx=ast.Load())

    cache = kernel.fresh_name(f"{source_name}_cache")
    dtype = ast.Attribute(value=ast.Name(source_name, ast.Load()), attr="dtype", ctx=ast.Load())
    alloc = ast.Assign(targets=[ast.Name(cache, ast.Store())], value=ast.Call(
        func=kernel.nl_attr("ndarray"),
        args=[ast.Tuple(elts=[copy.deepcopy(partitions), ast.BinOp(left=total, op=ast.Mult(), right=copy.deepcopy(free))],
                        ctx=ast.Load())],
        keywords=[ast.keyword("dtype", dtype), ast.keyword("buffer", kernel.nl_attr("sbuf"))]))
    fill_target = window()
    fill_target.ctx = ast.Store()
    body: list[ast.stmt] = [ast.Assign(targets=[fill_target], value=copy.deepcopy(inv.call))]
    needed = loaded_names(inv.call)
    for depth in range(len(inv.path) - 1, -1, -1):
        loop = inv.path[depth]
        assigns = [ast.Assign(targets=[ast.Name(n, ast.Store())], value=copy.deepcopy(e))
                   for n, e in inv.prefix.items() if n in needed and _defined_in(n, loop)]
        body = [ast.For(target=ast.Name(loop.target.id, ast.Store()), iter=copy.deepcopy(loop.iter),
                        body=assigns + body, orelse=[])]
    replace_node(kernel, inv.call, window())
    block[index:index] = [alloc] + body


def _defined_in(name: str, loop: ast.For) -> bool:
    return any(isinstance(s, ast.Assign) and dotted(s.targets[0]) == name for s in loop.body)


# ---------------------------------------------------------------------------------------------------
# reuse a tile that is already loaded instead of loading the same region again


def visit_reuse_loads(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    if kernel.fn is None:
        return sites
    for block in statement_blocks(kernel.fn):
        for i, first in enumerate(block):
            if not (isinstance(first, ast.Assign) and len(first.targets) == 1 and kernel.is_nl(first.value, "load")):
                continue
            for j in range(i + 1, len(block)):
                second = block[j]
                between = block[i + 1:j]
                if any(kernel.is_nl(n, "store") for s in between for n in ast.walk(s)):
                    break
                if not (isinstance(second, ast.Assign) and len(second.targets) == 1
                        and ast.dump(second.value) == ast.dump(first.value)):
                    continue
                if stored_names(between) & loaded_names(first.value):
                    break
                plan = _reuse_plan(kernel, first.targets[0], second.targets[0], between)
                if plan is None:
                    continue
                if len(sites) == target:
                    rename_loads(kernel.fn, *plan)
                    remove_statement(kernel, second)
                sites.append(Site(f"line {line_of(second)} loads `{short(second.value.args[0])}` again; reuse the tile "
                                  f"loaded at line {line_of(first)}", line_of(second)))
                break
    return sites


def _reuse_plan(kernel: Kernel, first: ast.expr, second: ast.expr, between: list[ast.stmt]) -> tuple[str, str] | None:
    fn = kernel.fn
    if isinstance(first, ast.Name) and isinstance(second, ast.Name):
        if assignments_to(fn, first.id) == 1 and assignments_to(fn, second.id) == 1:
            return second.id, first.id
        return None
    if isinstance(first, ast.Subscript) and isinstance(second, ast.Subscript):
        a, b = dotted(first.value), dotted(second.value)
        if not a or not b or a == b or ast.dump(first.slice) != ast.dump(second.slice):
            return None
        if subscript_stores_to(fn, a) != 1 or subscript_stores_to(fn, b) != 1:
            return None
        shapes = {}
        for n in ast.walk(fn):
            if (isinstance(n, ast.Assign) and len(n.targets) == 1 and dotted(n.targets[0]) in (a, b)
                    and kernel.is_nl(n.value, "ndarray") and n.value.args):
                shapes[dotted(n.targets[0])] = ast.dump(n.value.args[0])
        if shapes.get(a) is None or shapes.get(a) != shapes.get(b):
            return None
        return b, a
    return None
