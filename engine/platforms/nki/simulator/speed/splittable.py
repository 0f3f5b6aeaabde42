"""Which loops of a kernel may run in two halves at once, read from its source (`parallel_loops`).

The iterations of an `affine_range` loop are independent by contract, so the simulator may run the
second half of a top-level one in a forked child while the parent runs the first half, and merge what
the child did (parallel.py). Only loops whose body provably touches nothing but tensors are split:
Python state the child changes (a list it appends to, a counter, a variable read after the loop) would
otherwise be lost. This module decides which loops those are; nothing here runs a kernel.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, NamedTuple

# Names a loop body may call through: the NKI namespaces and numpy (pure functions).
_MODULE_ROOTS = ("neuronxcc", "nki", "numpy", "math")
_SIMULATOR_PACKAGE = __name__.rsplit(".", 2)[0]  # the simulator (this module is in its speed/): test kernels import its modules
# Tensor methods that only read (`reshape` is not one: it makes a writable alias of HBM storage).
_PURE_METHODS = frozenset(("broadcast_to",))
# Builtins without side effects that kernels use inside loops.
_PURE_BUILTINS = frozenset(("range", "len", "int", "float", "min", "max", "abs", "slice", "tuple"))


class SplitLoop(NamedTuple):
    """What the simulator needs to know of a loop it may split."""

    inner: frozenset[int]  # the lines of the loops it holds (itself included): where its own tensors live
    reductions: frozenset[int]  # the lines of its max/min `loop_reduce` statements across its iterations


def parallel_loops(func: Any) -> dict[int, SplitLoop]:
    """The top-level `affine_range` loops of `func` that may be split, by the line of each one's iterator
    call."""
    try:
        source = textwrap.dedent(inspect.getsource(func))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return {}
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    offset = func.__code__.co_firstlineno - 1
    modules = _module_names(func, tree)
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    # Top-level names bound once, by a call into an NKI module (a declaration or an on-chip tile).
    bound: dict[str, int] = {}
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound[node.id] = bound.get(node.id, 0) + 1
    declared = set()
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Call) and _module_call(stmt.value, modules) \
                and bound.get(stmt.targets[0].id) == 1:
            declared.add(stmt.targets[0].id)
    tensors = declared | {p for p in params if p not in bound}
    loops: dict[int, SplitLoop] = {}

    def splittable(loop: ast.For, others: list[ast.AST], reductions: list[ast.Call], combinable: bool) -> bool:
        if not (_is_affine_range(loop.iter, modules) and not loop.orelse):
            return False
        local = _stored(loop)
        # Names the rest of the kernel reads (another loop reusing `i` as its own loop variable does not
        # count: the loop binds it before its body reads it).
        outside = set()
        for other in others:
            their_vars = _for_targets(other)
            outside |= {n.id for n in ast.walk(other) if isinstance(n, ast.Name) and n.id not in their_vars}
        if local & (outside | tensors | params):
            return False  # the loop rebinds a name the rest of the kernel sees
        made = {n.targets[0].id for n in ast.walk(loop) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call) and _module_call(n.value, modules)}
        loop_vars = _for_targets(loop)
        rules = _Rules(modules, tensors | made)
        # `dst[...] = w_tile` with a tile made before the loop: the first iteration may take over that
        # result while it still waits for a destination, which a split would have committed already.
        claims = any(isinstance(n, (ast.Assign, ast.AugAssign)) and isinstance(n.value, ast.Name)
                     and n.value.id not in local for n in ast.walk(loop))
        return not claims and all(rules.statement(s) for s in loop.body) and combinable \
            and _writes_follow(loop, made, reductions) and _bound_before_read(loop.body, set(loop_vars), local - loop_vars)

    for stmt in fn.body:
        if not isinstance(stmt, ast.For) or not isinstance(stmt.target, ast.Name):
            continue
        reductions, combinable = _reductions_over(stmt, stmt.target.id)
        if splittable(stmt, [s for s in fn.body if s is not stmt], reductions, combinable):
            inner = frozenset(node.iter.lineno + offset for node in ast.walk(stmt) if isinstance(node, ast.For))
            reduction_lines = frozenset(line + offset for node in ast.walk(stmt) if isinstance(node, ast.Assign)
                                        and any(node.value is call for call in reductions)
                                        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1))
            loops[stmt.iter.lineno + offset] = SplitLoop(inner, reduction_lines)
    return loops


def _module_names(func: Any, tree: ast.AST) -> set[str]:
    """Names the kernel can see that are bound to the NKI modules or numpy (globals, or imports in its body)."""
    names = set()
    for name, value in getattr(func, "__globals__", {}).items():
        mod = getattr(value, "__name__", None) if inspect.ismodule(value) else None
        if mod and (mod.split(".")[0] in _MODULE_ROOTS or mod.startswith(_SIMULATOR_PACKAGE)):
            names.add(name)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                root = (module or alias.name).split(".")[0]
                if root in _MODULE_ROOTS:
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def _root(node: ast.AST) -> ast.Name | None:
    while isinstance(node, (ast.Attribute, ast.Call)):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node if isinstance(node, ast.Name) else None


def _module_call(call: ast.Call, modules: set[str]) -> bool:
    root = _root(call.func)
    if root is None:
        return False
    if isinstance(call.func, ast.Name):
        return call.func.id in _PURE_BUILTINS or call.func.id in modules
    return root.id in modules


def _is_affine_range(node: ast.AST, modules: set[str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr == "affine_range" and _module_call(node, modules)


def _bound_before_read(body: list[ast.stmt], bound: set[str], local: set[str]) -> bool:
    """Each of the loop's own names is assigned in an iteration before that iteration reads it: a value
    carried from one iteration to the next would be missing in the child's first one. Names bound inside
    an inner block count as bound only there."""
    for stmt in body:
        if isinstance(stmt, ast.For):
            if not _reads_bound(stmt.iter, bound, local):
                return False
            if not _bound_before_read(stmt.body, {*bound, *_stored(stmt.target)}, local):
                return False
        elif isinstance(stmt, ast.If):
            if not (_reads_bound(stmt.test, bound, local) and _bound_before_read(stmt.body, set(bound), local)
                    and _bound_before_read(stmt.orelse, set(bound), local)):
                return False
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            # `acc += tile` on a tile this iteration made is fine; `n += 1` on a carried count is not
            if (stmt.target.id in local and stmt.target.id not in bound) or not _reads_bound(stmt.value, bound, local):
                return False
        else:
            value = getattr(stmt, "value", None)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
            if value is not None and not _reads_bound(value, bound, local):
                return False
            for dst in targets:
                if dst is None:
                    continue
                if isinstance(dst, ast.Subscript):
                    if not (_reads_bound(dst.value, bound, local) and _reads_bound(dst.slice, bound, local)):
                        return False
                bound |= _stored(dst)
            if isinstance(stmt, (ast.Expr, ast.Assert)) and not _reads_bound(stmt, bound, local):
                return False
    return True


def _stored(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _for_targets(node: ast.AST) -> set[str]:
    return {n.target.id for n in ast.walk(node) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)}


def _reads_bound(node: ast.AST, bound: set[str], local: set[str]) -> bool:
    return all(n.id in bound for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
               and n.id in local)


# Operator names (as written: `np.max`, `nl.maximum`) of reductions the halves can combine (`IDEMPOTENT`).
_IDEMPOTENT_NAMES = frozenset(("max", "min", "maximum", "minimum", "amax", "amin"))


def _reductions_over(loop: ast.For, var: str) -> tuple[list[ast.Call], bool]:
    """The `nl.loop_reduce(..., loop_indices=[.., var, ..])` calls in the loop, accumulations across its
    iterations, and whether each combines with max or min, which the halves can do apart (any other
    operator would make them one long chain)."""
    calls = []
    for node in ast.walk(loop):
        if isinstance(node, ast.Call) and any(
                k.arg == "loop_indices" and any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(k.value))
                for k in node.keywords):
            calls.append(node)
    combinable = True
    for call in calls:
        op = next((k.value for k in call.keywords if k.arg == "op"), call.args[1] if len(call.args) > 1 else None)
        if not (isinstance(op, ast.Attribute) and op.attr in _IDEMPOTENT_NAMES):
            combinable = False
    return calls, combinable


def _writes_follow(loop: ast.For, local: set[str], reductions: list[ast.Call]) -> bool:
    """Every write to a tensor from outside the loop is indexed by the loop variable (or by a name computed
    from it): otherwise all iterations write one region (an accumulation, or a race), and the halves
    could not be merged. The destinations of `reductions` (max/min across the loop) are exempt: the
    merge combines them."""
    var = loop.target.id  # type: ignore[union-attr]
    follows = {var}
    assigns = [n for n in ast.walk(loop) if isinstance(n, (ast.Assign, ast.AugAssign))]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            value_names = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            if value_names & follows:
                for dst in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    for n in ast.walk(dst):
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in follows:
                            follows.add(n.id)
                            changed = True
    written = []
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and any(node.value is call for call in reductions):
            continue
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            written += [d for d in (node.targets if isinstance(node, ast.Assign) else [node.target])
                        if isinstance(d, ast.Subscript)]
        elif isinstance(node, ast.Call):
            # nl.store(dst[...], ...), and the ISA's dst= form
            first = node.args[:1] if isinstance(node.func, ast.Attribute) and node.func.attr == "store" else []
            written += [a for a in (*first, *(k.value for k in node.keywords if k.arg == "dst"))
                        if isinstance(a, ast.Subscript)]
    for dst in written:
        if isinstance(dst.value, ast.Name) and dst.value.id in local:
            continue  # a tensor the iteration made itself
        if not any(isinstance(n, ast.Name) and n.id in follows for n in ast.walk(dst.slice)):
            return False
    return True


class _Rules:
    """What a splittable loop body may do: bind names of its own, write elements of tensors (declared by
    the kernel, given to it, or made by an NKI call in the iteration), call the NKI modules, numpy and
    pure builtins and the read-only tensor methods, and read anything."""

    def __init__(self, modules: set[str], writable: set[str]) -> None:
        self.modules = modules
        self.writable = writable  # tensors the kernel declared or was given, and those the iteration makes

    def statement(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.For):
            return not stmt.orelse and self._target(stmt.target) and self.expression(stmt.iter) \
                and all(self.statement(s) for s in stmt.body)
        if isinstance(stmt, ast.If):
            return self.expression(stmt.test) and all(self.statement(s) for s in (*stmt.body, *stmt.orelse))
        if isinstance(stmt, ast.Expr):
            return self.expression(stmt.value)
        if isinstance(stmt, ast.Assert):
            return self.expression(stmt.test) and (stmt.msg is None or self.expression(stmt.msg))
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            dsts = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            return all(self._target(d) for d in dsts) and (value is None or self.expression(value))
        return isinstance(stmt, ast.Pass)

    def _target(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return True  # one of the loop's own names (checked by the caller)
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self._target(e) for e in node.elts)
        if isinstance(node, ast.Subscript):
            return isinstance(node.value, ast.Name) and node.value.id in self.writable and self.expression(node.slice)
        return False

    def expression(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                if isinstance(sub.func, ast.Name):
                    if sub.func.id not in _PURE_BUILTINS and sub.func.id not in self.modules:
                        return False
                else:
                    root = _root(sub.func)
                    if root is None:
                        return False
                    if root.id not in self.modules and not (isinstance(sub.func, ast.Attribute)
                                                            and sub.func.attr in _PURE_METHODS):
                        return False  # a method of a Python object (`lst.append`), or a tensor alias (`reshape`)
                    if any(isinstance(n, ast.Attribute) and n.attr == "random" for n in ast.walk(sub.func)):
                        return False  # numpy's random generator: state the child would advance alone
            elif isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await, ast.ListComp,
                                  ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                return False
        return True
