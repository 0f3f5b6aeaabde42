"""A catalog of known, semantics-preserving rewrites of NKI kernel source, on the Python AST.

Each `Rewrite` finds its *sites* in a kernel (places where it applies) and transforms one site. The
offline agent proposes sites as plans and applies them; the evaluator then checks every result like any
other candidate, so a rewrite that is wrong for some kernel simply produces an incorrect candidate.

The rewrites recognise the two styles the product sees: our NKIBench baselines (whole-tile `nl.load`,
`nl.<op>` calls, slices, `_even_tile` tile sizes) and compiler-style kernels (pre-declared
`nl.ndarray` buffers written through subscripts). A rewrite that does not recognise a kernel's shape
reports no site; it never guesses.

    rewrite.sites(source) -> list[Site]           where it applies (empty: it does not)
    rewrite.apply(source, index) -> str           the source with site `index` rewritten
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from optimizer.agents.parsing import kernel_function

# Activation functions the Scalar Engine applies after its free multiply-add: f(data * scale + bias).
ACTIVATIONS = {"exp", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "relu", "square", "log", "sin", "cos",
               "softplus", "mish", "erf"}
SCALAR_FUNCTIONS = {"_even_tile", "min", "max", "int", "float", "abs", "len", "round"}
FREE_TILE_MAX = 8192  # elements per partition we let a free-dimension tile limit grow to
FREE_TILE_MIN = 128  # and shrink to


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


# ---------------------------------------------------------------------------------------------------
# AST helpers


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def stored_names(node: ast.AST | list[ast.stmt]) -> set[str]:
    nodes = node if isinstance(node, list) else [node]
    out: set[str] = set()
    for n in nodes:
        for sub in ast.walk(n):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
                out.add(sub.id)
    return out


def loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def name_load_nodes(fn: ast.AST, name: str) -> list[ast.Name]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]


def name_loads(fn: ast.AST, name: str) -> int:
    return len(name_load_nodes(fn, name))


def rename_loads(fn: ast.AST, old: str, new: str) -> None:
    for n in name_load_nodes(fn, old):
        n.id = new


def statement_blocks(fn: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list of the function (its body, loop and branch bodies), outermost first."""
    return [n.body for n in ast.walk(fn) if isinstance(getattr(n, "body", None), list)]


def assignments_to(fn: ast.AST, name: str) -> int:
    return sum(1 for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store))


def subscript_stores_to(fn: ast.AST, name: str) -> int:
    return sum(1 for n in ast.walk(fn)
               if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and dotted(n.value) == name)


