"""The simulator's and the performance model's modules import one another one way only.

Every import counts, at module level or inside a function: a cycle hidden in a function body still ties
two modules together (each needs the other to be read).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine/platforms/nki/simulator", "engine/platforms/nki/perf")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(0, node.level - 1)):
                base = base.rpartition(".")[0]
            module = node.module or ""
            base = (f"{base}.{module}" if module else base) if node.level else module
            # `from . import isa` names a module; `from .trace import Engine` names something in one
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found |= {t for t in targets if t in known and t != name}
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}
    known = set(files)
    return {name: _imports(path, name, known) for name, path in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_the_graph_sees_function_level_imports():
    graph = _graph()
    # imported inside `pair_trace`, late so the model runs without the simulator
    assert "engine.platforms.nki.simulator" in graph["engine.platforms.nki.perf.pairs"]


def test_no_module_imports_itself_through_others():
    cycle = _cycle(_graph())
    assert not cycle, " -> ".join(cycle)
