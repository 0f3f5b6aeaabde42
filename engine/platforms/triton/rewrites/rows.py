"""rows_per_program: a row-wise kernel that handles one row per program handles ROW_BLOCK rows.

A kernel launched with one program per row (RMSNorm over a 128-wide hidden dimension: 520,128 tiny
programs) spends its time starting programs, not moving bytes. Handling ROW_BLOCK rows per program in one
2-D block ([ROW_BLOCK, BLOCK]) gives each program enough bytes in flight.

What it matches (anything else has no site), in a `@triton.jit` kernel:
  - one `row = tl.program_id(0)` (or `axis=0`), no other program_id, no loop, no `if`, no subscript, and
    calls only to tl's elementwise math, `tl.load`/`tl.store`, the reductions `tl.sum`/`tl.max`/`tl.min`
    over the whole block (no axis, or axis 0) and `.to(...)`;
  - every `tl.arange` is a whole assignment `cols = tl.arange(0, E)` (offsets within the row);
  - every store's pointer depends on `row` (so each program writes only its own rows);
and its single launch, from a host function, has a 1-D grid `(rows,)` (inline or one assignment).

The rewrite: `row` becomes the column `(pid * ROW_BLOCK + tl.arange(0, ROW_BLOCK))[:, None]`, each `cols`
the row vector `tl.arange(0, E)[None, :]`, each whole-block reduction a per-row one
(`tl.sum(x, axis=1, keep_dims=True)`), and each load/store whose pointer depends on `row` gets
`& (row < n_rows)` on its mask (the last program's tail rows); broadcasting does the rest. The kernel gains
`n_rows` and `ROW_BLOCK: tl.constexpr`; the host assigns `ROW_BLOCK` (2048 elements per program, 2 to 16
rows, when the row's block size is a literal or a constant; else computed from it the same way) before the grid, which
becomes `(triton.cdiv(rows, ROW_BLOCK),)`. ROW_BLOCK is a block name, so larger/smaller_blocks can change it
there afterwards.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from engine.agents.rewrites import Site, dotted
from engine.platforms.triton.rewrites.source import (
    JitKernel,
    Launch,
    assignments,
    int_value,
    jit_kernels,
    keyword,
    launches,
    line_of,
    module_names,
    tl_call,
)
from engine.platforms.triton.rewrites.values import value_sites

ELEMENTS_PER_PROGRAM = 2048
ROWS_MIN, ROWS_MAX = 2, 16
REDUCTIONS = {"sum", "max", "min"}
ELEMENTWISE = {"sqrt", "sqrt_rn", "rsqrt", "exp", "exp2", "log", "log2", "abs", "maximum", "minimum", "where",
               "fdiv", "div_rn", "sigmoid", "cast", "fma", "erf", "cos", "sin", "softmax", "clamp"}
ALLOWED_TL = REDUCTIONS | ELEMENTWISE | {"program_id", "arange", "load", "store"}
ALLOWED_STATEMENTS = (ast.Assign, ast.Expr, ast.Pass)


@dataclass
class RowKernel:
    kernel: JitKernel
    row: ast.Assign  # row = tl.program_id(0)
    cols: list[ast.Assign]  # cols = tl.arange(0, E)
    reductions: list[ast.Call]
    row_accesses: list[ast.Call]  # loads and stores whose pointer depends on the row


def _is_row_id(value: ast.expr) -> bool:
    if not (tl_call(value, "program_id") and isinstance(value, ast.Call)):
        return False
    axis = value.args[0] if value.args else (keyword(value, "axis").value if keyword(value, "axis") else None)
    return int_value(axis) == 0 and len(value.args) + len(value.keywords) == 1


def _is_whole_reduction(call: ast.Call) -> bool:
    axis_kw = keyword(call, "axis")
    if len(call.args) == 1 and not call.keywords:
        return True
    if len(call.args) == 2 and not call.keywords:
        return int_value(call.args[1]) == 0
    return len(call.args) == 1 and axis_kw is not None and len(call.keywords) == 1 and int_value(axis_kw.value) == 0


def _depends_on(names: set[str], fn: ast.FunctionDef) -> set[str]:
    """Every name whose value (transitively, through assignments) reads one of `names`."""
    found = set(names)
    assigned = assignments(fn)
    changed = True
    while changed:
        changed = False
        for name, stmts in assigned.items():
            if name not in found and any(isinstance(n, ast.Name) and n.id in found
                                         for s in stmts for n in ast.walk(s.value)):
                found.add(name)
                changed = True
    return found


def row_kernel(kernel: JitKernel) -> RowKernel | None:
    """The kernel's row, offsets, reductions and row accesses when it is the one-row-per-program pattern."""
    fn = kernel.fn
    if kernel.autotune is not None or fn.args.defaults or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs:
        return None
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else fn.body
    if not all(isinstance(s, ALLOWED_STATEMENTS) for s in body):
        return None
    if any(isinstance(s, ast.Assign) and (len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name)) for s in body):
        return None
    rows: list[ast.Assign] = []
    cols: list[ast.Assign] = []
    reductions: list[ast.Call] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript | ast.Lambda | ast.FunctionDef) and node is not fn:
            return None
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr == "to":
            continue
        name = dotted(node.func)
        short = name.removeprefix("tl.").removeprefix("triton.language.")
        if short == name or short not in ALLOWED_TL:
            return None
        if short in REDUCTIONS:
            if not _is_whole_reduction(node):
                return None
            reductions.append(node)
    for stmt in body:
        if not isinstance(stmt, ast.Assign):
            continue
        if _is_row_id(stmt.value):
            rows.append(stmt)
        elif (tl_call(stmt.value, "arange") and isinstance(stmt.value, ast.Call) and len(stmt.value.args) == 2
              and int_value(stmt.value.args[0]) == 0):
            cols.append(stmt)
    program_ids = sum(1 for n in ast.walk(fn) if tl_call(n, "program_id"))
    aranges = sum(1 for n in ast.walk(fn) if tl_call(n, "arange"))
    if len(rows) != 1 or program_ids != 1 or not cols or aranges != len(cols):
        return None
    row_name = rows[0].targets[0]
    assert isinstance(row_name, ast.Name)
    if len(assignments(fn)[row_name.id]) != 1 or any(len(assignments(fn)[c.targets[0].id]) != 1 for c in cols
                                                     if isinstance(c.targets[0], ast.Name)):
        return None
    dependent = _depends_on({row_name.id}, fn)
    accesses = []
    for node in ast.walk(fn):
        if (tl_call(node, "load") or tl_call(node, "store")) and isinstance(node, ast.Call) and node.args:
            on_row = any(isinstance(n, ast.Name) and n.id in dependent for n in ast.walk(node.args[0]))
            if tl_call(node, "store") and not on_row:
                return None  # every program would write the same place
            if on_row:
                accesses.append(node)
    if not any(tl_call(n, "store") for n in accesses):
        return None
    return RowKernel(kernel, rows[0], cols, reductions, sorted(accesses, key=line_of))


