"""The code's shape: no import cycles, no overlong modules, no Django in the pure modules, no unexplained
function-level import.

Read with `ast` from the files (nothing is imported), over the project's own packages: the engine and the
Django apps (accelopt_site, accounts, benchmark, campaigns, memory, optimizer) (the measurement scripts in measurements/ are scripts, not
modules of the project, and are left out of the import graph; the length rule covers them too).

(a) No import cycle. A module's imports are all its `import` statements, at module level and inside
functions alike (a function-level import is still a dependency, only a later one), except those under
`if TYPE_CHECKING:` (never run). Relative imports are resolved against the importing module's package.
Each statement is an edge to exactly one module:

* `import a.b.c` and `from a.b.c import x` (x not a module): to `a.b.c`;
* `from a.b import c`, where `a.b.c` is a module: to `a.b.c`;
* `from a.b import name`, where the package `a/b/__init__.py` re-exports `name` from one of its own
  submodules (`from .sub import name`, also inside `if TYPE_CHECKING:` for an `__init__` that loads its
  names lazily through `__getattr__`): to the module that defines it, followed through further re-exports;
* otherwise `from a.b import name`: to `a.b` (the name is the `__init__`'s own).

Python does run `a/b/__init__.py` before `a.b.c`, but the importer's code does not use it. Counting it
(an edge from each importer of `a.b.c` to `a.b`) makes every submodule that imports a sibling depend on its
package's `__init__`, which imports that submodule back when it re-exports it: at 568768e that rule found
5 "cycles" instead of the 2 real ones, among them engine.platforms.nki.simulator with 9 of its submodules and
engine.evaluator, engine.platforms.nki.perf and engine.platforms.nki.suites each with theirs. Likewise `from benchmark.services
import x` depends on the submodule that defines x, not on every submodule the package re-exports. So a
package's `__init__` is a dependency only where its own names are imported. What remains are cycles
between modules that use each other's code (at 568768e exactly benchmark.services <-> benchmark.review
and engine.platforms.nki.simulator.semantics.isa <-> engine.platforms.nki.simulator.semantics.language), which is what makes a change in one a change in the other.

(b) No module over MAX_LINES (600) lines, unless its module docstring has a sentence starting
"Long because" that says why it should stay whole.

(c) The pure modules, every module under engine/ (the NKI simulator, the performance model, the evaluator
that runs in the sandbox children and on remote workers, the search, the agents, each platform's folder),
import nothing from Django (or django-ninja, Channels) and no Django app's
models, directly or through any project module they import (function-level imports included).

(d) An import inside a function says why it is there, in a comment on its line, on the line above it, or above
its block of imports (an optional or heavy package, a cycle, the sandbox child's order around its guards, an app
registry not loaded yet); every other import is at the top of its module, where a reader sees the dependency.

KNOWN_EXCEPTIONS lists what fails today and is being fixed by the issue-17 refactor; empty it as each fix
lands (a listed exception that no longer occurs fails too, so the list cannot go stale).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import textwrap
from collections import deque
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("accelopt_site", "accounts", "benchmark", "campaigns", "engine", "mcp_server", "memory", "optimizer")
SCRIPTS = ("measurements",)
MAX_LINES = 600
LONG_BECAUSE = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)Long because\b")
DJANGO_ROOTS = ("django", "ninja", "channels", "daphne", "django_htmx")
# Purity by location: every module under engine/ (the simulator, the performance model, the evaluator and its
# sandbox children, the search, the agents, every platform's folder) imports no Django. No list to keep.
PURE = ("engine/",)

# What still fails, each entry the exact finding (a cycle as its sorted members, a path, a module): the
# issue-17 refactor removes them; the lead empties this list. At 568768e the rules found the cycles
# benchmark.services <-> benchmark.review and engine.platforms.nki.simulator.semantics.isa <-> engine.platforms.nki.simulator.semantics.language (both since
# removed) and six modules over 600 lines; of those only the one below is left.
KNOWN_EXCEPTIONS: dict[str, set] = {
    "cycles": set(),
    "long_modules": set(),
    "impure": set(),
}


# -- the modules and their imports ----------------------------------------------------------------------


@functools.cache
def project_modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the project's packages (a package is its __init__)."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


@functools.cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def is_package(module: str) -> bool:
    return project_modules()[module].name == "__init__.py"


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_nodes(tree: ast.AST, *, type_checking: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth; those under `if TYPE_CHECKING:` only when asked."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif _type_checking(node) and not type_checking:
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda n: n.lineno)


def absolute(module: str, node: ast.ImportFrom) -> str:
    """The module a `from … import` statement imports from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package(module) else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str) -> str | None:
    """`name` if it is a project module; None if it is not the project's (see `missing_modules`)."""
    return name if name in project_modules() else None


