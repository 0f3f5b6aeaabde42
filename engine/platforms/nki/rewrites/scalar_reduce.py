"""fuse_scalar_reduce: an elementwise op with a scalar followed by a free-axis reduction of its result becomes one
`nisa.tensor_scalar_reduce` (NKI 0.6).

    y = data op0 operand0            nisa.tensor_scalar(dst=y, data=x, op0=OP, operand0=c)   or  y = nl.OP(x, c)
    r = reduce(y over the free axis) nisa.tensor_reduce(dst=r, op=ROP, data=y, axis=1)       or  r = nl.max(y, axis=1, keepdims=True)
  ->
    nisa.tensor_scalar_reduce(dst=y, data=x, op0=OP, operand0=c, reduce_op=ROP, reduce_res=r)

The Vector Engine then reads the tile once instead of twice (the attention tutorial scales the scores and takes
their row max this way). Only in current-generation kernels (the `nki` package), whose destination-first ISA has
the instruction; the rewrite writes that form itself.

Exactly the same values, so only where the source proves them: the instruction reduces its float32 result
before writing `dst`, so `y` must be a float32 tile, and it reduces every free axis, so `y` must be 2-D (both read
from `y`'s declaration, or from the float32 2-D tile `nl.OP(x, c)` computes on). `y` is not written and `r` not
touched between the two statements, which sit in the same block.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from engine.agents.rewrites import Site, dotted
from engine.platforms.nki.rewrites.kernel import (
    Kernel,
    line_of,
    loaded_names,
    remove_statement,
    short,
    stored_names,
    walk_kernel,
)

# nl elementwise ops with a scalar that tensor_scalar computes alike, and whether `nl.OP(c, x)` reverses them.
ELEMENTWISE = {"add": False, "multiply": False, "maximum": False, "minimum": False, "subtract": True,
               "divide": True}
# nl reductions and the ALU operator tensor_scalar_reduce accumulates with.
REDUCTIONS = {"sum": "add", "max": "maximum", "min": "minimum"}
TILE_CONSTRUCTORS = {"ndarray", "zeros", "ones", "full", "empty"}
MAX_DERIVATION = 4  # how many `nl.OP(x, c)` steps back a float32 2-D tile is traced


@dataclass
class _Elementwise:
    statement: ast.stmt
    dst: str  # the result tile's name
    keywords: dict[str, ast.expr]  # data, op0, operand0 (and reverse0) as tensor_scalar_reduce takes them
    declared: bool  # dst is a declared tile (destination-first form); else `dst = nl.OP(...)` makes it


@dataclass
class _Reduction:
    statement: ast.stmt
    result: ast.expr  # the reduce_res operand: the tile written
    name: str  # its base name
    operator: str  # ALU operator name
    declared: bool


def _current_aliases(tree: ast.Module) -> tuple[str, str] | None:
    """(nl alias, nisa alias or '') of a kernel that imports only the nki package; None for any other."""
    nl, nisa, current = "", "", False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "neuronxcc" or alias.name.startswith("neuronxcc."):
                    return None
                if alias.name == "nki" or alias.name.startswith("nki."):
                    current = True
                if alias.name == "nki.language":
                    nl = alias.asname or alias.name
                if alias.name == "nki.isa":
                    nisa = alias.asname or alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "neuronxcc":
            return None
    return (nl, nisa) if current and nl else None


def _keywords(call: ast.Call) -> dict[str, ast.expr] | None:
    if call.args or any(k.arg is None for k in call.keywords):
        return None  # positional or **kwargs: the form is not read here
    return {k.arg: k.value for k in call.keywords}


def _is_free_axis(node: ast.expr | None) -> bool:
    if isinstance(node, ast.Tuple) and len(node.elts) == 1:
        node = node.elts[0]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return node.operand.value == 1
    return isinstance(node, ast.Constant) and node.value == 1 and not isinstance(node.value, bool)


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


class _Tiles:
    """What the source proves about a tile name: declared once, float32, 2-D."""

    def __init__(self, kernel: Kernel, nl: str) -> None:
        self.kernel, self.nl = kernel, nl
        self.definitions: dict[str, list[ast.AST]] = {}  # an expression, or the loop or with that binds it
        for node in walk_kernel(kernel):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name in stored_names(target):
                        self.definitions.setdefault(name, []).append(node.value)
            elif isinstance(node, ast.For | ast.AugAssign | ast.AnnAssign | ast.NamedExpr | ast.withitem):
                bound = node.optional_vars if isinstance(node, ast.withitem) else node.target
                for name in stored_names(bound) if bound is not None else ():
                    self.definitions.setdefault(name, []).append(node)  # not a tile we can read

    def nl_call(self, node: ast.AST, names: set[str]) -> str | None:
        name = dotted(node.func) if isinstance(node, ast.Call) else ""
        prefix = f"{self.nl}."
        return name[len(prefix):] if name.startswith(prefix) and name[len(prefix):] in names else None

    def only_definition(self, name: str) -> ast.expr | None:
        values = self.definitions.get(name, [])
        return values[0] if len(values) == 1 and isinstance(values[0], ast.expr) else None

    def is_declared(self, name: str) -> bool:
        value = self.only_definition(name)
        return value is not None and self.nl_call(value, TILE_CONSTRUCTORS) is not None

    def declared_float32(self, name: str) -> bool:
        value = self.only_definition(name)
        if value is None or self.nl_call(value, TILE_CONSTRUCTORS) is None:
            return False
        dtype = {k.arg: k.value for k in value.keywords}.get("dtype", value.args[1] if len(value.args) > 1 else None)
        return dtype is not None and dotted(dtype) == f"{self.nl}.float32"

    def float32_matrix(self, name: str, depth: int = 0) -> bool:
        value = self.only_definition(name)
        if value is None or depth > MAX_DERIVATION:
            return False
        if self.nl_call(value, TILE_CONSTRUCTORS):
            shape = value.args[0] if value.args else {k.arg: k.value for k in value.keywords}.get("shape")
            return isinstance(shape, ast.Tuple) and len(shape.elts) == 2 and self.declared_float32(name)
        operands = self.scalar_operation(value)
        return operands is not None and self.float32_matrix(operands[0], depth + 1)

    def scalar_operation(self, value: ast.expr) -> tuple[str, ast.expr, bool, str] | None:
        """(tile name, scalar, reversed, op) of `nl.OP(tile, scalar)` or `nl.OP(scalar, tile)`."""
        op = self.nl_call(value, set(ELEMENTWISE))
        if op is None or len(value.args) != 2 or value.keywords:
            return None
        first, second = value.args
        if isinstance(first, ast.Name) and not self.kernel.is_scalar(first) and self.kernel.is_scalar(second):
            return first.id, second, False, op
        if isinstance(second, ast.Name) and not self.kernel.is_scalar(second) and self.kernel.is_scalar(first):
            return second.id, first, ELEMENTWISE[op], op
        return None


def _elementwise(tiles: _Tiles, nisa: str, stmt: ast.stmt) -> _Elementwise | None:
    nl = tiles.nl
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and nisa \
            and dotted(stmt.value.func) == f"{nisa}.tensor_scalar":
        kw = _keywords(stmt.value)
        if kw is None or not {"dst", "data", "op0", "operand0"} <= set(kw) <= {"dst", "data", "op0", "operand0",
                                                                              "reverse0"}:
            return None
        dst = kw.pop("dst")
        if not (isinstance(dst, ast.Name) and tiles.is_declared(dst.id) and tiles.float32_matrix(dst.id)):
            return None
        return _Elementwise(stmt, dst.id, kw, declared=True)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        found = tiles.scalar_operation(stmt.value)
        if found is None or not tiles.float32_matrix(found[0]) or tiles.only_definition(stmt.targets[0].id) is None:
            return None
        data, operand, reverse, op = found
        kw = {"data": ast.Name(data, ast.Load()), "op0": ast.Attribute(ast.Name(nl, ast.Load()), op, ast.Load()),
              "operand0": operand}
        if reverse:
            kw["reverse0"] = ast.Constant(True)
        return _Elementwise(stmt, stmt.targets[0].id, kw, declared=False)
    return None


def _reduction_of(tiles: _Tiles, nisa: str, stmt: ast.stmt, tile: str) -> _Reduction | None:
    """The statement when it reduces `tile` over its free axis into a float32 result."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and nisa \
            and dotted(stmt.value.func) == f"{nisa}.tensor_reduce":
        kw = _keywords(stmt.value)
        if kw is None or not {"dst", "op", "data", "axis"} <= set(kw) <= {"dst", "op", "data", "axis", "keepdims"}:
            return None
        operator = dotted(kw["op"]).removeprefix(f"{tiles.nl}.")
        dst = kw["dst"]
        base = dst.value if isinstance(dst, ast.Subscript) else dst
        # a float32 destination: there both keep the float32 reduction unrounded
        if not (dotted(kw["data"]) == tile and _is_free_axis(kw["axis"]) and operator in REDUCTIONS.values()
                and isinstance(base, ast.Name) and tiles.declared_float32(base.id)):
            return None
        return _Reduction(stmt, dst, base.id, operator, declared=True)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        op = tiles.nl_call(stmt.value, set(REDUCTIONS))
        if op is None or len(stmt.value.args) != 1 or dotted(stmt.value.args[0]) != tile:
            return None
        kw = {k.arg: k.value for k in stmt.value.keywords}
        if set(kw) != {"axis", "keepdims"} or not (_is_free_axis(kw["axis"]) and _is_true(kw["keepdims"])):
            return None
        name = stmt.targets[0].id
        if tiles.only_definition(name) is None:
            return None
        return _Reduction(stmt, ast.Name(name, ast.Load()), name, REDUCTIONS[op], declared=False)
    return None


