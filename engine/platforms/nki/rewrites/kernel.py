"""What the rewrites know about a kernel's source, and the AST helpers every rewrite shares.

`Kernel` is the view of a parsed module the visitors work on: the `nl`/`nisa` aliases, the kernel
function and its parameters, the names bound to compile-time scalars, and each node's parent (so a site
can be replaced or removed in place).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator

from engine.agents.parsing import kernel_function
from engine.agents.rewrites import RewriteError, dotted

# Activation functions the Scalar Engine applies after its free multiply-add: f(data * scale + bias).
ACTIVATIONS = {"exp", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "gelu", "relu", "square", "log", "sin", "cos",
               "softplus", "mish", "erf"}
SCALAR_FUNCTIONS = {"_even_tile", "min", "max", "int", "float", "abs", "len", "round"}


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
            # One walk for every name's count (a walk per name made this quadratic in the kernel's size).
            stores = Counter(n.id for n in ast.walk(self.fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
            for name in stored_names(self.fn):
                counts[name] = counts.get(name, 0) + stores[name]
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


def replace_node(kernel: Kernel, old: ast.AST, new: ast.AST) -> None:
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


def remove_statement(kernel: Kernel, stmt: ast.stmt) -> None:
    block, index = kernel.block_of(stmt)
    del block[index]
    if not block:
        block.append(ast.Pass())


def walk_kernel(kernel: Kernel) -> Iterator[ast.AST]:
    if kernel.fn is None:
        return iter(())
    return ast.walk(kernel.fn)


def line_of(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


def short(node: ast.AST, limit: int = 70) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
