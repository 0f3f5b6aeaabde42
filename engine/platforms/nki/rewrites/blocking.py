"""Share the loads of an operand between several iterations of an outer loop (unroll-and-jam).

    visit_share_across_blocks  `for m in affine_range(R)` whose inner loops load tiles that do not depend
                               on `m` (a matmul's rhs, reloaded for every block of output rows) becomes a
                               loop over groups of B blocks: each statement that depends on `m` is written
                               B times (its names suffixed per block), each statement that does not is
                               written once and its tile serves all B blocks; a tail loop takes the
                               R % B blocks left over

Why it is correct: the iterations of an `affine_range` loop are independent, so interleaving B of them
statement by statement (keeping each one's order) computes the same values, provided the copies do not
share a name that one of them rebinds (every name bound in the body from `m`-dependent data gets a copy
per block) and a statement written once computes what every copy would have computed (it reads nothing
that depends on `m`, and nothing that depends on `m` writes what it reads).
"""

from __future__ import annotations

import ast
import copy

from engine.agents.rewrites import Site, dotted
from engine.platforms.nki.rewrites.kernel import (
    Kernel,
    line_of,
    loaded_names,
    stored_names,
    walk_kernel,
)

FACTORS = (2,)  # blocks per group: at full NKIBench shapes 2 already leaves matmul Tensor-Engine-bound (perf-3)
WRITE_KEYWORDS = {"dst", "out", "reduce_res"}  # arguments an instruction writes into
SIMPLE = (ast.Assign, ast.AugAssign, ast.Expr, ast.Assert, ast.Pass)


def _writes(stmt: ast.stmt) -> set[str]:
    """Names a simple statement binds or writes into (a subscript store, `+=`, a `dst=` argument)."""
    out = stored_names(stmt)
    for node in ast.walk(stmt):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            out.add(dotted(node.value))
        elif isinstance(node, ast.AugAssign):
            target = node.target.value if isinstance(node.target, ast.Subscript) else node.target
            out.add(dotted(target))
        elif isinstance(node, ast.keyword) and node.arg in WRITE_KEYWORDS:
            target = node.value.value if isinstance(node.value, ast.Subscript) else node.value
            out.add(dotted(target))
    out.discard("")
    return out


def _simple_statements(body: list[ast.stmt]) -> list[ast.stmt] | None:
    """Every simple statement of a loop body and its nested `for` loops; None if it has anything else."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.For):
            if stmt.orelse or not isinstance(stmt.target, ast.Name):
                return None
            inner = _simple_statements(stmt.body)
            if inner is None:
                return None
            out += inner
        elif isinstance(stmt, SIMPLE):
            out.append(stmt)
        else:
            return None
    return out


def _variant_names(loop: ast.For) -> set[str] | None:
    """Names whose value depends on the loop's index (its target, and what is computed from it)."""
    statements = _simple_statements(loop.body)
    if statements is None:
        return None
    loops = [n for n in ast.walk(loop) if isinstance(n, ast.For) and n is not loop]
    variant = {loop.target.id}
    changed = True
    while changed:
        changed = False
        for stmt in statements:
            if loaded_names(stmt) & variant or _writes(stmt) & variant:
                new = _writes(stmt) - variant
                if new:
                    variant |= new
                    changed = True
        for inner in loops:
            if loaded_names(inner.iter) & variant and inner.target.id not in variant:
                variant.add(inner.target.id)
                changed = True
    return variant


def _shared_loads(kernel: Kernel, loop: ast.For, variant: set[str]) -> list[ast.Call]:
    """Loads of kernel inputs inside an inner loop that do not depend on the outer index: what sharing saves."""
    found = []
    for inner in (n for n in ast.walk(loop) if isinstance(n, ast.For) and n is not loop):
        if loaded_names(inner.iter) & variant:
            continue
        for node in ast.walk(inner):
            if (kernel.is_nl(node, "load") and node.args and isinstance(node.args[0], ast.Subscript)
                    and dotted(node.args[0].value) in kernel.params and not loaded_names(node) & variant):
                found.append(node)
    return found


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:  # noqa: N802 (ast API)
        if node.id in self.names:
            return ast.copy_location(ast.Name(self.names[node.id], node.ctx), node)
        return node


def _jam(body: list[ast.stmt], variant: set[str], renames: list[dict[str, str]]) -> list[ast.stmt]:
    """The body with each statement that depends on the index written once per block (renamed), the others once."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.For) and not loaded_names(stmt.iter) & variant:
            if stmt.target.id in variant:  # cannot happen for an invariant header, but stay safe
                out += [_Rename(r).visit(copy.deepcopy(stmt)) for r in renames]
                continue
            loop = copy.copy(stmt)
            loop.body = _jam(stmt.body, variant, renames)
            out.append(loop)
        elif isinstance(stmt, ast.For) or loaded_names(stmt) & variant or _writes(stmt) & variant:
            out += [_Rename(r).visit(copy.deepcopy(stmt)) for r in renames]
        else:
            out.append(copy.deepcopy(stmt))
    return out


def _bound_inside(loop: ast.For) -> set[str]:
    return stored_names(loop.body) | {n.target.id for n in ast.walk(loop) if isinstance(n, ast.For)}


def _engines_chain(kernel: Kernel, loop: ast.For) -> bool:
    """The body runs a matmul and a Vector/Scalar Engine instruction on its result's data: one iteration's
    engines wait for each other, which a second, independent iteration beside it can fill."""
    calls = [dotted(n.func) for n in ast.walk(loop) if isinstance(n, ast.Call)]
    direct = [dotted(n.func) for s in loop.body if not isinstance(s, ast.For) for n in ast.walk(s)
              if isinstance(n, ast.Call)]
    matmul = f"{kernel.nisa}.nc_matmul" in calls
    compute = any(c.startswith(f"{kernel.nl}.") and c.rsplit(".", 1)[1] in {"exp", "max", "sum", "multiply"}
                  or c == f"{kernel.nisa}.activation" for c in direct)
    return matmul and compute


def _already_grouped(loop: ast.For) -> bool:
    """The loop's body starts `i_0 = group * k + 0`: this rewrite made it."""
    first = loop.body[0] if loop.body else None
    value = first.value if isinstance(first, ast.Assign) else None
    return (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add) and isinstance(value.left, ast.BinOp)
            and isinstance(value.left.op, ast.Mult) and dotted(value.left.left) == dotted(loop.target))