class Kernel:
    """What the rewrites need to know about a module: aliases, the kernel function, scalars, parents."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.nl, self.nisa = "nl", "nisa"
        has_isa = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "neuronxcc.nki.language":
                        self.nl = alias.asname or alias.name
                    if alias.name == "neuronxcc.nki.isa":
                        self.nisa, has_isa = alias.asname or alias.name, True
        self.has_isa = has_isa
        self.fn = kernel_function(tree)
        self.params = {a.arg for a in self.fn.args.args} if self.fn else set()
        self.parents: dict[ast.AST, ast.AST] = {}
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.scalars = self._scalar_names()

    def is_nl(self, node: ast.AST, *ops: str) -> bool:
        return isinstance(node, ast.Call) and dotted(node.func) in {f"{self.nl}.{op}" for op in ops}

    def nl_attr(self, op: str) -> ast.expr:
        return ast.Attribute(value=ast.Name(self.nl, ast.Load()), attr=op, ctx=ast.Load())

    def isa_call(self, instruction: str, **keywords: ast.expr) -> ast.Call:
        self.need_isa()
        func = ast.Attribute(value=ast.Name(self.nisa, ast.Load()), attr=instruction, ctx=ast.Load())
        return ast.Call(func=func, args=[], keywords=[ast.keyword(arg=k, value=v) for k, v in keywords.items()])

    def need_isa(self) -> None:
        if not self.has_isa:
            imports = [i for i, n in enumerate(self.tree.body) if isinstance(n, ast.Import | ast.ImportFrom)]
            node = ast.Import(names=[ast.alias(name="neuronxcc.nki.isa", asname="nisa")])
            self.tree.body.insert(imports[-1] + 1 if imports else 0, node)
            self.has_isa, self.nisa = True, "nisa"

    # -- scalars: compile-time constants (shapes, tile sizes, module constants), never tiles or loop indices
    def is_scalar(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, int | float) and not isinstance(node.value, bool)
        if isinstance(node, ast.Name):
            return node.id in self.scalars
        if isinstance(node, ast.BinOp):
            return self.is_scalar(node.left) and self.is_scalar(node.right)
        if isinstance(node, ast.UnaryOp):
            return self.is_scalar(node.operand)
        if isinstance(node, ast.Attribute):
            return dotted(node).startswith(f"{self.nl}.tile_size.") or node.attr == "shape"
        if isinstance(node, ast.Subscript):
            return isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            return ((name in SCALAR_FUNCTIONS or name.startswith("math.")) and not node.keywords
                    and all(self.is_scalar(a) for a in node.args))
        return False

    def _scalar_names(self) -> set[str]:
        """Names bound once to a compile-time scalar: module constants, shape values, tile sizes."""
        self.scalars = set()
        assigns = [n for n in self.tree.body if isinstance(n, ast.Assign) and len(n.targets) == 1]
        counts: dict[str, int] = {}
        for node in assigns:
            for name in stored_names(node):
                counts[name] = counts.get(name, 0) + 1
        if self.fn is not None:
            fn_assigns = [n for n in ast.walk(self.fn) if isinstance(n, ast.Assign) and len(n.targets) == 1]
            assigns += fn_assigns
            for name in stored_names(self.fn):
                counts[name] = counts.get(name, 0) + assignments_to(self.fn, name)
        changed = True
        while changed:
            changed = False
            for node in assigns:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    names, ok = [target.id], self.is_scalar(node.value)
                elif isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
                    names = [e.id for e in target.elts]
                    ok = isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
                else:
                    continue
                if ok and all(counts.get(n, 0) == 1 and n not in self.scalars for n in names):
                    self.scalars.update(names)
                    changed = True
        return self.scalars

    def block_of(self, stmt: ast.stmt) -> tuple[list[ast.stmt], int]:
        parent = self.parents[stmt]
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and any(s is stmt for s in block):
                return block, next(i for i, s in enumerate(block) if s is stmt)
        raise RewriteError(f"statement at line {getattr(stmt, 'lineno', '?')} is not in a block")

    def statement_of(self, node: ast.AST) -> ast.stmt:
        while not isinstance(node, ast.stmt):
            node = self.parents[node]
        return node

    def fresh_name(self, base: str) -> str:
        used = {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)}
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}{n}"
        return name

    def single_use_definition(self, name_node: ast.AST, before: ast.stmt) -> ast.Assign | None:
        """The statement `name = <expr>` in the same block as `before`, earlier, when `name` is assigned
        once, read once, and nothing in between writes a name the expression reads."""
        if not isinstance(name_node, ast.Name) or self.fn is None:
            return None
        name = name_node.id
        if assignments_to(self.fn, name) != 1 or name_loads(self.fn, name) != 1:
            return None
        block, index = self.block_of(before)
        for j in range(index - 1, -1, -1):
            stmt = block[j]
            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and stmt.targets[0].id == name):
                between = stored_names(block[j + 1:index])
                return stmt if not (between & loaded_names(stmt.value)) else None
        return None


def _replace(kernel: Kernel, old: ast.AST, new: ast.AST) -> None:
    parent = kernel.parents[old]
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            break
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    break
    kernel.parents[new] = parent
    ast.copy_location(new, old)


def _remove_statement(kernel: Kernel, stmt: ast.stmt) -> None:
    block, index = kernel.block_of(stmt)
    del block[index]
    if not block:
        block.append(ast.Pass())


def _walk_kernel(kernel: Kernel) -> Iterator[ast.AST]:
    if kernel.fn is None:
        return iter(())
    return ast.walk(kernel.fn)


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def _short(node: ast.AST, limit: int = 70) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------------
# 1. fold a multiply (or divide) by a constant into the activation's free scale


def _scaled_operand(kernel: Kernel, node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    if kernel.is_nl(node, "multiply") and len(node.args) == 2 and not node.keywords:
        a, b = node.args
        if kernel.is_scalar(b) and not kernel.is_scalar(a):
            return a, b
        if kernel.is_scalar(a) and not kernel.is_scalar(b):
            return b, a
    if kernel.is_nl(node, "divide") and len(node.args) == 2 and not node.keywords:
        a, b = node.args
        if kernel.is_scalar(b) and not kernel.is_scalar(a):
            return a, ast.BinOp(left=ast.Constant(1.0), op=ast.Div(), right=b)
    return None


def visit_fold_scale(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for node in list(_walk_kernel(kernel)):
        if not (isinstance(node, ast.Call) and kernel.is_nl(node, *ACTIVATIONS) and len(node.args) == 1
                and not node.keywords):
            continue
        arg, definition = node.args[0], None
        found = _scaled_operand(kernel, arg)
        if found is None:
            definition = kernel.single_use_definition(arg, kernel.statement_of(node))
            found = _scaled_operand(kernel, definition.value) if definition else None
        if found is None:
            continue
        op = dotted(node.func).rsplit(".", 1)[1]
        if len(sites) == target:
            data, scale = found
            new = kernel.isa_call("activation", op=kernel.nl_attr(op), data=data, scale=scale)
            _replace(kernel, node, new)
            if definition is not None:
                _remove_statement(kernel, definition)
        sites.append(Site(f"`{_short(node)}` (line {_line(node)}) becomes one activation with scale", _line(node)))
    return sites


# ---------------------------------------------------------------------------------------------------
# 2. fuse a multiply-by-constant followed by an add/subtract of a tile into nisa.scalar_tensor_tensor


def visit_scalar_tensor_tensor(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for node in list(_walk_kernel(kernel)):
        if not (kernel.is_nl(node, "add", "subtract") and len(node.args) == 2 and not node.keywords):
            continue
        op1 = dotted(node.func).rsplit(".", 1)[1]
        match = None
        for position in (0, 1):
            inner, other = node.args[position], node.args[1 - position]
            definition = None
            found = _scaled_operand(kernel, inner)
            if found is None:
                definition = kernel.single_use_definition(inner, kernel.statement_of(node))
                found = _scaled_operand(kernel, definition.value) if definition else None
            if found is not None and not kernel.is_scalar(other):
                match = (position, found, other, definition)
                break
        if match is None:
            continue
        if len(sites) == target:
            position, (data, scale), other, definition = match
            keywords = {"data": data, "op0": kernel.nl_attr("multiply"), "operand0": scale,
                        "op1": kernel.nl_attr(op1), "operand1": other}
            if op1 == "subtract" and position == 1:
                keywords["reverse1"] = ast.Constant(True)  # other - (data * scale)
            _replace(kernel, node, kernel.isa_call("scalar_tensor_tensor", **keywords))
            if definition is not None:
                _remove_statement(kernel, definition)
        sites.append(Site(f"`{_short(node)}` (line {_line(node)}) becomes one scalar_tensor_tensor", _line(node)))
    return sites


# ---------------------------------------------------------------------------------------------------
# 3. reduce in the activation instead of a separate sum: nisa.activation_reduce


def _activation_parts(kernel: Kernel, node: ast.AST) -> dict[str, ast.expr] | None:
    if isinstance(node, ast.Call) and kernel.is_nl(node, *ACTIVATIONS) and len(node.args) == 1 and not node.keywords:
        return {"op": kernel.nl_attr(dotted(node.func).rsplit(".", 1)[1]), "data": node.args[0]}
    if isinstance(node, ast.Call) and dotted(node.func) == f"{kernel.nisa}.activation" and not node.args:
        parts = {k.arg: k.value for k in node.keywords if k.arg}
        if set(parts) <= {"op", "data", "bias", "scale"} and {"op", "data"} <= set(parts):
            return parts
    return None


def _is_row_sum(kernel: Kernel, node: ast.AST) -> bool:
    if not (kernel.is_nl(node, "sum") and len(node.args) == 1):
        return False
    kw = {k.arg: k.value for k in node.keywords}
    axis, keep = kw.get("axis"), kw.get("keepdims")
    return (set(kw) == {"axis", "keepdims"} and isinstance(axis, ast.Constant) and axis.value in (1, -1)
            and isinstance(keep, ast.Constant) and keep.value is True)


def visit_activation_reduce(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for node in list(_walk_kernel(kernel)):
        if not _is_row_sum(kernel, node):
            continue
        arg = node.args[0]
        stmt = kernel.statement_of(node)
        parts = _activation_parts(kernel, arg)
        definition = None
        if parts is None and isinstance(arg, ast.Name) and kernel.fn and assignments_to(kernel.fn, arg.id) == 1:
            block, index = kernel.block_of(stmt)
            for j in range(index - 1, -1, -1):
                s = block[j]
                if isinstance(s, ast.Assign) and len(s.targets) == 1 and dotted(s.targets[0]) == arg.id:
                    if not (stored_names(block[j + 1:index]) & {arg.id}):
                        definition = s
                    break
            parts = _activation_parts(kernel, definition.value) if definition else None
        if parts is None or not isinstance(parts["data"], ast.Name):
            continue  # the row count comes from data.shape[0]: a named tile keeps that simple
        if len(sites) == target:
            anchor = definition or stmt
            block, index = kernel.block_of(anchor)
            sums = kernel.fresh_name(f"{parts['data'].id}_row_sums")
            shape = ast.Tuple(elts=[ast.Subscript(value=ast.Attribute(value=ast.Name(parts["data"].id, ast.Load()),
                                                                       attr="shape", ctx=ast.Load()),
                                                  slice=ast.Constant(0), ctx=ast.Load()), ast.Constant(1)],
                              ctx=ast.Load())
            alloc = ast.Assign(targets=[ast.Name(sums, ast.Store())], value=ast.Call(
                func=kernel.nl_attr("ndarray"), args=[shape],
                keywords=[ast.keyword("dtype", kernel.nl_attr("float32")), ast.keyword("buffer", kernel.nl_attr("sbuf"))]))
            call = kernel.isa_call("activation_reduce", **parts, reduce_op=kernel.nl_attr("add"),
                                   reduce_res=ast.Name(sums, ast.Load()))
            if definition is not None:
                definition.value = call  # the activated tile is still used elsewhere
                block.insert(index, alloc)
            else:
                discard = kernel.fresh_name(f"{parts['data'].id}_activated")
                block[index:index] = [alloc, ast.Assign(targets=[ast.Name(discard, ast.Store())], value=call)]
            _replace(kernel, node, ast.Name(sums, ast.Load()))
        sites.append(Site(f"`{_short(node)}` (line {_line(node)}) is computed by the activation's reduction", _line(node)))
    return sites


# ---------------------------------------------------------------------------------------------------
# 4. load loop-invariant tiles once: hoist them, or cache a whole inner loop nest's tiles in SBUF


@dataclass
class _Invariant:
    call: ast.Call
    outer: ast.For
    path: list[ast.For]
    prefix: dict[str, ast.expr]  # scalar names assigned along the path, by their defining expression


def _range_count(kernel: Kernel, loop: ast.For) -> ast.expr | None:
    it = loop.iter
    if (isinstance(it, ast.Call) and dotted(it.func) in {f"{kernel.nl}.affine_range", f"{kernel.nl}.sequential_range", "range"}
            and len(it.args) == 1 and not it.keywords and isinstance(loop.target, ast.Name)):
        return it.args[0]
    return None


def _invariant_loads(kernel: Kernel) -> list[_Invariant]:
    found: list[_Invariant] = []
    if kernel.fn is None:
        return found
    loops = [n for n in ast.walk(kernel.fn) if isinstance(n, ast.For)]
    for outer in loops:
        if _range_count(kernel, outer) is None:
            continue
        variant = stored_names(outer)  # everything written in the loop, its index included

        def scan(body: list[ast.stmt], path: list[ast.For], prefix: dict[str, ast.expr], allowed: set[str],
                 outer: ast.For = outer, variant: set[str] = variant) -> None:
            prefix, allowed = dict(prefix), set(allowed)
            for stmt in body:
                if isinstance(stmt, ast.For):
                    count = _range_count(kernel, stmt)
                    if count is not None and not (loaded_names(count) & variant):
                        scan(stmt.body, path + [stmt], prefix, allowed | {stmt.target.id})
                    continue
                if (path and isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                        and isinstance(stmt.targets[0], ast.Name)
                        and assignments_to(kernel.fn, stmt.targets[0].id) == 1
                        and not any(isinstance(n, ast.Call) for n in ast.walk(stmt.value))
                        and loaded_names(stmt.value) & variant <= allowed):
                    # An index computed from the inner loops' indices (n0 = n * tile_n): copied into the cache nest.
                    prefix[stmt.targets[0].id] = stmt.value
                    allowed.add(stmt.targets[0].id)
                    continue
                for node in ast.walk(stmt):
                    if (kernel.is_nl(node, "load") and len(node.args) == 1 and isinstance(node.args[0], ast.Subscript)
                            and dotted(node.args[0].value) in kernel.params
                            and loaded_names(node) & variant <= allowed):
                        found.append(_Invariant(node, outer, path, prefix))

        scan(outer.body, [], {}, set())
    return found


def _substitute(expr: ast.expr, values: dict[str, ast.expr]) -> ast.expr:
    class Sub(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:  # noqa: N802 (ast API)
            if isinstance(node.ctx, ast.Load) and node.id in values:
                return copy.deepcopy(values[node.id])
            return node

    return Sub().visit(copy.deepcopy(expr))


def simplify(expr: ast.expr) -> ast.expr:
    """Fold the trivial arithmetic left by substituting 0 for loop indices ((0 + 1) * t - 0 * t -> t)."""
    if not isinstance(expr, ast.BinOp):
        return expr
    left, right = simplify(expr.left), simplify(expr.right)

    def const(node: ast.expr) -> int | float | None:
        value = node.value if isinstance(node, ast.Constant) else None
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    lc, rc = const(left), const(right)
    if lc is not None and rc is not None and isinstance(expr.op, ast.Add | ast.Sub | ast.Mult):
        value = lc + rc if isinstance(expr.op, ast.Add) else lc - rc if isinstance(expr.op, ast.Sub) else lc * rc
        return ast.Constant(value)
    if isinstance(expr.op, ast.Mult):
        if lc == 0 or rc == 0:
            return ast.Constant(0)
        if lc == 1:
            return right
        if rc == 1:
            return left
    if isinstance(expr.op, ast.Add):
        if lc == 0:
            return right
        if rc == 0:
            return left
    if isinstance(expr.op, ast.Sub):
        if rc == 0:
            return left
        if ast.dump(left) == ast.dump(right):
            return ast.Constant(0)
        # (a + b) - a -> b: the extent of a slice `start:start + size`
        if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Add) and ast.dump(left.left) == ast.dump(right):
            return left.right
    return ast.BinOp(left=left, op=expr.op, right=right)


def _tile_extents(inv: _Invariant) -> list[ast.expr] | None:
    """Extent of each sliced dimension, as an expression of loop-invariant names only."""
    source = inv.call.args[0]
    elements = source.slice.elts if isinstance(source.slice, ast.Tuple) else [source.slice]
    zero = {loop.target.id: ast.Constant(0) for loop in inv.path}
    resolved: dict[str, ast.expr] = dict(zero)
    for name, expr in inv.prefix.items():
        resolved[name] = _substitute(expr, resolved)
    extents = []
    for element in elements:
        if isinstance(element, ast.Slice):
            if element.lower is None or element.upper is None or element.step is not None:
                return None
            extents.append(simplify(ast.BinOp(left=_substitute(element.upper, resolved), op=ast.Sub(),
                                              right=_substitute(element.lower, resolved))))
    return extents if len(extents) == 2 else None


def visit_hoist_loads(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for inv in _invariant_loads(kernel):
        extents = _tile_extents(inv) if inv.path else []
        if extents is None:
            continue
        source_name = dotted(inv.call.args[0].value)
        if inv.path:
            loops = " x ".join(f"`{loop.target.id}`" for loop in inv.path)
            what = (f"load of `{_short(inv.call.args[0])}` (line {_line(inv.call)}) repeats for every "
                    f"`{inv.outer.target.id}`: cache its tiles over {loops} in SBUF before that loop")
        else:
            what = f"load of `{_short(inv.call.args[0])}` (line {_line(inv.call)}) moves before the `{inv.outer.target.id}` loop"
        if len(sites) == target:
            _hoist(kernel, inv, extents, source_name)
        sites.append(Site(what, _line(inv.call)))
    return sites


def _hoist(kernel: Kernel, inv: _Invariant, extents: list[ast.expr], source_name: str) -> None:
    block, index = kernel.block_of(inv.outer)
    if not inv.path:
        name = kernel.fresh_name(f"{source_name}_tile")
        hoisted = ast.Assign(targets=[ast.Name(name, ast.Store())], value=inv.call)
        _replace(kernel, inv.call, ast.Name(name, ast.Load()))
        block.insert(index, hoisted)
        return
    partitions, free = extents
    counts = [_range_count(kernel, loop) for loop in inv.path]
    total: ast.expr = copy.deepcopy(counts[0])
    for count in counts[1:]:
        total = ast.BinOp(left=total, op=ast.Mult(), right=copy.deepcopy(count))
    flat: ast.expr = ast.Name(inv.path[0].target.id, ast.Load())
    for loop, count in zip(inv.path[1:], counts[1:], strict=True):
        flat = ast.BinOp(left=ast.BinOp(left=flat, op=ast.Mult(), right=copy.deepcopy(count)), op=ast.Add(),
                         right=ast.Name(loop.target.id, ast.Load()))

    def window() -> ast.Subscript:
        lower = ast.BinOp(left=copy.deepcopy(flat), op=ast.Mult(), right=copy.deepcopy(free))
        upper = ast.BinOp(left=ast.BinOp(left=copy.deepcopy(flat), op=ast.Add(), right=ast.Constant(1)),
                          op=ast.Mult(), right=copy.deepcopy(free))
        return ast.Subscript(value=ast.Name(cache, ast.Load()),
                             slice=ast.Tuple(elts=[ast.Slice(), ast.Slice(lower=lower, upper=upper)], ctx=ast.Load()),
                             ctx=ast.Load())

    cache = kernel.fresh_name(f"{source_name}_cache")
    dtype = ast.Attribute(value=ast.Name(source_name, ast.Load()), attr="dtype", ctx=ast.Load())
    alloc = ast.Assign(targets=[ast.Name(cache, ast.Store())], value=ast.Call(
        func=kernel.nl_attr("ndarray"),
        args=[ast.Tuple(elts=[copy.deepcopy(partitions), ast.BinOp(left=total, op=ast.Mult(), right=copy.deepcopy(free))],
                        ctx=ast.Load())],
        keywords=[ast.keyword("dtype", dtype), ast.keyword("buffer", kernel.nl_attr("sbuf"))]))
    fill_target = window()
    fill_target.ctx = ast.Store()
    body: list[ast.stmt] = [ast.Assign(targets=[fill_target], value=copy.deepcopy(inv.call))]
    needed = loaded_names(inv.call)
    for depth in range(len(inv.path) - 1, -1, -1):
        loop = inv.path[depth]
        assigns = [ast.Assign(targets=[ast.Name(n, ast.Store())], value=copy.deepcopy(e))
                   for n, e in inv.prefix.items() if n in needed and _defined_in(n, loop)]
        body = [ast.For(target=ast.Name(loop.target.id, ast.Store()), iter=copy.deepcopy(loop.iter),
                        body=assigns + body, orelse=[])]
    _replace(kernel, inv.call, window())
    block[index:index] = [alloc] + body


def _defined_in(name: str, loop: ast.For) -> bool:
    return any(isinstance(s, ast.Assign) and dotted(s.targets[0]) == name for s in loop.body)


# ---------------------------------------------------------------------------------------------------
# 5. reuse a tile that is already loaded instead of loading the same region again


def visit_reuse_loads(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    if kernel.fn is None:
        return sites
    for block in statement_blocks(kernel.fn):
        for i, first in enumerate(block):
            if not (isinstance(first, ast.Assign) and len(first.targets) == 1 and kernel.is_nl(first.value, "load")):
                continue
            for j in range(i + 1, len(block)):
                second = block[j]
                between = block[i + 1:j]
                if any(kernel.is_nl(n, "store") for s in between for n in ast.walk(s)):
                    break
                if not (isinstance(second, ast.Assign) and len(second.targets) == 1
                        and ast.dump(second.value) == ast.dump(first.value)):
                    continue
                if stored_names(between) & loaded_names(first.value):
                    break
                plan = _reuse_plan(kernel, first.targets[0], second.targets[0], between)
                if plan is None:
                    continue
                if len(sites) == target:
                    rename_loads(kernel.fn, *plan)
                    _remove_statement(kernel, second)
                sites.append(Site(f"line {_line(second)} loads `{_short(second.value.args[0])}` again; reuse the tile "
                                  f"loaded at line {_line(first)}", _line(second)))
                break
    return sites


def _reuse_plan(kernel: Kernel, first: ast.expr, second: ast.expr, between: list[ast.stmt]) -> tuple[str, str] | None:
    fn = kernel.fn
    if isinstance(first, ast.Name) and isinstance(second, ast.Name):
        if assignments_to(fn, first.id) == 1 and assignments_to(fn, second.id) == 1:
            return second.id, first.id
        return None
    if isinstance(first, ast.Subscript) and isinstance(second, ast.Subscript):
        a, b = dotted(first.value), dotted(second.value)
        if not a or not b or a == b or ast.dump(first.slice) != ast.dump(second.slice):
            return None
        if subscript_stores_to(fn, a) != 1 or subscript_stores_to(fn, b) != 1:
            return None
        shapes = {}
        for n in ast.walk(fn):
            if (isinstance(n, ast.Assign) and len(n.targets) == 1 and dotted(n.targets[0]) in (a, b)
                    and kernel.is_nl(n.value, "ndarray") and n.value.args):
                shapes[dotted(n.targets[0])] = ast.dump(n.value.args[0])
        if shapes.get(a) is None or shapes.get(a) != shapes.get(b):
            return None
        return b, a
    return None


# ---------------------------------------------------------------------------------------------------
# 6. tile size changes: the free-dimension limit given to the tiling helper


MOVING_FMAX = 512  # nl.tile_size.gemm_moving_fmax: the largest moving free size of one matmul


def _tile_limits(kernel: Kernel) -> Iterator[tuple[ast.Call, int, int]]:
    """Calls of a tiling helper `f(extent, limit)` whose limit is a free-dimension size we may change:
    an integer literal (divisor 0), or the matmul moving-tile maximum, possibly already divided
    (`nl.tile_size.gemm_moving_fmax // d`, divisor d), which may only shrink: it bounds a PSUM tile."""
    moving = f"{kernel.nl}.tile_size.gemm_moving_fmax"
    for node in _walk_kernel(kernel):
        if not (isinstance(node, ast.Call) and len(node.args) == 2 and "tile" in dotted(node.func).lower()):
            continue
        limit = node.args[1]
        if isinstance(limit, ast.Constant) and isinstance(limit.value, int) and not isinstance(limit.value, bool):
            yield node, limit.value, 0
        elif dotted(limit) == moving:
            yield node, MOVING_FMAX, 1
        elif (isinstance(limit, ast.BinOp) and isinstance(limit.op, ast.FloorDiv) and dotted(limit.left) == moving
              and isinstance(limit.right, ast.Constant) and isinstance(limit.right.value, int) and limit.right.value > 0):
            yield node, MOVING_FMAX // limit.right.value, limit.right.value


def _visit_tile_limit(tree: ast.Module, target: int | None, grow: bool) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for call, limit, divisor in list(_tile_limits(kernel)):
        if grow and divisor:
            continue
        values = []
        value = limit
        while True:
            value = value * 2 if grow else value // 2
            if not FREE_TILE_MIN <= value <= FREE_TILE_MAX:
                break
            values.append(value)
        for value in values:
            verb = "raise" if grow else "lower"
            sites.append(Site(f"{verb} the free-dimension tile limit `{ast.unparse(call)}` to {value} "
                              f"(line {_line(call)})", _line(call)))
            if len(sites) - 1 == target:
                if divisor:
                    moving = ast.Attribute(value=kernel.nl_attr("tile_size"), attr="gemm_moving_fmax", ctx=ast.Load())
                    call.args[1] = ast.BinOp(left=moving, op=ast.FloorDiv(), right=ast.Constant(MOVING_FMAX // value))
                else:
                    call.args[1] = ast.Constant(value)
    return sites


def visit_larger_tiles(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_tile_limit(tree, target, grow=True)


def visit_smaller_tiles(tree: ast.Module, target: int | None) -> list[Site]:
    return _visit_tile_limit(tree, target, grow=False)


# ---------------------------------------------------------------------------------------------------
# 7. interchange a perfect nest of two independent loops


def visit_interchange(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for outer in list(_walk_kernel(kernel)):
        if not (isinstance(outer, ast.For) and len(outer.body) == 1 and isinstance(outer.body[0], ast.For)):
            continue
        inner = outer.body[0]
        affine = f"{kernel.nl}.affine_range"
        if not (isinstance(outer.iter, ast.Call) and dotted(outer.iter.func) == affine
                and isinstance(inner.iter, ast.Call) and dotted(inner.iter.func) == affine):
            continue
        if loaded_names(inner.iter) & stored_names(outer.target) or outer.orelse or inner.orelse:
            continue
        if len(sites) == target:
            outer.target, inner.target = inner.target, outer.target
            outer.iter, inner.iter = inner.iter, outer.iter
        sites.append(Site(f"swap the `{dotted(outer.target)}` and `{dotted(inner.target)}` loops (line {_line(outer)})",
                          _line(outer)))
    return sites


# ---------------------------------------------------------------------------------------------------
# 8. drop a round trip through a scratch HBM tensor: use the stored SBUF tile instead of loading it back


HBM_BUFFERS = {"hbm", "shared_hbm", "private_hbm"}
UNARY_SAME_TYPE = ACTIVATIONS | {"copy", "negative", "abs", "reciprocal", "identity"}
BINARY_SAME_TYPE = {"add", "subtract", "multiply", "divide", "maximum", "minimum"}
DESTINATION_KEYWORDS = {"dst", "out", "reduce_res"}  # arguments an instruction writes into


def _only_assignment(kernel: Kernel, name: str) -> ast.Assign | None:
    """The one statement `name = ...` of the kernel, if `name` is bound nowhere else."""
    if kernel.fn is None or assignments_to(kernel.fn, name) != 1:
        return None
    return next((n for n in ast.walk(kernel.fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
                 and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name), None)


def _declaration(kernel: Kernel, name: str) -> ast.Assign | None:
    """The one statement `name = nl.ndarray(...)` (or nl.zeros/nl.full) of the kernel, if `name` has no other."""
    assignment = _only_assignment(kernel, name)
    return assignment if assignment is not None and kernel.is_nl(assignment.value, "ndarray", "zeros", "full") else None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _dtype_key(kernel: Kernel, expr: ast.expr | None, depth: int = 0) -> str | None:
    """A comparable spelling of a dtype expression: `nl.float32`/`np.float32` -> float32, `t.dtype` -> the
    dtype `t` was declared with (or `t.dtype` for a kernel input)."""
    if expr is None or depth > 8:
        return None
    if isinstance(expr, ast.Attribute) and expr.attr == "dtype" and isinstance(expr.value, ast.Name):
        if expr.value.id in kernel.params:
            return f"{expr.value.id}.dtype"
        declared = _declaration(kernel, expr.value.id)
        return _dtype_key(kernel, _keyword(declared.value, "dtype"), depth + 1) if declared else None
    if isinstance(expr, ast.Attribute) and dotted(expr.value) in {kernel.nl, "np", "numpy"}:
        return expr.attr
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    return None


def _extents(kernel: Kernel, region: ast.Subscript) -> list[str] | None:
    """The shape of the tile a whole-region access reads or writes: one extent per slice (an integer or
    scalar index drops its dimension), as comparable source text."""
    elements = region.slice.elts if isinstance(region.slice, ast.Tuple) else [region.slice]
    out = []
    for element in elements:
        if isinstance(element, ast.Slice):
            if element.lower is None or element.upper is None or element.step is not None:
                return None
            out.append(ast.unparse(simplify(ast.BinOp(left=element.upper, op=ast.Sub(), right=element.lower))))
        elif not (kernel.is_scalar(element) or dotted(element) in _loop_indices(kernel)):
            return None  # an index tile (nl.arange…): the shape is not a slice's
    return out


def _loop_indices(kernel: Kernel) -> set[str]:
    return {n.target.id for n in _walk_kernel(kernel) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)}


def _tile_type(kernel: Kernel, expr: ast.expr, depth: int = 0) -> tuple[list[str], str] | None:
    """(shape, dtype) of an SBUF tile expression when it is certain from the source, else None."""
    if depth > 8:
        return None
    if isinstance(expr, ast.Name):
        definition = _only_assignment(kernel, expr.id)
        return _tile_type(kernel, definition.value, depth + 1) if definition else None
    if not isinstance(expr, ast.Call):
        return None
    keywords = {k.arg for k in expr.keywords}
    if kernel.is_nl(expr, "load") and len(expr.args) == 1 and keywords <= {"dtype"}:
        source = expr.args[0]
        if not isinstance(source, ast.Subscript) or not isinstance(source.value, ast.Name):
            return None
        shape = _extents(kernel, source)
        dtype = _keyword(expr, "dtype") or ast.Attribute(value=source.value, attr="dtype", ctx=ast.Load())
        key = _dtype_key(kernel, dtype)
        return (shape, key) if shape is not None and key else None
    if kernel.is_nl(expr, "ndarray", "zeros") and len(expr.args) == 1 and isinstance(expr.args[0], ast.Tuple):
        buffer = _keyword(expr, "buffer")
        key = _dtype_key(kernel, _keyword(expr, "dtype"))
        if buffer is None or dotted(buffer) != f"{kernel.nl}.sbuf" or not key:
            return None
        return [ast.unparse(e) for e in expr.args[0].elts], key
    if not keywords <= {"dtype"}:
        return None
    forced = _dtype_key(kernel, _keyword(expr, "dtype")) if "dtype" in keywords else None
    if "dtype" in keywords and not forced:
        return None
    if kernel.is_nl(expr, *UNARY_SAME_TYPE) and len(expr.args) == 1:
        inner = _tile_type(kernel, expr.args[0], depth + 1)
        return (inner[0], forced or inner[1]) if inner else None
    if kernel.is_nl(expr, *BINARY_SAME_TYPE) and len(expr.args) == 2:
        a, b = (_tile_type(kernel, arg, depth + 1) for arg in expr.args)
        if a is None or a != b:
            return None  # a scalar operand, broadcasting or mixed dtypes: not certain
        return a[0], forced or a[1]
    return None


def _in_place_writes(kernel: Kernel, name: str, nodes: list[ast.stmt]) -> int:
    """Writes into the tile `name` without rebinding it: `name[...] = `, `name += `, `dst=name` arguments."""
    count = 0
    for stmt in nodes:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and dotted(n.value) == name:
                count += 1
            elif isinstance(n, ast.AugAssign) and dotted(n.target) == name:
                count += 1
            elif isinstance(n, ast.keyword) and n.arg in DESTINATION_KEYWORDS:
                value = n.value.value if isinstance(n.value, ast.Subscript) else n.value
                count += dotted(value) == name
    return count


def _aliased(kernel: Kernel, name: str) -> bool:
    """`w = name` or `w = name[...]`: another name for (part of) the tile, written behind our back."""
    for n in ast.walk(kernel.fn):
        if isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None:
            value = n.value.value if isinstance(n.value, ast.Subscript) else n.value
            if isinstance(value, ast.Name) and value.id == name:
                return True
    return False


def _scratch_tensors(kernel: Kernel) -> dict[str, ast.Assign]:
    """HBM tensors the kernel declares itself, never returns, and only stores to and loads from by region."""
    found: dict[str, ast.Assign] = {}
    if kernel.fn is None:
        return found
    returned = set()
    for n in ast.walk(kernel.fn):
        if isinstance(n, ast.Return) and n.value is not None:
            returned |= loaded_names(n.value)
    for n in ast.walk(kernel.fn):
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)):
            continue
        name = n.targets[0].id
        buffer = _keyword(n.value, "buffer") if isinstance(n.value, ast.Call) else None
        if (name in kernel.params or name in returned or _declaration(kernel, name) is not n
                or not kernel.is_nl(n.value, "ndarray") or buffer is None
                or dotted(buffer) not in {f"{kernel.nl}.{b}" for b in HBM_BUFFERS}):
            continue
        if all(_region_use(kernel, use) is not None for use in ast.walk(kernel.fn)
               if isinstance(use, ast.Name) and use.id == name and isinstance(use.ctx, ast.Load)):
            found[name] = n
    return found


def _region_use(kernel: Kernel, use: ast.Name) -> str | None:
    """'load' for `nl.load(S[...])`, 'store' for `nl.store(S[...], value=…)`, else None."""
    region = kernel.parents.get(use)
    if not (isinstance(region, ast.Subscript) and region.value is use and isinstance(region.ctx, ast.Load)):
        return None
    call = kernel.parents.get(region)
    if kernel.is_nl(call, "load") and call.args and call.args[0] is region and not call.keywords:
        return "load"
    if (kernel.is_nl(call, "store") and call.args and call.args[0] is region
            and isinstance(kernel.parents.get(call), ast.Expr)
            and len(call.args) + len(call.keywords) == 2 and all(k.arg == "value" for k in call.keywords)):
        return "store"
    return None


def _stored_value(call: ast.Call) -> ast.expr:
    return call.args[1] if len(call.args) == 2 else call.keywords[0].value


@dataclass
class _RoundTrip:
    store: ast.Expr
    load: ast.Call
    scratch: str
    value: ast.expr  # the stored tile


def _round_trips(kernel: Kernel) -> list[_RoundTrip]:
    found: list[_RoundTrip] = []
    scratch = _scratch_tensors(kernel)
    if not scratch:
        return found
    for block in statement_blocks(kernel.fn):
        for i, store in enumerate(block):
            call = store.value if isinstance(store, ast.Expr) else None
            if not (kernel.is_nl(call, "store") and call.args and isinstance(call.args[0], ast.Subscript)):
                continue
            name = dotted(call.args[0].value)
            if name not in scratch or _region_use(kernel, call.args[0].value) != "store":
                continue
            region, value = call.args[0], _stored_value(call)
            if isinstance(value, ast.Name):
                # The tile may be filled in place before the store (in this block), never after it.
                writes = _in_place_writes(kernel, value.id, kernel.fn.body)
                if _aliased(kernel, value.id) or writes != _in_place_writes(kernel, value.id, block[:i]):
                    continue
            elif not isinstance(value, ast.Call):
                continue  # a slice of a bigger tile: a view that later writes may change
            shape_dtype = _tile_type(kernel, value)
            scratch_dtype = _dtype_key(kernel, _keyword(scratch[name].value, "dtype"))
            if shape_dtype is None or shape_dtype != (_extents(kernel, region), scratch_dtype):
                continue  # the store would reshape, broadcast or cast: the loaded tile is not the stored one
            watched = loaded_names(region) | ({value.id} if isinstance(value, ast.Name) else set())
            for j in range(i + 1, len(block)):
                stmt = block[j]
                loads = [n for n in ast.walk(stmt) if kernel.is_nl(n, "load") and n.args
                         and isinstance(n.args[0], ast.Subscript) and dotted(n.args[0].value) == name]
                same = [n for n in loads if ast.dump(n.args[0]) == ast.dump(region)]
                if same and not isinstance(stmt, ast.For | ast.While | ast.If | ast.With | ast.Try):
                    load = same[0]
                    if _load_is_replaceable(kernel, stmt, load, block[:j + 1]):
                        found.append(_RoundTrip(store, load, name, value))
                    break
                if any(dotted(n.args[0].value) == name for n in ast.walk(stmt)
                       if kernel.is_nl(n, "store") and n.args and isinstance(n.args[0], ast.Subscript)):
                    break  # another write to the scratch tensor: the region may have changed
                if stored_names(stmt) & watched:
                    break
    return found


def _load_is_replaceable(kernel: Kernel, stmt: ast.stmt, load: ast.Call, before: list[ast.stmt]) -> bool:
    """`t = nl.load(S[...])` with `t` bound once, never written in place and read only after this statement
    (not by an earlier statement of a loop body, on the next iteration); or the load as an operand."""
    parent = kernel.parents.get(load)
    if isinstance(stmt, ast.Assign) and stmt.value is load:
        target = stmt.targets[0] if len(stmt.targets) == 1 else None
        return (isinstance(target, ast.Name) and assignments_to(kernel.fn, target.id) == 1
                and not _aliased(kernel, target.id) and _in_place_writes(kernel, target.id, kernel.fn.body) == 0
                and not any(name_load_nodes(s, target.id) for s in before))
    if isinstance(parent, ast.keyword):
        return parent.arg not in DESTINATION_KEYWORDS
    return isinstance(parent, ast.Call) and any(a is load for a in parent.args)


def visit_hbm_round_trip(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for trip in _round_trips(kernel):
        if len(sites) == target:
            _drop_round_trip(kernel, trip)
        sites.append(Site(f"line {_line(trip.load)} loads back `{_short(trip.load.args[0])}`, stored from SBUF at "
                          f"line {_line(trip.store)}: use the stored tile", _line(trip.load)))
    return sites


def _drop_round_trip(kernel: Kernel, trip: _RoundTrip) -> None:
    value = trip.value
    call = trip.store.value
    if not isinstance(value, ast.Name):  # name the stored expression so both the store and the reader see it
        tile = kernel.fresh_name(f"{trip.scratch}_tile")
        block, index = kernel.block_of(trip.store)
        block.insert(index, ast.Assign(targets=[ast.Name(tile, ast.Store())], value=value))
        value = ast.Name(tile, ast.Load())
        if len(call.args) == 2:
            call.args[1] = value
        else:
            call.keywords[0].value = value
    stmt = kernel.statement_of(trip.load)
    if isinstance(stmt, ast.Assign) and stmt.value is trip.load:
        rename_loads(kernel.fn, stmt.targets[0].id, value.id)
        _remove_statement(kernel, stmt)
    else:
        _replace(kernel, trip.load, ast.Name(value.id, ast.Load()))
    if any(_region_use(kernel, n) == "load" for n in name_load_nodes(kernel.fn, trip.scratch)):
        return
    _remove_statement(kernel, trip.store)  # nothing reads the scratch tensor any more
    if name_loads(kernel.fn, trip.scratch) == 0:
        declaration = _declaration(kernel, trip.scratch)
        if declaration is not None:
            _remove_statement(kernel, declaration)


# ---------------------------------------------------------------------------------------------------
# 9. drop a copy of a PSUM tile into SBUF whose copy only feeds compute engines: they read PSUM themselves


PSUM_PRODUCERS = {"nc_matmul", "nc_transpose"}  # nisa instructions whose result is in PSUM
NL_OPERAND_OPS = UNARY_SAME_TYPE | BINARY_SAME_TYPE | {"sum", "max", "min", "mean"}
ISA_OPERAND_OPS = {"activation", "activation_reduce", "tensor_scalar", "tensor_tensor", "tensor_reduce",
                   "scalar_tensor_tensor", "tensor_copy"}
ISA_DATA_KEYWORDS = {"data", "data1", "data2", "src"}  # the tile operands those instructions read


def _psum_result(kernel: Kernel, node: ast.AST) -> bool:
    """An expression whose value is a fresh PSUM tile: a Tensor Engine result, or a PSUM allocation."""
    if not isinstance(node, ast.Call):
        return False
    if dotted(node.func) in {f"{kernel.nisa}.{op}" for op in PSUM_PRODUCERS}:
        return _keyword(node, "engine") is None  # nc_transpose on the Vector Engine writes SBUF
    if kernel.is_nl(node, "zeros", "ndarray"):
        buffer = _keyword(node, "buffer")
        return buffer is not None and dotted(buffer) == f"{kernel.nl}.psum"
    return False


def _psum_name(kernel: Kernel, name: str) -> bool:
    """Every binding of `name` in the kernel is a PSUM tile (`+=` accumulates into the same one)."""
    bindings = 0
    for n in ast.walk(kernel.fn):
        if isinstance(n, ast.Assign) and any(name in stored_names(t) for t in n.targets):
            if not (len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and _psum_result(kernel, n.value)):
                return False
            bindings += 1
        elif isinstance(n, ast.AugAssign) and dotted(n.target) == name:
            bindings += 1
    return bindings > 0 and bindings == assignments_to(kernel.fn, name) and name not in kernel.params


def _psum_copy_source(kernel: Kernel, call: ast.AST) -> ast.expr | None:
    """The PSUM operand of `nl.copy(p)` / `nisa.tensor_copy(src=p)` when the copy changes nothing but
    the memory (no dtype, no mask)."""
    if kernel.is_nl(call, "copy") and len(call.args) == 1 and not call.keywords:
        source = call.args[0]
    elif isinstance(call, ast.Call) and dotted(call.func) == f"{kernel.nisa}.tensor_copy":
        keywords = {k.arg for k in call.keywords}
        if not keywords <= {"src", "engine"} or len(call.args) + ("src" in keywords) != 1:
            return None
        source = call.args[0] if call.args else _keyword(call, "src")
    else:
        return None
    if _psum_result(kernel, source):
        return source
    base = source.value if isinstance(source, ast.Subscript) else source
    if isinstance(base, ast.Name) and _psum_name(kernel, base.id):
        if isinstance(source, ast.Subscript) and any(isinstance(n, ast.Call) for n in ast.walk(source.slice)):
            return None
        return source
    return None


def _compute_operand(kernel: Kernel, use: ast.Name) -> bool:
    """Whether this read of a tile is an operand of a Vector or Scalar Engine instruction."""
    parent = kernel.parents.get(use)
    if isinstance(parent, ast.Call) and any(a is use for a in parent.args):
        return kernel.is_nl(parent, *NL_OPERAND_OPS)
    if isinstance(parent, ast.keyword) and parent.arg in ISA_DATA_KEYWORDS:
        call = kernel.parents.get(parent)
        return isinstance(call, ast.Call) and dotted(call.func) in {f"{kernel.nisa}.{op}" for op in ISA_OPERAND_OPS}
    return False


@dataclass
class _PsumCopy:
    stmt: ast.Assign
    source: ast.expr


def _psum_copies(kernel: Kernel) -> list[_PsumCopy]:
    found: list[_PsumCopy] = []
    if kernel.fn is None:
        return found
    for block in statement_blocks(kernel.fn):
        for i, stmt in enumerate(block):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                continue
            source = _psum_copy_source(kernel, stmt.value)
            name = stmt.targets[0].id
            if source is None or assignments_to(kernel.fn, name) != 1 or _aliased(kernel, name):
                continue
            uses = name_load_nodes(kernel.fn, name)
            positions = [next((j for j in range(i + 1, len(block))
                               if any(n is use for n in ast.walk(block[j]))), None) for use in uses]
            if not uses or None in positions or not all(_compute_operand(kernel, use) for use in uses):
                continue  # read before the copy, outside this block, by a DMA, a matmul or through a slice
            if not _psum_result(kernel, source):
                # The PSUM tile must hold the same values at every use: nothing writes or rebinds it between.
                base = dotted(source.value if isinstance(source, ast.Subscript) else source)
                span = block[i + 1:max(positions) + 1]
                if stored_names(span) & loaded_names(source) or _in_place_writes(kernel, base, span):
                    continue
            found.append(_PsumCopy(stmt, source))
    return found


def visit_psum_copy(tree: ast.Module, target: int | None) -> list[Site]:
    kernel, sites = Kernel(tree), []
    for found in _psum_copies(kernel):
        name = found.stmt.targets[0].id
        if len(sites) == target:
            if _psum_result(kernel, found.source):
                found.stmt.value = found.source  # the instruction's PSUM result is the tile itself
            else:
                for n in name_load_nodes(kernel.fn, name):
                    _replace(kernel, n, copy.deepcopy(found.source))
                _remove_statement(kernel, found.stmt)
        sites.append(Site(f"`{_short(found.stmt)}` (line {_line(found.stmt)}) copies PSUM to SBUF only for compute "
                          f"engines: they read `{_short(found.source)}` in PSUM directly", _line(found.stmt)))
    return sites


# ---------------------------------------------------------------------------------------------------

CATALOG: tuple[Rewrite, ...] = (
    Rewrite("hoist_invariant_loads", "Load loop-invariant tiles once",
            "A tile whose address does not depend on a loop's index was loaded from HBM again in every iteration "
            "of that loop. Loading it once before the loop (or caching all tiles of an inner loop nest in SBUF "
            "when they fit) removes repeated DMA traffic; it helps whenever the loop runs more than once and the "
            "cached tiles fit in SBUF.", visit_hoist_loads),
    Rewrite("reuse_loaded_tiles", "Reuse a tile that is already in SBUF",
            "The same HBM region was loaded twice while the first copy was still live. Reading the first copy "
            "removes a DMA and its SBUF write.", visit_reuse_loads),
    Rewrite("fold_scale_into_activation", "Fold a constant multiply into the activation's scale",
            "A multiply (or divide) by a compile-time constant right before an activation function is free inside "
            "the Scalar Engine's activation instruction, which computes f(data * scale + bias). Folding it removes "
            "one instruction and one intermediate tile.", visit_fold_scale),
    Rewrite("fuse_scale_and_add", "Fuse scale-then-add into one scalar_tensor_tensor",
            "A tile multiplied by a constant and then added to (or subtracted from) another tile takes two Vector "
            "Engine passes; nisa.scalar_tensor_tensor does both in one instruction, saving a pass over the data and "
            "an instruction's fixed cost.", visit_scalar_tensor_tensor),
    Rewrite("reduce_inside_activation", "Sum rows inside the activation instruction",
            "A row sum of an activation's output was a separate Vector Engine reduction. nisa.activation_reduce "
            "accumulates the sum while the Scalar Engine writes the activation, removing a pass over the tile.",
            visit_activation_reduce),
    Rewrite("larger_free_tiles", "Use larger free-dimension tiles",
            "Each instruction and each DMA has a fixed cost; larger tiles along the free dimension amortize it, "
            "as long as the tiles fit in SBUF and the shape divides evenly.", visit_larger_tiles, repeatable=False),
    Rewrite("smaller_free_tiles", "Use smaller free-dimension tiles",
            "Smaller free-dimension tiles mean more instructions and DMAs, each with its fixed cost, but when a loop "
            "has only a few large tiles they let the load of one tile, the compute on another and the store of a "
            "third overlap (pipelining), and they keep live data within SBUF.", visit_smaller_tiles,
            repeatable=False),
    Rewrite("interchange_loops", "Interchange two independent loops",
            "Swapping a perfect nest of independent loops changes which tiles are consecutive; it can improve reuse "
            "or DMA order, and is neutral when the body is symmetric.", visit_interchange, repeatable=False),
    Rewrite("drop_hbm_round_trip", "Keep a tile in SBUF instead of a round trip through HBM",
            "A tile was stored to a scratch HBM tensor the kernel declared itself and loaded back from the same "
            "region, unchanged in between. Reading the SBUF tile that was stored removes the load's DMA, and the "
            "store's too when nothing else reads the scratch tensor: two HBM transfers and their latency.",
            visit_hbm_round_trip),
    Rewrite("drop_psum_copy", "Let compute engines read PSUM instead of copying it to SBUF",
            "A PSUM tile (a matmul or transpose result) was copied into SBUF although the copy only fed Vector or "
            "Scalar Engine instructions, which can read PSUM themselves. Reading PSUM directly removes a copy "
            "instruction and an SBUF tile; a DMA or a matmul still needs the copy, since they read SBUF.",
            visit_psum_copy),
)

BY_NAME = {rewrite.name: rewrite for rewrite in CATALOG}
