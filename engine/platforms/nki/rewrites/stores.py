"""Rewrites that make DMAs fewer and larger.

    visit_batch_stores  a loop that stores one column block of an output row per iteration writes the blocks
                        into one SBUF row tile instead, stored with a single DMA after the loop

Why it is correct: the loop's iterations store disjoint column blocks `n0:n0 + t` (n0 = n * t) of the same
rows, so the row tile holds exactly what the stores wrote, and one store of its `0:count * t` columns
writes the same bytes. The stored value goes through the same assignment (a copy) into the row tile.
Whether the row fits is known only when the kernel is traced, so the batched loop is guarded by its width
(a compile-time value) and the original loop kept for rows wider than ROW_LIMIT.
"""

from __future__ import annotations

import ast
import copy

from engine.agents.rewrites import Site, dotted
from engine.platforms.nki.rewrites.kernel import (
    Kernel,
    line_of,
    loaded_names,
    short,
    simplify,
    stored_names,
    walk_kernel,
)

ROW_LIMIT = 16384  # elements per partition of one row tile: 64 KiB of fp32, a third of a trn1 partition


def _column_index(loop: ast.For) -> tuple[str, ast.expr] | None:
    """(`n0`, `t`) when the loop body starts by binding `n0 = n * t` for the loop index `n`."""
    first = loop.body[0] if loop.body else None
    if not (isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(first.targets[0], ast.Name)):
        return None
    value = first.value
    if (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult) and isinstance(value.left, ast.Name)
            and value.left.id == loop.target.id and not loaded_names(value.right) & stored_names(loop)):
        return first.targets[0].id, value.right
    return None


def _is_block(element: ast.expr, start: str, size: ast.expr) -> bool:
    """`start:start + size`."""
    return (isinstance(element, ast.Slice) and element.step is None and isinstance(element.lower, ast.Name)
            and element.lower.id == start and isinstance(element.upper, ast.BinOp)
            and isinstance(element.upper.op, ast.Add) and dotted(element.upper.left) == start
            and ast.dump(element.upper.right) == ast.dump(size))


def _extent(element: ast.expr) -> ast.expr | None:
    if isinstance(element, ast.Slice) and element.lower is not None and element.upper is not None \
            and element.step is None:
        return simplify(ast.BinOp(left=copy.deepcopy(element.upper), op=ast.Sub(), right=copy.deepcopy(element.lower)))
    return None


def _batchable(kernel: Kernel, stmt: ast.stmt, start: str, size: ast.expr, variant: set[str]) -> bool:
    """`nl.store(out[..., rows, start:start + size], value=...)` with the rows the same in every iteration."""
    if not (isinstance(stmt, ast.Expr) and kernel.is_nl(stmt.value, "store")):
        return False
    call = stmt.value
    if not (call.args and isinstance(call.args[0], ast.Subscript) and isinstance(call.args[0].value, ast.Name)
            and len(call.args) + len(call.keywords) == 2 and all(k.arg == "value" for k in call.keywords)):
        return False
    region = call.args[0]
    elements = region.slice.elts if isinstance(region.slice, ast.Tuple) else [region.slice]
    return (len(elements) >= 2 and _is_block(elements[-1], start, size) and _extent(elements[-2]) is not None
            and not any(loaded_names(e) & variant for e in elements[:-1]))


def _sites(kernel: Kernel) -> list[tuple[ast.For, list[ast.Expr], str, ast.expr]]:
    found = []
    affine = f"{kernel.nl}.affine_range"
    for loop in walk_kernel(kernel):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and isinstance(loop.iter, ast.Call)
                and dotted(loop.iter.func) == affine and len(loop.iter.args) == 1 and not loop.orelse):
            continue
        column = _column_index(loop)
        if column is None:
            continue
        start, size = column
        variant = stored_names(loop) | {loop.target.id}
        # The stores ending the body (one per block of rows the iteration writes; no other store in the loop).
        trailing = []
        for stmt in reversed(loop.body):
            if not (isinstance(stmt, ast.Expr) and kernel.is_nl(stmt.value, "store")):
                break
            trailing.append(stmt)
        stores = [n for n in ast.walk(loop) if kernel.is_nl(n, "store")]
        if not trailing or len(stores) != len(trailing):
            continue
        if all(_batchable(kernel, stmt, start, size, variant) for stmt in trailing):
            found.append((loop, trailing[::-1], start, size))
    return found


