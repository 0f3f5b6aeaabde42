"""What a rewrite is: a named visitor that lists its sites in a kernel and rewrites one of them.

A visitor `visit(tree, target)` walks the parsed kernel and returns its sites; when `target` is a site's
index it also rewrites that site in `tree`, in place. `Rewrite.sites` and `Rewrite.apply` wrap it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass


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
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return []
        return self.visit(tree, None)

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