def _pairs(kernel: Kernel, tiles: _Tiles, nisa: str) -> list[tuple[_Elementwise, _Reduction, list[ast.stmt]]]:
    """Each elementwise statement and the reduction of its result later in the same block, with the declarations
    of the reduction's result in between (they move up with it)."""
    pairs = []
    for node in walk_kernel(kernel):
        block = getattr(node, "body", None)
        if not isinstance(block, list):
            continue
        for index, stmt in enumerate(block):
            first = _elementwise(tiles, nisa, stmt)
            if first is None:
                continue
            for later in range(index + 1, len(block)):
                reduction = _reduction_of(tiles, nisa, block[later], first.dst)
                if reduction is not None:
                    moved = [s for s in block[index + 1:later] if _declares(tiles, s, reduction.name)]
                    between = [s for s in block[index + 1:later] if not any(s is m for m in moved)]
                    touched = set().union(*(stored_names(s) | loaded_names(s) for s in between))
                    written = stored_names(between) | {dotted(s.targets[0].value) for s in between
                                                       if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Subscript)}
                    written |= {first.dst for s in between if _writes_into(s, first.dst)}
                    # y unchanged until it is reduced; r neither read nor written before (it is now written earlier),
                    # nor the names its expression or its declaration read
                    reads = loaded_names(reduction.result).union(*(loaded_names(m.value) for m in moved))
                    if first.dst not in written and reduction.name not in touched and not (reads & written):
                        pairs.append((first, reduction, moved))
                    break
                if first.dst in stored_names(block[later]) or _writes_into(block[later], first.dst):
                    break
    return pairs


