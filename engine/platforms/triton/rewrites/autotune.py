"""Rewrites that hand launch parameters to `@triton.autotune`.

    visit_add_autotune    a kernel launched once with literal block sizes gets an autotune decorator
                          over (block, 2 x block) x (warps, 2 x warps); the launch drops those arguments
                          and its grid becomes a function of the chosen configuration (`META['BLOCK']`)
    visit_widen_autotune  an autotuned kernel's configuration list gets the last configuration with its
                          block sizes doubled, and with its warps doubled, when they are new

On a GPU the autotuner times every configuration on the first call and keeps the fastest; the interpreter
cannot time anything, so an evaluation there only shows that every configuration is correct.
"""

from __future__ import annotations

import ast
import copy

from engine.agents.rewrites import Site, dotted
from engine.platforms.triton.rewrites.launch import BLOCK_MAX, DEFAULT_WARPS, WARPS_MAX
from engine.platforms.triton.rewrites.source import (
    SIZE_NAMES,
    JitKernel,
    Launch,
    assignments,
    int_value,
    is_block_name,
    is_power_of_two,
    jit_kernels,
    keyword,
    launches,
    line_of,
    module_names,
)

META = "META"


def _literal(expr: ast.expr, caller: ast.FunctionDef | None) -> int | None:
    """An int literal, or a name the host function assigns exactly once from an int literal."""
    value = int_value(expr)
    if value is None and isinstance(expr, ast.Name) and caller is not None:
        stmts = assignments(caller).get(expr.id, [])
        value = int_value(stmts[0].value) if len(stmts) == 1 else None
    return value


def _grid_body(launch: Launch) -> tuple[ast.expr, str] | None:
    """The grid as an expression and the name its configuration goes by (`META`, or the grid lambda's
    own parameter), following a grid variable to its single assignment."""
    grid = launch.grid
    if isinstance(grid, ast.Name):
        stmts = assignments(launch.caller).get(grid.id, []) if launch.caller is not None else []
        if len(stmts) != 1:
            return None
        grid = stmts[0].value
    if isinstance(grid, ast.Lambda):
        if len(grid.args.args) != 1:
            return None
        return grid.body, grid.args.args[0].arg
    return grid, META


class _UseMeta(ast.NodeTransformer):
    """Replace each tuned value in a grid expression (by name, or by the literal) with `META['KW']`."""

    def __init__(self, tuned: dict[str, tuple[ast.expr, int]], meta: str) -> None:
        self.by_name = {ast.unparse(expr): kw for kw, (expr, _) in tuned.items() if isinstance(expr, ast.Name)}
        self.by_value = {value: kw for kw, (expr, value) in tuned.items() if not isinstance(expr, ast.Name)}
        self.meta = meta

    def _meta(self, kw: str) -> ast.Subscript:
        return ast.Subscript(ast.Name(self.meta, ast.Load()), ast.Constant(kw), ast.Load())

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self._meta(self.by_name[node.id]) if node.id in self.by_name else node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = int_value(node)
        return self._meta(self.by_value[value]) if value is not None and value in self.by_value else node


def _config(blocks: dict[str, int], warps: int, stages: int | None) -> ast.Call:
    kwargs = ast.Dict([ast.Constant(k) for k in blocks], [ast.Constant(v) for v in blocks.values()])
    options = [ast.keyword("num_warps", ast.Constant(warps))]
    if stages is not None:
        options.append(ast.keyword("num_stages", ast.Constant(stages)))
    return ast.Call(ast.Attribute(ast.Name("triton", ast.Load()), "Config", ast.Load()), [kwargs], options)


def _tuning_key(kernel: JitKernel) -> list[str]:
    return [p for p in kernel.scalar_params() if p in SIZE_NAMES or p.startswith(("n_", "num_"))]


