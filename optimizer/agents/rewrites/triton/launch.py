"""Rewrites of a Triton kernel's launch parameters (the host side of the module).

    visit_larger_blocks, visit_smaller_blocks  a block size written as a power-of-two literal (a
                  `BLOCK...=` launch argument or a `BLOCK... = n` assignment outside the kernels), doubled
                  (up to BLOCK_MAX) or halved (down to BLOCK_MIN)
    visit_more_warps, visit_fewer_warps        `num_warps` of a launch (4 when unset), doubled or halved
    visit_more_stages, visit_fewer_stages      `num_stages` of a launch of a kernel with a loop (3 when
                  unset, CUDA's default), one more or one fewer

Launches of autotuned kernels are left alone: their configurations set these (see autotune.py).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from optimizer.agents.rewrites.rewrite import Site
from optimizer.agents.rewrites.triton.source import (
    int_value,
    is_block_name,
    is_power_of_two,
    jit_kernels,
    keyword,
    launches,
    line_of,
)

BLOCK_MAX = 16384
BLOCK_MIN = 16  # tl.dot needs blocks of at least 16
WARPS_MAX = 32
DEFAULT_WARPS = 4
DEFAULT_STAGES = 3
STAGES_MAX = 5


def _block_literals(tree: ast.Module) -> Iterator[tuple[str, ast.Constant]]:
    """(name, literal) of each block size written as a power of two on the host side."""
    inside_kernels = {id(n) for k in jit_kernels(tree) for n in ast.walk(k.fn)}
    for launch in launches(tree):
        for kw in launch.call.keywords:
            value = int_value(kw.value)
            if kw.arg and is_block_name(kw.arg) and value is not None and is_power_of_two(value):
                assert isinstance(kw.value, ast.Constant)
                yield kw.arg, kw.value
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and id(node) not in inside_kernels and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and is_block_name(node.targets[0].id)):
            value = int_value(node.value)
            if value is not None and is_power_of_two(value):
                assert isinstance(node.value, ast.Constant)
                yield node.targets[0].id, node.value


def _visit_blocks(tree: ast.Module, target: int | None, grow: bool) -> list[Site]:
    sites = []
    for name, literal in sorted(_block_literals(tree), key=lambda row: line_of(row[1])):
        new = literal.value * 2 if grow else literal.value // 2
        if not BLOCK_MIN <= new <= BLOCK_MAX:
            continue
        sites.append(Site(f"{name} {literal.value} -> {new}", line_of(literal)))
        if target == len(sites) - 1:
            literal.value = new
    return sites


def visit_larger_blocks(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_blocks(tree, target, grow=True)


def visit_smaller_blocks(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_blocks(tree, target, grow=False)


def _visit_option(tree: ast.Module, target: int | None, option: str, default: int,
                  change: Callable[[int], int | None], loops_only: bool = False) -> list[Site]:
    """Sites: launches of kernels that are not autotuned whose `option` is a literal or unset."""
    sites = []
    for launch in launches(tree):
        if launch.kernel.autotune is not None or (loops_only and not launch.kernel.has_loop()):
            continue
        kw = keyword(launch.call, option)
        current = default if kw is None else int_value(kw.value)
        new = None if current is None else change(current)
        if current is None or new is None:
            continue
        shown = f"{current}" if kw is not None else f"unset ({default})"
        sites.append(Site(f"{option} of the `{launch.kernel.name}` launch {shown} -> {new}", line_of(launch.call)))
        if target == len(sites) - 1:
            if kw is None:
                launch.call.keywords.append(ast.keyword(option, ast.Constant(new)))
            else:
                kw.value = ast.Constant(new)
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