def _module_level(statements: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run when the module is imported: the body, with `if`/`try` blocks opened (not defs)."""
    found: list[ast.stmt] = []
    for stmt in statements:
        found.append(stmt)
        if isinstance(stmt, (ast.If, ast.Try)):
            blocks = [stmt.body, stmt.orelse] + ([h.body for h in stmt.handlers] + [stmt.finalbody]
                                                 if isinstance(stmt, ast.Try) else [])
            for block in blocks:
                found.extend(_module_level(block))
    return found


@functools.cache
def reexports(package: str) -> dict[str, tuple[str, str]]:
    """Names a package's __init__ binds by importing them from its own submodules (at module level, also
    under `if TYPE_CHECKING:`): bound name -> (module, name there)."""
    names: dict[str, tuple[str, str]] = {}
    for node in _module_level(parse(project_modules()[package]).body):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = absolute(package, node)
        if not source.startswith(package + "."):
            continue
        for alias in node.names:
            names[alias.asname or alias.name] = (source, alias.name)
    return names


def defining_module(package: str, name: str, seen: frozenset[str] = frozenset()) -> str:
    """The module `from package import name` takes `name` from (the rules in the module docstring)."""
    if f"{package}.{name}" in project_modules():
        return f"{package}.{name}"
    if not is_package(package) or package in seen or name not in reexports(package):
        return package
    source, original = reexports(package)[name]
    known = _known(source)
    if known is None or known == package:
        return package
    if known == source and is_package(known):
        return defining_module(known, original, seen | {package})
    return known


@functools.cache
def imports_of(module: str) -> dict[str, int]:
    """The project modules `module` imports (edges, as the docstring says), each with its first line."""
    edges: dict[str, int] = {}
    for node in import_nodes(parse(project_modules()[module])):
        targets: list[str | None]
        if isinstance(node, ast.Import):
            targets = [_known(alias.name) for alias in node.names]
        else:
            source = _known(absolute(module, node))
            targets = [defining_module(source, alias.name) if source else None for alias in node.names]
        for target in targets:
            if target is not None and target != module:
                edges.setdefault(target, node.lineno)
    return edges


def external_imports(module: str) -> dict[str, int]:
    """Top-level names of the non-project packages `module` imports, with the first line of each."""
    found: dict[str, int] = {}
    for node in import_nodes(parse(project_modules()[module])):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [] if node.level else [node.module or ""])
        for name in names:
            if name.split(".")[0] not in PACKAGES:
                found.setdefault(name.split(".")[0], node.lineno)
    return found


def missing_modules() -> list[str]:
    """Imports of a project name that is no module (a rename half done): `module:line name`."""
    found = []
    for module in project_modules():
        for node in import_nodes(parse(project_modules()[module]), type_checking=True):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [absolute(module, node)]
            found += [f"{module}:{node.lineno} {name}" for name in names
                      if name.split(".")[0] in PACKAGES and name not in project_modules()]
    return found


# -- (a) cycles -------------------------------------------------------------------------------------------


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components with more than one module, each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a long chain of imports cannot exhaust Python's recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def shortest_cycle(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """A shortest path start -> … -> start inside one component, for the message."""
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(graph[node] & within):
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(previous[path[-1]])
                return [*reversed(path), start]
            if successor not in previous:
                previous[successor] = node
                queue.append(successor)
    return [start]


def import_graph() -> dict[str, set[str]]:
    return {module: set(imports_of(module)) for module in project_modules()}


def describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    lines = [f"cycle among {len(component)} modules: {', '.join(component)}"]
    for module in component:
        cycle = shortest_cycle(graph, module, members)
        steps = " -> ".join(f"{a}:{imports_of(a)[b]}" for a, b in zip(cycle, cycle[1:], strict=False))
        lines.append(f"    {steps} -> {cycle[-1]}")
    return "\n".join(lines)


def test_no_import_cycles(capsys):
    graph = import_graph()
    found = {frozenset(c): c for c in strongly_connected(graph)}
    with capsys.disabled():
        for component in found.values():
            print("\n" + describe(graph, component))
    known = {frozenset(c) for c in KNOWN_EXCEPTIONS["cycles"]}
    new = [describe(graph, c) for key, c in found.items() if key not in known]
    gone = sorted(sorted(c) for c in known - set(found))
    assert not new, "import cycles (break them; docs/architecture.md has the direction):\n" + "\n".join(new)
    assert not gone, f"no longer cycles, remove them from KNOWN_EXCEPTIONS['cycles']: {gone}"


def test_every_project_import_names_a_module():
    # Checked first: the graph leaves out an import whose module does not exist.
    assert not missing_modules(), f"imports of project modules that do not exist: {missing_modules()}"


# -- (b) long modules --------------------------------------------------------------------------------------


def long_modules() -> dict[str, int]:
    paths = [*project_modules().values()] + [p for s in SCRIPTS for p in sorted((ROOT / s).rglob("*.py"))]
    found: dict[str, int] = {}
    for path in paths:
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > MAX_LINES and not LONG_BECAUSE.search(ast.get_docstring(parse(path)) or ""):
            found[path.relative_to(ROOT).as_posix()] = lines
    return found


def test_no_module_is_over_600_lines_without_saying_why():
    found = long_modules()
    new = {path: n for path, n in found.items() if path not in KNOWN_EXCEPTIONS["long_modules"]}
    gone = sorted(KNOWN_EXCEPTIONS["long_modules"] - set(found))
    assert not new, (f"modules over {MAX_LINES} lines: {new}. Split them, or start a sentence of the module "
                     f"docstring with 'Long because' and say why the module should stay whole.")
    assert not gone, f"no longer over {MAX_LINES} lines, remove them from KNOWN_EXCEPTIONS['long_modules']: {gone}"


# -- (c) pure modules ----------------------------------------------------------------------------------------


def pure_modules() -> list[str]:
    def path(module: str) -> str:
        return project_modules()[module].relative_to(ROOT).as_posix()

    return [m for m in project_modules() if path(m).startswith(PURE)]


def django_use(module: str) -> str | None:
    """Why `module` itself is Django's (None: it is not)."""
    if module.split(".")[-1] == "models" or ".models." in module:
        return "a Django app's models"
    django = sorted(name for name in external_imports(module) if name in DJANGO_ROOTS)
    if django:
        return f"imports {', '.join(django)} (line {external_imports(module)[django[0]]})"
    return None


