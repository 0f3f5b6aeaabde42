"""Loop kinds the kernel's source states, for the verifier to hold the trace's loops to.

The performance model prices a loop by its kind (a barrier between the iterations of a `sequential_range` loop,
overlap and fusion of `affine_range` iterations), and the kind in a recorded trace comes from the kernel's process,
so it is a claim: a sequential loop labelled `static_range` was priced 13% lower, and no rule of the replay
(races.py binds affine loops only) could tell. The source is not the kernel's process's: the parent has it, parses
it (the static check does already) and sends the verifier the kind each `for` statement's iterator states, by line.

Only what the source states unambiguously counts: a `for` whose iterator is a direct call of `affine_range`,
`sequential_range` or `static_range` of an NKI language module, reached through an import the module makes (an
alias bound anywhere else in the source is not trusted). Legacy `neuronxcc.nki.language` iterators are the three
kinds; in the `nki` package (NKI 0.6) all three are Python ranges, unrolled (namespaces._unrolled). A loop the source
does not state this way (a range kept in a variable, a helper that returns one) stays the trace's claim.
"""

from __future__ import annotations

import ast

from engine.platforms.nki.simulator.trace import LoopKind, Trace
from engine.platforms.nki.simulator.verification.program import ReplayError

_ITERATORS = {"affine_range": LoopKind.AFFINE, "sequential_range": LoopKind.SEQUENTIAL, "static_range": LoopKind.STATIC}
_LANGUAGES = {"neuronxcc.nki.language": False, "nki.language": True}  # module -> its iterators are unrolled


def stated_loop_kinds(source: str) -> dict[int, int]:
    """{line: LoopKind} of the `for` statements whose iterator the source states (module docstring); a line two
    statements state differently is left out. A source that does not parse states nothing."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    modules = _module_names(tree)
    kinds: dict[int, int] = {}
    clashes: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.For, ast.comprehension)) or not isinstance(node.iter, ast.Call):
            continue
        kind = _iterator_kind(node.iter.func, modules)
        if kind is None:
            continue
        first = node.lineno if isinstance(node, ast.For) else node.iter.lineno
        for line in range(first, (node.iter.end_lineno or node.iter.lineno) + 1):
            if kinds.get(line, kind) != kind:
                clashes.add(line)
            kinds[line] = kind
    return {line: kind for line, kind in kinds.items() if line not in clashes}


def check_loop_kinds(trace: Trace, stated: dict[int, int]) -> None:
    """Raise ReplayError where the trace gives a loop at a line the source states another kind than it says."""
    for loop in trace.loops:
        want = stated.get(int(loop.line))
        if want is not None and int(loop.kind) != want:
            raise ReplayError(f"the cost trace says the loop at line {loop.line} is a {_name(int(loop.kind))} loop; "
                              f"the kernel's source makes it a {_name(want)} loop", int(loop.line))


def _name(kind: int) -> str:
    return {int(LoopKind.AFFINE): "affine_range", int(LoopKind.SEQUENTIAL): "sequential_range",
            int(LoopKind.STATIC): "static_range"}.get(kind, f"kind-{kind}")


def _module_names(tree: ast.Module) -> dict[str, str]:
    """Names the source's imports bind to modules (or iterator functions: 'module.attr'), minus every name the
    source also binds another way (an assignment, a parameter, a loop target, a def): those it may rebind."""
    bound: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound.setdefault(alias.asname, set()).add(alias.name)
                else:  # `import a.b.c` binds `a`
                    top = alias.name.split(".")[0]
                    bound.setdefault(top, set()).add(top)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                bound.setdefault(alias.asname or alias.name, set()).add(f"{node.module}.{alias.name}")
    rebound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            rebound.add(node.id)
        elif isinstance(node, ast.arg):
            rebound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            rebound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            rebound.update(node.names)
    return {name: next(iter(paths)) for name, paths in bound.items() if len(paths) == 1 and name not in rebound}


def _iterator_kind(func: ast.expr, modules: dict[str, str]) -> int | None:
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in modules:
        return None
    path = ".".join([modules[func.id], *reversed(parts)])
    module, _, name = path.rpartition(".")
    unrolled = _LANGUAGES.get(module)
    if unrolled is None or name not in _ITERATORS:
        return None
    return int(LoopKind.STATIC if unrolled else _ITERATORS[name])