def _candidates(kernel: Kernel, shared_loads: bool = True) -> list[tuple[ast.For, set[str], list[ast.Call]]]:
    out = []
    affine = f"{kernel.nl}.affine_range"
    for loop in walk_kernel(kernel):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) and not loop.orelse
                and isinstance(loop.iter, ast.Call) and dotted(loop.iter.func) == affine
                and len(loop.iter.args) == 1 and not loop.iter.keywords):
            continue
        if _already_grouped(loop) or isinstance(loop.iter.args[0], ast.BinOp) and isinstance(loop.iter.args[0].op, ast.Mod):
            continue  # a group this rewrite made (grouping it again only grows the group), or its tail loop
        variant = _variant_names(loop)
        if variant is None:
            continue
        shared = _shared_loads(kernel, loop, variant)
        if shared_loads and not shared:
            continue
        if not shared_loads and (shared or not _engines_chain(kernel, loop)):
            continue
        # A name bound in the body and read after the loop would see only one block's value.
        inside = _bound_inside(loop) & variant
        after = set()
        for node in walk_kernel(kernel):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in inside:
                if not any(node is n for n in ast.walk(loop)):
                    after.add(node.id)
        if after:
            continue
        out.append((loop, variant, shared))
    return out


def visit_share_across_blocks(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for loop, variant, shared in _candidates(kernel):
        for factor in FACTORS:
            if len(sites) == target:
                _apply(kernel, loop, variant, factor)
            loads = ", ".join(sorted({f"`{dotted(c.args[0].value)}`" for c in shared}))
            sites.append(Site(f"the `{loop.target.id}` loop (line {line_of(loop)}) in groups of {factor}: each "
                              f"tile of {loads} loaded once serves {factor} iterations", line_of(loop)))
    return sites


def visit_interleave_iterations(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    candidates = _candidates(kernel, shared_loads=False)
    loops = [loop for loop, _, _ in candidates]
    for loop, variant, _ in candidates:
        if any(other is not loop and any(n is loop for n in ast.walk(other)) for other in loops):
            continue  # an inner loop of another site: interleave the outer one, whose iterations hold the chain
        if len(sites) == target:
            _apply(kernel, loop, variant, 2)
        sites.append(Site(f"the `{loop.target.id}` loop (line {line_of(loop)}) two iterations at a time, interleaved: "
                          "one's matmuls run while the other's softmax/elementwise work does", line_of(loop)))
    return sites


def _apply(kernel: Kernel, loop: ast.For, variant: set[str], factor: int) -> None:
    index = loop.target.id
    count = loop.iter.args[0]
    group = kernel.fresh_name(f"{index}_group")
    bound = _bound_inside(loop) & variant
    renames = []
    taken = {n.id for n in ast.walk(kernel.tree) if isinstance(n, ast.Name)}
    for c in range(factor):
        names = {}
        for name in sorted(bound | {index}):
            new, k = f"{name}_{c}", 1
            while new in taken:
                k += 1
                new = f"{name}_{c}_{k}"
            taken.add(new)
            names[name] = new
        renames.append(names)
    starts = [ast.Assign(targets=[ast.Name(r[index], ast.Store())],
                         value=ast.BinOp(left=ast.BinOp(left=ast.Name(group, ast.Load()), op=ast.Mult(),
                                                        right=ast.Constant(factor)),
                                         op=ast.Add(), right=ast.Constant(c)))
              for c, r in enumerate(renames)]
    grouped = ast.For(
        target=ast.Name(group, ast.Store()),
        iter=ast.Call(func=copy.deepcopy(loop.iter.func),
                      args=[ast.BinOp(left=copy.deepcopy(count), op=ast.FloorDiv(), right=ast.Constant(factor))],
                      keywords=[]),
        body=starts + _jam(loop.body, variant, renames), orelse=[])
    # The R % factor blocks left over run as before, their index offset past the groups.
    tail_index = kernel.fresh_name(f"{index}_tail")
    offset = ast.BinOp(left=ast.BinOp(left=copy.deepcopy(count), op=ast.FloorDiv(), right=ast.Constant(factor)),
                       op=ast.Mult(), right=ast.Constant(factor))
    tail = ast.For(
        target=ast.Name(tail_index, ast.Store()),
        iter=ast.Call(func=copy.deepcopy(loop.iter.func),
                      args=[ast.BinOp(left=copy.deepcopy(count), op=ast.Mod(), right=ast.Constant(factor))],
                      keywords=[]),
        body=[ast.Assign(targets=[ast.Name(index, ast.Store())],
                         value=ast.BinOp(left=offset, op=ast.Add(), right=ast.Name(tail_index, ast.Load())))]
        + copy.deepcopy(loop.body), orelse=[])
    block, position = kernel.block_of(loop)
    block[position:position + 1] = [grouped, tail]