def _declares(tiles: _Tiles, stmt: ast.stmt, name: str) -> bool:
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and dotted(stmt.targets[0]) == name
            and tiles.only_definition(name) is stmt.value and tiles.is_declared(name))


def _writes_into(stmt: ast.stmt, name: str) -> bool:
    """A destination-first call writing `name` (dst=name or dst=name[...])."""
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call):
            for k in node.keywords:
                if k.arg == "dst" and (dotted(k.value) == name or (isinstance(k.value, ast.Subscript)
                                                                   and dotted(k.value.value) == name)):
                    return True
    return False


def _declaration(nl: str, name: str, shape: ast.expr) -> ast.Assign:
    def attr(a: str) -> ast.expr:
        return ast.Attribute(ast.Name(nl, ast.Load()), a, ast.Load())
    call = ast.Call(attr("ndarray"), [shape], [ast.keyword("dtype", attr("float32")), ast.keyword("buffer", attr("sbuf"))])
    return ast.Assign(targets=[ast.Name(name, ast.Store())], value=call)


def visit_tensor_scalar_reduce(tree: ast.Module, target: int | None) -> list[Site]:
    aliases = _current_aliases(tree)
    if aliases is None:
        return []  # tensor_scalar_reduce as written here is NKI 0.6's destination-first form
    nl, nisa = aliases
    kernel = Kernel(tree)
    tiles = _Tiles(kernel, nl)
    sites = []
    for first, reduction, moved in _pairs(kernel, tiles, nisa):
        if len(sites) == target:
            if not nisa:
                nisa = "nisa"
                imports = [i for i, n in enumerate(tree.body) if isinstance(n, ast.Import | ast.ImportFrom)]
                tree.body.insert(imports[-1] + 1 if imports else 0, ast.Import([ast.alias("nki.isa", "nisa")]))
            call = ast.Call(ast.Attribute(ast.Name(nisa, ast.Load()), "tensor_scalar_reduce", ast.Load()), [],
                            [ast.keyword("dst", ast.Name(first.dst, ast.Load()))]
                            + [ast.keyword(k, v) for k, v in first.keywords.items()]
                            + [ast.keyword("reduce_op", ast.Attribute(ast.Name(nl, ast.Load()), reduction.operator,
                                                                      ast.Load())),
                               ast.keyword("reduce_res", reduction.result)])
            data = first.keywords["data"]
            shape_of_data = ast.Attribute(data, "shape", ast.Load())
            new: list[ast.stmt] = list(moved)
            if not first.declared:
                new.append(_declaration(nl, first.dst, shape_of_data))
            if not reduction.declared:
                rows = ast.Subscript(ast.Attribute(data, "shape", ast.Load()), ast.Constant(0), ast.Load())
                new.append(_declaration(nl, reduction.name, ast.Tuple([rows, ast.Constant(1)], ast.Load())))
            new.append(ast.Expr(call))
            for statement in (reduction.statement, *moved):
                remove_statement(kernel, statement)
            block, index = kernel.block_of(first.statement)
            block[index:index + 1] = new
        where = line_of(first.statement)
        sites.append(Site(f"`{short(first.statement)}` (line {where}) and its {reduction.operator} reduction "
                          f"(line {line_of(reduction.statement)}) become one tensor_scalar_reduce", where))
    return sites
