"""Rewrites of the tiling and the loop order.

    visit_larger_tiles, visit_smaller_tiles  the free-dimension limit given to the tiling helper, doubled
                                             or halved (within FREE_TILE_MIN..FREE_TILE_MAX)
    visit_interchange                        a perfect nest of two independent loops, swapped
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from engine.agents.rewrites import Site, dotted
from engine.platforms.nki.rewrites.kernel import (
    Kernel,
    line_of,
    loaded_names,
    stored_names,
    walk_kernel,
)

FREE_TILE_MAX = 8192  # elements per partition we let a free-dimension tile limit grow to
FREE_TILE_MIN = 128  # and shrink to
MOVING_FMAX = 512  # nl.tile_size.gemm_moving_fmax: the largest moving free size of one matmul


# ---------------------------------------------------------------------------------------------------
# tile size changes: the free-dimension limit given to the tiling helper


def _tile_limits(kernel: Kernel) -> Iterator[tuple[ast.Call, int, int]]:
    """Calls of a tiling helper `f(extent, limit)` whose limit is a free-dimension size we may change:
    an integer literal (divisor 0), or the matmul moving-tile maximum, possibly already divided
    (`nl.tile_size.gemm_moving_fmax // d`, divisor d), which may only shrink: it bounds a PSUM tile."""
    moving = f"{kernel.nl}.tile_size.gemm_moving_fmax"
    for node in walk_kernel(kernel):
        if not (isinstance(node, ast.Call) and len(node.args) == 2 and "tile" in dotted(node.func).lower()):
            continue
        limit = node.args[1]
        if isinstance(limit, ast.Constant) and isinstance(limit.value, int) and not isinstance(limit.value, bool):
            yield node, limit.value, 0
        elif dotted(limit) == moving:
            yield node, MOVING_FMAX, 1
        elif (isinstance(limit, ast.BinOp) and isinstance(limit.op, ast.FloorDiv) and dotted(limit.left) == moving
              and isinstance(limit.right, ast.Constant) and isinstance(limit.right.value, int) and limit.right.value > 0):
            yield node, MOVING_FMAX // limit.right.value, limit.right.value


def _visit_tile_limit(tree: ast.Module, target: int | None, grow: bool) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for call, limit, divisor in list(_tile_limits(kernel)):
        if grow and divisor:
            continue
        values = []
        value = limit
        while True:
            value = value * 2 if grow else value // 2
            if not FREE_TILE_MIN <= value <= FREE_TILE_MAX:
                break
            values.append(value)
        for value in values:
            verb = "raise" if grow else "lower"
            sites.append(Site(f"{verb} the free-dimension tile limit `{ast.unparse(call)}` to {value} "
                              f"(line {line_of(call)})", line_of(call)))
            if len(sites) - 1 == target:
                if divisor:
                    moving = ast.Attribute(value=kernel.nl_attr("tile_size"), attr="gemm_moving_fmax", ctx=ast.Load())
                    call.args[1] = ast.BinOp(left=moving, op=ast.FloorDiv(), right=ast.Constant(MOVING_FMAX // value))
                else:
                    call.args[1] = ast.Constant(value)
    return sites


def visit_larger_tiles(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_tile_limit(tree, target, grow=True)


def visit_smaller_tiles(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_tile_limit(tree, target, grow=False)


# ---------------------------------------------------------------------------------------------------
# interchange a perfect nest of two independent loops


def visit_interchange(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for outer in list(walk_kernel(kernel)):
        if not (isinstance(outer, ast.For) and len(outer.body) == 1 and isinstance(outer.body[0], ast.For)):
            continue
        inner = outer.body[0]
        affine = f"{kernel.nl}.affine_range"
        if not (isinstance(outer.iter, ast.Call) and dotted(outer.iter.func) == affine
                and isinstance(inner.iter, ast.Call) and dotted(inner.iter.func) == affine):
            continue
        if loaded_names(inner.iter) & stored_names(outer.target) or outer.orelse or inner.orelse:
            continue
        if len(sites) == target:
            outer.target, inner.target = inner.target, outer.target
            outer.iter, inner.iter = inner.iter, outer.iter
        sites.append(Site(f"swap the `{dotted(outer.target)}` and `{dotted(inner.target)}` loops (line {line_of(outer)})",
                          line_of(outer)))
    return sites