def visit_add_autotune(tree: ast.Module, target: int | None) -> list[Site]:
    sites: list[Site] = []
    if "triton" not in module_names(tree):
        return sites
    all_launches = launches(tree)
    for kernel in jit_kernels(tree):
        mine = [launch for launch in all_launches if launch.kernel.name == kernel.name]
        if kernel.autotune is not None or len(mine) != 1:
            continue
        launch = mine[0]
        tuned = {}
        for kw in launch.call.keywords:
            if kw.arg and is_block_name(kw.arg):
                value = _literal(kw.value, launch.caller)
                if value is None or not is_power_of_two(value) or value * 2 > BLOCK_MAX:
                    tuned = {}
                    break
                tuned[kw.arg] = (kw.value, value)
        grid = _grid_body(launch)
        warps_kw, stages_kw = keyword(launch.call, "num_warps"), keyword(launch.call, "num_stages")
        warps = DEFAULT_WARPS if warps_kw is None else int_value(warps_kw.value)
        stages = None if stages_kw is None else int_value(stages_kw.value)
        if not tuned or grid is None or warps is None or (stages_kw is not None and stages is None):
            continue
        sites.append(Site(f"autotune `{kernel.name}` over {', '.join(tuned)} and num_warps", line_of(kernel.fn)))
        if target != len(sites) - 1:
            continue
        configs = []
        for scale in (1, 2):
            for w in sorted({warps, min(warps * 2, WARPS_MAX)}):
                configs.append(_config({kw: value * scale for kw, (_, value) in tuned.items()}, w, stages))
        key = ast.List([ast.Constant(p) for p in _tuning_key(kernel)], ast.Load())
        decorator = ast.Call(ast.Attribute(ast.Name("triton", ast.Load()), "autotune", ast.Load()), [],
                             [ast.keyword("configs", ast.List(configs, ast.Load())), ast.keyword("key", key)])
        kernel.fn.decorator_list.insert(0, decorator)
        body, meta = grid
        new_body = _UseMeta(tuned, meta).visit(copy.deepcopy(body))
        assert isinstance(launch.call.func, ast.Subscript)
        launch.call.func.slice = ast.Lambda(
            ast.arguments(posonlyargs=[], args=[ast.arg(meta)], kwonlyargs=[], kw_defaults=[], defaults=[]),
            new_body)
        launch.call.keywords = [kw for kw in launch.call.keywords
                                if kw.arg not in tuned and kw.arg not in ("num_warps", "num_stages")]
    return sites


def _config_parts(call: ast.expr) -> tuple[dict[str, int], int, ast.Call] | None:
    """(block kwargs, num_warps, the call) of a literal `triton.Config({...}, num_warps=...)`."""
    if not (isinstance(call, ast.Call) and dotted(call.func) in ("triton.Config", "Config")
            and call.args and isinstance(call.args[0], ast.Dict)):
        return None
    blocks = {}
    for k, v in zip(call.args[0].keys, call.args[0].values, strict=True):
        key = k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None
        if key is None or int_value(v) is None:
            return None
        blocks[key] = int_value(v) or 0
    warps_kw = keyword(call, "num_warps")
    warps = DEFAULT_WARPS if warps_kw is None else int_value(warps_kw.value)
    return (blocks, warps, call) if warps is not None else None


def _signature(blocks: dict[str, int], warps: int, call: ast.Call) -> str:
    others = sorted(ast.unparse(kw) for kw in call.keywords if kw.arg != "num_warps")
    return f"{sorted(blocks.items())}|{warps}|{others}"


def visit_widen_autotune(tree: ast.Module, target: int | None) -> list[Site]:
    sites = []
    for kernel in jit_kernels(tree):
        configs = keyword(kernel.autotune, "configs") if kernel.autotune is not None else None
        if configs is None or not isinstance(configs.value, ast.List) or not configs.value.elts:
            continue
        parts = [_config_parts(c) for c in configs.value.elts]
        if any(p is None for p in parts):
            continue
        known = {_signature(*p) for p in parts if p is not None}
        last = parts[-1]
        assert last is not None
        blocks, warps, call = last
        additions = []
        doubled = {k: v * 2 if is_block_name(k) and is_power_of_two(v) and v * 2 <= BLOCK_MAX else v
                   for k, v in blocks.items()}
        for new_blocks, new_warps in ((doubled, warps), (blocks, warps * 2)):
            if new_warps > WARPS_MAX or _signature(new_blocks, new_warps, call) in known:
                continue
            known.add(_signature(new_blocks, new_warps, call))
            additions.append((new_blocks, new_warps))
        if not additions:
            continue
        sites.append(Site(f"add {len(additions)} configurations to the autotuning of `{kernel.name}`",
                          line_of(kernel.autotune)))
        if target == len(sites) - 1:
            for new_blocks, new_warps in additions:
                new = copy.deepcopy(call)
                new.args[0] = ast.Dict([ast.Constant(k) for k in new_blocks],
                                       [ast.Constant(v) for v in new_blocks.values()])
                new.keywords = [kw for kw in new.keywords if kw.arg != "num_warps"]
                new.keywords.append(ast.keyword("num_warps", ast.Constant(new_warps)))
                configs.value.elts.append(new)
    return sites