def _free(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    return candidate


def _grid_tuple(launch: Launch) -> ast.Tuple | None:
    """The 1-D grid tuple of a launch, inline or from its one assignment in the host function."""
    grid = launch.grid
    if isinstance(grid, ast.Name) and launch.caller is not None:
        stmts = assignments(launch.caller).get(grid.id, [])
        uses = [n for n in ast.walk(launch.caller) if isinstance(n, ast.Name) and n.id == grid.id
                and isinstance(n.ctx, ast.Load)]
        grid = stmts[0].value if len(stmts) == 1 and len(uses) == 1 else None
    if isinstance(grid, ast.Tuple) and len(grid.elts) == 1 and not isinstance(grid.elts[0], ast.Starred):
        return grid
    return None


def _launch_arg(launch: Launch, kernel: JitKernel, param: str) -> ast.expr | None:
    kw = keyword(launch.call, param)
    if kw is not None:
        return kw.value
    index = kernel.params().index(param) if param in kernel.params() else -1
    return launch.call.args[index] if 0 <= index < len(launch.call.args) else None


def _block_of_row(found: RowKernel, launch: Launch, tree: ast.Module) -> tuple[int | None, ast.expr | None]:
    """The row's block size (the first arange's end): its value when it is written as one literal, else the
    host expression the launch passes for it."""
    arange = found.cols[0].value
    assert isinstance(arange, ast.Call)
    end = arange.args[1]
    if int_value(end) is not None:
        return int_value(end), None
    if not isinstance(end, ast.Name) or end.id not in found.kernel.constexpr_params():
        return None, None
    passed = _launch_arg(launch, found.kernel, end.id)
    if passed is None:
        return None, None
    sites = value_sites(passed, launch.caller, tree)
    if sites is not None and len(sites) == 1 and len(sites[0].leaves) == 1:
        return sites[0].values()[0], None
    return None, passed


def _statement_list(stmts: list[ast.stmt], node: ast.AST) -> tuple[list[ast.stmt], int] | None:
    """The innermost statement list holding a statement that contains `node`, and that statement's index."""
    for index, stmt in enumerate(stmts):
        if not any(n is node for n in ast.walk(stmt)):
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            found = _statement_list(inner, node) if isinstance(inner, list) else None
            if found is not None:
                return found
        return stmts, index
    return None


def _rewrite_kernel(found: RowKernel, n_rows: str, rows: str) -> None:
    fn = found.kernel.fn
    tl = ast.Name("tl", ast.Load())
    row_name = found.row.targets[0]
    assert isinstance(row_name, ast.Name)
    column = ast.Tuple([ast.Slice(), ast.Constant(None)], ast.Load())
    line = ast.Tuple([ast.Constant(None), ast.Slice()], ast.Load())
    first = ast.BinOp(ast.BinOp(found.row.value, ast.Mult(), ast.Name(rows, ast.Load())), ast.Add(),
                      ast.Call(ast.Attribute(tl, "arange", ast.Load()), [ast.Constant(0), ast.Name(rows, ast.Load())], []))
    found.row.value = ast.Subscript(first, column, ast.Load())
    for stmt in found.cols:
        stmt.value = ast.Subscript(stmt.value, line, ast.Load())
    for call in found.reductions:
        call.args = call.args[:1]
        call.keywords = [ast.keyword("axis", ast.Constant(1)), ast.keyword("keep_dims", ast.Constant(True))]
    for call in found.row_accesses:
        in_rows = ast.Compare(ast.Name(row_name.id, ast.Load()), [ast.Lt()], [ast.Name(n_rows, ast.Load())])
        position = 1 if tl_call(call, "load") else 2
        kw = keyword(call, "mask")
        if kw is not None:
            kw.value = ast.BinOp(kw.value, ast.BitAnd(), in_rows)
        elif len(call.args) > position:
            call.args[position] = ast.BinOp(call.args[position], ast.BitAnd(), in_rows)
        else:
            call.keywords.append(ast.keyword("mask", in_rows))
    constexpr = ast.Attribute(tl, "constexpr", ast.Load())
    fn.args.args += [ast.arg(n_rows), ast.arg(rows, constexpr)]


def visit_rows_per_program(tree: ast.Module, target: int | None) -> list[Site]:
    sites: list[Site] = []
    if not {"tl", "triton"} <= module_names(tree):  # what the rewritten code names
        return sites
    all_launches = launches(tree)
    for kernel in jit_kernels(tree):
        found = row_kernel(kernel)
        mine = [launch for launch in all_launches if launch.kernel.name == kernel.name]
        if found is None or len(mine) != 1 or mine[0].caller is None:
            continue
        launch = mine[0]
        caller = launch.caller
        assert caller is not None
        grid = _grid_tuple(launch)
        if grid is None or any(kw.arg is None for kw in launch.call.keywords):
            continue
        block, block_expr = _block_of_row(found, launch, tree)
        if block is None and block_expr is None:
            continue
        taken = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | set(kernel.params())
        n_rows, rows = _free("n_rows", taken), _free("ROW_BLOCK", taken)
        if block is not None:
            count = max(ROWS_MIN, min(ROWS_MAX, ELEMENTS_PER_PROGRAM // max(block, 1)))
            rows_value: ast.expr = ast.Constant(count)
            shown = str(count)
        else:
            assert block_expr is not None
            rows_value = ast.parse(f"max({ROWS_MIN}, min({ROWS_MAX}, {ELEMENTS_PER_PROGRAM} // ({ast.unparse(block_expr)})))",
                                   mode="eval").body
            shown = f"{ELEMENTS_PER_PROGRAM} // {ast.unparse(block_expr)} ({ROWS_MIN} to {ROWS_MAX})"
        sites.append(Site(f"`{kernel.name}`: {shown} rows per program instead of one (grid "
                          f"cdiv({ast.unparse(grid.elts[0])}, {rows}), tail rows masked)", line_of(kernel.fn)))
        if target != len(sites) - 1:
            continue
        row_count = grid.elts[0]
        grid_stmt = _statement_list(caller.body, grid)
        assert grid_stmt is not None
        stmts, index = grid_stmt
        stmts.insert(index, ast.Assign([ast.Name(rows, ast.Store())], rows_value))
        cdiv = ast.Attribute(ast.Name("triton", ast.Load()), "cdiv", ast.Load())
        grid.elts[0] = ast.Call(cdiv, [row_count, ast.Name(rows, ast.Load())], [])
        launch.call.keywords += [ast.keyword(n_rows, copy.deepcopy(row_count)),
                                 ast.keyword(rows, ast.Name(rows, ast.Load()))]
        _rewrite_kernel(found, n_rows, rows)
    return sites
