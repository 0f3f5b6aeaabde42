"""Rewrites of how a Triton kernel touches memory.

    visit_masks  every unmasked `tl.load` / `tl.store` whose offsets come from one 1-D `tl.arange` gets
                 `mask=<offs> < <bound>` (loads also `other=0.0`); the bound is the one the kernel already
                 compares those offsets with, or its only size-like scalar parameter
    visit_hints  `offs = pid * BLOCK + tl.arange(0, BLOCK)` becomes
                 `tl.max_contiguous(tl.multiple_of(..., BLOCK), BLOCK)`: the compiler may then issue wide,
                 aligned (vectorized) loads and stores
"""

from __future__ import annotations

import ast

from engine.agents.rewrites import Site
from engine.platforms.triton.rewrites.source import (
    SIZE_NAMES,
    JitKernel,
    arange_offsets,
    assignments,
    is_block_name,
    jit_kernels,
    keyword,
    line_of,
    module_names,
    tl_call,
)

_EXPAND_DEPTH = 4  # how many `name = expr` steps we follow from a pointer back to its offsets


def _bound(kernel: JitKernel, offs: str) -> ast.expr | None:
    """What `offs` must stay below: an existing `offs < X` over parameters only, else the only scalar
    parameter named like a size (SIZE_NAMES)."""
    params = set(kernel.params())
    for node in ast.walk(kernel.fn):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Lt)
                and isinstance(node.left, ast.Name) and node.left.id == offs):
            bound = node.comparators[0]
            if all(n.id in params for n in ast.walk(bound) if isinstance(n, ast.Name)):
                return bound
    sizes = [p for p in kernel.scalar_params() if p in SIZE_NAMES]
    return ast.Name(sizes[0], ast.Load()) if len(sizes) == 1 else None


def _offsets_in(pointer: ast.expr, kernel: JitKernel, offsets: set[str]) -> tuple[set[str], bool]:
    """The arange offsets a pointer expression is built from (following local assignments), and whether
    any of them is indexed (`offs[:, None]`: a 2-D tile, which a 1-D mask would not fit)."""
    assigned = assignments(kernel.fn)
    found: set[str] = set()
    indexed = False
    frontier, seen = [pointer], set()
    for _ in range(_EXPAND_DEPTH):
        following = []
        for expr in frontier:
            for node in ast.walk(expr):
                if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in offsets:
                    indexed = True
                if not isinstance(node, ast.Name) or node.id in seen:
                    continue
                seen.add(node.id)
                if node.id in offsets:
                    found.add(node.id)
                elif len(assigned.get(node.id, [])) == 1:
                    following.append(assigned[node.id][0].value)
        frontier = following
    return found, indexed


def _unmasked_accesses(kernel: JitKernel) -> list[tuple[ast.Call, str, ast.expr]]:
    """(load/store call, offsets name, bound) for every access we know how to mask: offsets over a block
    (`tl.arange(0, BLOCK...)`; an extent named otherwise, `tl.arange(0, HEAD_DIM)`, is sized to its
    dimension and needs no mask)."""
    offsets = {name for name, stmt in arange_offsets(kernel.fn).items()
               if any(tl_call(n, "arange") and isinstance(n, ast.Call) and len(n.args) == 2
                      and isinstance(n.args[1], ast.Name) and is_block_name(n.args[1].id)
                      for n in ast.walk(stmt.value))}
    out = []
    for node in ast.walk(kernel.fn):
        is_load, is_store = tl_call(node, "load"), tl_call(node, "store")
        if not (is_load or is_store):
            continue
        assert isinstance(node, ast.Call)
        mask_position = 1 if is_load else 2  # tl.load(ptr, mask, other), tl.store(ptr, value, mask)
        if not node.args or keyword(node, "mask") is not None or len(node.args) > mask_position:
            continue
        found, indexed = _offsets_in(node.args[0], kernel, offsets)
        if len(found) != 1 or indexed:
            continue
        offs = found.pop()
        bound = _bound(kernel, offs)
        if bound is not None:
            out.append((node, offs, bound))
    return sorted(out, key=lambda row: line_of(row[0]))


def visit_masks(tree: ast.Module, target: int | None) -> list[Site]:
    sites = []
    for kernel in jit_kernels(tree):
        accesses = _unmasked_accesses(kernel)
        if not accesses:
            continue
        bounds = sorted({f"{offs} < {ast.unparse(bound)}" for _, offs, bound in accesses})
        sites.append(Site(f"mask the {len(accesses)} unmasked loads/stores of `{kernel.name}` with "
                          f"{', '.join(bounds)}", line_of(kernel.fn)))
        if target == len(sites) - 1:
            for call, offs, bound in accesses:
                mask = ast.Compare(ast.Name(offs, ast.Load()), [ast.Lt()], [bound])
                call.keywords.append(ast.keyword("mask", mask))
                if tl_call(call, "load") and keyword(call, "other") is None:
                    call.keywords.append(ast.keyword("other", ast.Constant(0.0)))
    return sites


def _block_of(value: ast.expr) -> ast.expr | None:
    """B when `value` is `tl.arange(0, B)` or `X * B + tl.arange(0, B)` (either order): offsets that
    start at a multiple of B and run contiguously for B elements."""
    def arange_end(node: ast.expr) -> ast.expr | None:
        if tl_call(node, "arange") and isinstance(node, ast.Call) and len(node.args) == 2:
            start = node.args[0]
            if isinstance(start, ast.Constant) and start.value == 0:
                return node.args[1]
        return None

    end = arange_end(value)
    if end is not None:
        return end
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return None
    for base, offs in ((value.left, value.right), (value.right, value.left)):
        end = arange_end(offs)
        if end is None or not (isinstance(base, ast.BinOp) and isinstance(base.op, ast.Mult)):
            continue
        if ast.dump(end) in (ast.dump(base.left), ast.dump(base.right)):
            return end
    return None


def visit_hints(tree: ast.Module, target: int | None) -> list[Site]:
    sites: list[Site] = []
    if "tl" not in module_names(tree):  # the hint calls we write name `tl`
        return sites
    for kernel in jit_kernels(tree):
        hinted = {n.args[0].id for n in ast.walk(kernel.fn)
                  if (tl_call(n, "multiple_of") or tl_call(n, "max_contiguous"))
                  and isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Name)}
        for name, stmt in sorted(arange_offsets(kernel.fn).items(), key=lambda item: line_of(item[1])):
            block = _block_of(stmt.value)
            if block is None or name in hinted or any(tl_call(n, "multiple_of") for n in ast.walk(stmt.value)):
                continue
            sites.append(Site(f"mark `{name}` in `{kernel.name}` as {ast.unparse(block)}-aligned and contiguous",
                              line_of(stmt)))
            if target == len(sites) - 1:
                tl = ast.Name("tl", ast.Load())
                multiple = ast.Call(ast.Attribute(tl, "multiple_of", ast.Load()), [stmt.value, block], [])
                stmt.value = ast.Call(ast.Attribute(tl, "max_contiguous", ast.Load()), [multiple, block], [])
    return sites