def impurity(module: str, graph: dict[str, set[str]]) -> str | None:
    """The import chain from `module` to the first Django module it reaches, or None."""
    previous: dict[str, str | None] = {module: None}
    queue = deque([module])
    while queue:
        node = queue.popleft()
        reason = django_use(node)
        if reason is not None:
            chain = [node]
            while previous[chain[-1]] is not None:
                chain.append(previous[chain[-1]])
            return " -> ".join(reversed(chain)) + f": {reason}"
        for successor in sorted(graph[node]):
            if successor not in previous:
                previous[successor] = node
                queue.append(successor)
    return None


def test_pure_modules_import_no_django():
    graph = import_graph()
    modules = pure_modules()
    assert {"engine.platforms.nki.simulator.simulate", "engine.platforms.nki.perf", "engine.evaluator.child",
            "engine.search.beam", "engine.platforms.triton.roles"} <= set(modules)
    found = {m: why for m in modules if (why := impurity(m, graph)) is not None}
    new = {m: why for m, why in found.items() if m not in KNOWN_EXCEPTIONS["impure"]}
    gone = sorted(KNOWN_EXCEPTIONS["impure"] - set(found))
    assert not new, "pure modules that reach Django:\n" + "\n".join(f"    {why}" for why in new.values())
    assert not gone, f"pure again, remove them from KNOWN_EXCEPTIONS['impure']: {gone}"


# -- (d) function-level imports say why -----------------------------------------------------------------------


def _function_imports(path: Path) -> list[list[ast.Import | ast.ImportFrom]]:
    """The import statements inside functions, grouped in blocks: statements with nothing but blank lines
    between them (isort's groups of one function's imports are one block)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = parse(path)
    found: set[ast.Import | ast.ImportFrom] = set()
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.update(n for n in ast.walk(function) if isinstance(n, (ast.Import, ast.ImportFrom)))
    blocks: list[list[ast.Import | ast.ImportFrom]] = []
    for node in sorted(found, key=lambda n: n.lineno):
        if blocks and not any(line.strip() for line in lines[blocks[-1][-1].end_lineno: node.lineno - 1]):
            blocks[-1].append(node)
        else:
            blocks.append([node])
    return blocks


def unexplained_imports(path: Path) -> list[int]:
    """Lines of function-level imports with no comment saying why: one on the statement's own lines, on the
    line above it, or on an earlier statement of the same block of imports (a comment above a block covers it)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[int] = []
    for block in _function_imports(path):
        explained = block[0].lineno >= 2 and lines[block[0].lineno - 2].lstrip().startswith("#")
        for node in block:
            explained = explained or any("#" in line for line in lines[node.lineno - 1: node.end_lineno])
            if not explained:
                found.append(node.lineno)
    return found


