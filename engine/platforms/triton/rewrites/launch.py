"""Rewrites of a Triton kernel's launch parameters (the host side of the module).

    visit_larger_blocks, visit_smaller_blocks  a block size written as a power-of-two literal (a
                  `BLOCK...=` launch argument or a `BLOCK... = n` assignment outside the kernels), doubled
                  (up to BLOCK_MAX) or halved (down to BLOCK_MIN)
    visit_more_warps, visit_fewer_warps        `num_warps` of a launch (4 when unset), doubled or halved
    visit_more_stages, visit_fewer_stages      `num_stages` of a launch of a kernel with a loop (3 when
                  unset, CUDA's default), one more or one fewer

A launch argument that is a name (`BLOCK_M=bm, num_warps=warps`) is followed to the assignments that bind
it in the launching function (values.py): each is a site, rewritten where it is written, so a grid that
reads the same name follows the block.

Launches of autotuned kernels are left alone: their configurations set these (see autotune.py).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from engine.agents.rewrites import Site
from engine.platforms.triton.rewrites.source import (
    int_value,
    is_block_name,
    is_power_of_two,
    jit_kernels,
    keyword,
    launches,
    line_of,
)
from engine.platforms.triton.rewrites.values import ValueSite, value_sites

BLOCK_MAX = 16384
BLOCK_MIN = 16  # tl.dot needs blocks of at least 16
WARPS_MAX = 32
DEFAULT_WARPS = 4
DEFAULT_STAGES = 3
STAGES_MAX = 5


def _block_literals(tree: ast.Module) -> Iterator[tuple[str, ValueSite]]:
    """(name, where its value is written) of each block size of a launch, and each `BLOCK... = n`
    assignment on the host side."""
    inside_kernels = {id(n) for k in jit_kernels(tree) for n in ast.walk(k.fn)}
    seen: set[tuple[int, ...]] = set()
    for launch in launches(tree):
        for kw in launch.call.keywords:
            if kw.arg and is_block_name(kw.arg):
                for site in value_sites(kw.value, launch.caller, tree) or []:
                    seen.add(tuple(id(leaf) for leaf in site.leaves))
                    yield kw.arg, site
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and id(node) not in inside_kernels and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and is_block_name(node.targets[0].id)):
            value = int_value(node.value)
            if value is not None and (id(node.value),) not in seen:
                assert isinstance(node.value, ast.Constant)
                yield node.targets[0].id, ValueSite([node.value], "", line_of(node.value))


def _visit_blocks(tree: ast.Module, target: int | None, grow: bool) -> list[Site]:
    sites = []
    for name, where in sorted(_block_literals(tree), key=lambda row: row[1].line):
        if not all(is_power_of_two(v) for v in where.values()):
            continue
        new = [v * 2 if grow else v // 2 for v in where.values()]
        if not all(BLOCK_MIN <= v <= BLOCK_MAX for v in new):
            continue
        sites.append(Site(f"{name} {where.describe(new)}", where.line))
        if target == len(sites) - 1:
            where.set(new)
    return sites


def visit_larger_blocks(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_blocks(tree, target, grow=True)


def visit_smaller_blocks(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_blocks(tree, target, grow=False)


def _visit_option(tree: ast.Module, target: int | None, option: str, default: int,
                  change: Callable[[int], int | None], loops_only: bool = False) -> list[Site]:
    """Sites: launches of kernels that are not autotuned whose `option` is unset, or written as literals
    (in the launch, or where the name it passes is assigned)."""
    sites = []
    for launch in launches(tree):
        if launch.kernel.autotune is not None or (loops_only and not launch.kernel.has_loop()):
            continue
        kw = keyword(launch.call, option)
        if kw is None:
            new = change(default)
            if new is None:
                continue
            sites.append(Site(f"{option} of the `{launch.kernel.name}` launch unset ({default}) -> {new}",
                              line_of(launch.call)))
            if target == len(sites) - 1:
                launch.call.keywords.append(ast.keyword(option, ast.Constant(new)))
            continue
        for where in value_sites(kw.value, launch.caller, tree) or []:
            changed = [change(v) for v in where.values()]
            if any(v is None for v in changed):
                continue
            new_values = [v for v in changed if v is not None]
            sites.append(Site(f"{option} of the `{launch.kernel.name}` launch {where.describe(new_values)}",
                              where.line if where.via else line_of(launch.call)))
            if target == len(sites) - 1:
                where.set(new_values)
    return sites


def visit_more_warps(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_option(tree, target, "num_warps", DEFAULT_WARPS,
                         lambda w: w * 2 if is_power_of_two(w) and w * 2 <= WARPS_MAX else None)


def visit_fewer_warps(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_option(tree, target, "num_warps", DEFAULT_WARPS,
                         lambda w: w // 2 if is_power_of_two(w) and w >= 2 else None)


def visit_more_stages(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_option(tree, target, "num_stages", DEFAULT_STAGES,
                         lambda s: s + 1 if 1 <= s < STAGES_MAX else None, loops_only=True)


def visit_fewer_stages(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_option(tree, target, "num_stages", DEFAULT_STAGES,
                         lambda s: s - 1 if s > 1 else None, loops_only=True)
