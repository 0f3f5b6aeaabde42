"""What a rewrite is: a named visitor that lists its sites in a kernel and rewrites one of them; and the
catalogs of every kernel language, found through the platform registry.

A visitor `visit(tree, target)` walks the parsed kernel and returns its sites; when `target` is a site's
index it also rewrites that site in `tree`, in place. `Rewrite.sites` and `Rewrite.apply` wrap it. Each
platform folder holds its own catalog (`engine/platforms/<language>/rewrites/`); the offline agent asks
`catalog_for(language)` and `rewrite_named(name)` here, never a platform folder.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from dataclasses import dataclass

from engine.platforms.registry import languages, load_part


class RewriteError(ValueError):
    """The requested site does not exist (the kernel changed, or the plan names the wrong site)."""


@dataclass(frozen=True)
class Site:
    description: str
    line: int


@dataclass(frozen=True)
class Rewrite:
    name: str
    title: str  # the general lesson, used as the memory entry title
    lesson: str  # why it helps and when it applies
    visit: Callable[[ast.Module, int | None], list[Site]]
    repeatable: bool = True  # applying it at every site in turn makes sense

    def sites(self, source: str) -> list[Site]:
        return list(_sites_of(self, source))

    def apply(self, source: str, index: int) -> str:
        tree = ast.parse(source)
        sites = self.visit(tree, index)
        if index < 0 or index >= len(sites):
            raise RewriteError(f"rewrite {self.name!r} has {len(sites)} sites in this kernel; site {index} does not exist")
        ast.fix_missing_locations(tree)
        return ast.unparse(tree) + "\n"

    def apply_everywhere(self, source: str, limit: int = 16) -> str:
        """Site 0 again and again until none is left (only for rewrites whose sites go away)."""
        for _ in range(limit):
            if not self.sites(source):
                break
            source = self.apply(source, 0)
        return source


@functools.lru_cache(maxsize=1024)  # a catalog of 14 over ~70 sources of at most 256 KiB
def _sites_of(rewrite: Rewrite, source: str) -> tuple[Site, ...]:
    """A rewrite's sites in a source, remembered: the offline Planner asks every rewrite about the same few
    kernels again and again (each run's start kernel, a beam's survivors), and each answer costs parses and
    tree walks that hold the server's GIL."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    return tuple(rewrite.visit(tree, None))


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def catalog_for(language: str) -> tuple[Rewrite, ...]:
    """The offline rewrites of a kernel language ("nki", "triton"), from the folder the registry names."""
    return load_part(language, "rewrites")


def rewrite_named(name: str) -> Rewrite | None:
    """The rewrite called `name` in any language's catalog (names are unique across catalogs), or None."""
    return _by_name(languages()).get(name)


@functools.cache
def _by_name(known: tuple[str, ...]) -> dict[str, Rewrite]:
    """Every catalog's rewrites by name, for the languages registered now (a language added later is a new key)."""
    found: dict[str, Rewrite] = {}
    for language in known:
        for rewrite in catalog_for(language):
            assert rewrite.name not in found, f"the rewrite name {rewrite.name!r} is used by two catalogs"
            found[rewrite.name] = rewrite
    return found