def test_function_level_imports_say_why():
    """An import inside a function hides a dependency from a reader of the module's head: it stays there only
    for a reason (an optional or heavy package, a cycle, the sandbox child's order around its guards, a Django
    app registry not loaded yet) and a comment says which; the others are at the top of their module."""
    found = {
        f"{path.relative_to(ROOT).as_posix()}:{line}": path.read_text(encoding="utf-8").splitlines()[line - 1].strip()
        for path in project_modules().values() for line in unexplained_imports(path)
    }
    assert not found, ("function-level imports without a comment saying why (move them to the module's top, or "
                       "say why they cannot go there):\n" + "\n".join(f"    {k}: {v}" for k, v in found.items()))


# -- the rules themselves, on small made-up packages ----------------------------------------------------------


def test_cycles_are_found_and_printed_as_paths():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert shortest_cycle(graph, "b", {"a", "b", "c"}) == ["b", "c", "a", "b"]


def test_long_because_must_start_a_sentence():
    assert LONG_BECAUSE.search("The ISA. Long because the cost table is one unit.")
    assert LONG_BECAUSE.search("Long because it is one state machine.")
    assert not LONG_BECAUSE.search("Not too long because of that.")


@pytest.fixture
def made_up(tmp_path, monkeypatch):
    """Point the readers at packages written under tmp_path (caches emptied before and after)."""
    caches = (project_modules, parse, reexports, imports_of)

    def write(files: dict[str, str]) -> None:
        for name, text in files.items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(textwrap.dedent(text))
        monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
        monkeypatch.setattr(sys.modules[__name__], "PACKAGES", tuple(sorted({n.split("/")[0] for n in files})))
        for cache in caches:
            cache.cache_clear()

    yield write
    for cache in caches:
        cache.cache_clear()


def test_a_reexporting_init_makes_no_cycle_but_a_function_level_import_does(made_up):
    made_up({
        "pkg/__init__.py": """
            from typing import TYPE_CHECKING
            from .a import f
            from .b import g as renamed
            if TYPE_CHECKING:
                from .c import h  # loaded lazily by a __getattr__
            VERSION = "1"
        """,
        "pkg/a.py": "def f(): pass\n",
        "pkg/b.py": "from app.views import page\ndef g(): pass\n",
        "pkg/c.py": "def h():\n    from app.api import x\n",
        "app/__init__.py": "",
        # f lives in pkg.a, which imports nothing: no cycle, though pkg's __init__ also imports pkg.b -> app.views
        "app/views.py": "from pkg import f\ndef page(): pass\n",
        # h lives in pkg.c, which imports app.api inside a function: a cycle
        "app/api.py": "from pkg import h\nx = 1\n",
        "app/other.py": "from pkg import VERSION, renamed\nfrom . import views\nfrom .views import page\n",
    })
    assert imports_of("app.views") == {"pkg.a": 1}
    assert imports_of("app.other") == {"pkg": 1, "pkg.b": 1, "app.views": 2}
    assert strongly_connected(import_graph()) == [["app.api", "pkg.c"]]
    assert missing_modules() == []


def test_imports_of_modules_that_do_not_exist_are_reported(made_up):
    made_up({"pkg/__init__.py": "", "pkg/a.py": "from .gone import x\nimport pkg.missing\n"})
    assert missing_modules() == ["pkg.a:1 pkg.gone", "pkg.a:2 pkg.missing"]


def test_a_function_level_import_needs_a_comment_on_it_or_above_its_block(tmp_path):
    path = tmp_path / "module.py"
    path.write_text(textwrap.dedent("""
        import os


        def f():
            import json

            # lazy: torch is optional
            import torch
            import triton
            return json, torch, triton


        def g():
            import csv  # stdlib, but here is why

            from x import (
                y,
            )
            z = 1
            import w
            return csv, y, z, w
    """), encoding="utf-8")
    assert unexplained_imports(path) == [6, 21]