def visit_batch_stores(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for loop, stores, start, size in _sites(kernel):
        if len(sites) == target:
            _guarded(kernel, loop, stores, start, size)
        sites.append(Site(f"`{short(stores[0].value, 60)}` (line {line_of(stores[0])}) stores one block per "
                          f"`{loop.target.id}`: gather the row in SBUF and store it with one DMA after the loop",
                          line_of(stores[0])))
    return sites


def _guarded(kernel: Kernel, loop: ast.For, stores: list[ast.Expr], start: str, size: ast.expr) -> None:
    """The batched loop under `if <row width> <= ROW_LIMIT:` (shapes are compile-time values), the loop as it
    was otherwise: a row too wide for SBUF (rope's 262,144 columns) keeps its per-block stores."""
    original = copy.deepcopy(loop)
    width = ast.BinOp(left=copy.deepcopy(loop.iter.args[0]), op=ast.Mult(), right=copy.deepcopy(size))
    block_list, position = kernel.block_of(loop)
    for store in stores:
        _apply(kernel, loop, store, start, size)
    span = 2 * len(stores) + 1  # each store added its row tile before the loop and its store after it
    test = ast.Compare(left=width, ops=[ast.LtE()], comparators=[ast.Constant(ROW_LIMIT)])
    block_list[position:position + span] = [ast.If(test=test, body=block_list[position:position + span],
                                                   orelse=[original])]


def _apply(kernel: Kernel, loop: ast.For, store: ast.Expr, start: str, size: ast.expr) -> None:
    call = store.value
    region = call.args[0]
    value = call.args[1] if len(call.args) == 2 else call.keywords[0].value
    output = region.value.id
    elements = list(region.slice.elts) if isinstance(region.slice, ast.Tuple) else [region.slice]
    count = loop.iter.args[0]
    width = ast.BinOp(left=copy.deepcopy(count), op=ast.Mult(), right=copy.deepcopy(size))
    row = kernel.fresh_name(f"{output}_row")
    alloc = ast.Assign(targets=[ast.Name(row, ast.Store())], value=ast.Call(
        func=kernel.nl_attr("ndarray"),
        args=[ast.Tuple(elts=[_extent(elements[-2]), copy.deepcopy(width)], ctx=ast.Load())],
        keywords=[ast.keyword("dtype", ast.Attribute(value=ast.Name(output, ast.Load()), attr="dtype",
                                                     ctx=ast.Load())),
                  ast.keyword("buffer", kernel.nl_attr("sbuf"))]))
    block = copy.deepcopy(elements[-1])
    fill = ast.Assign(targets=[ast.Subscript(value=ast.Name(row, ast.Load()),
                                             slice=ast.Tuple(elts=[ast.Slice(), block], ctx=ast.Load()),
                                             ctx=ast.Store())], value=value)
    loop.body[loop.body.index(store)] = ast.copy_location(fill, store)
    whole = elements[:-1] + [ast.Slice(lower=ast.Constant(0), upper=width)]
    final = ast.Expr(value=ast.Call(
        func=copy.deepcopy(call.func),
        args=[ast.Subscript(value=ast.Name(output, ast.Load()), slice=ast.Tuple(elts=whole, ctx=ast.Load()),
                            ctx=ast.Load())],
        keywords=[ast.keyword("value", ast.Name(row, ast.Load()))]))
    block_list, position = kernel.block_of(loop)
    block_list[position:position + 1] = [alloc, loop, final]
