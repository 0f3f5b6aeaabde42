"""Rewrites that drop a transfer the kernel does not need.

    visit_hbm_round_trip  a tile stored to a scratch HBM tensor and loaded back unchanged: the stored SBUF
                          tile is read instead (and the store dropped when nothing else reads the tensor)
    visit_psum_copy       a PSUM tile copied to SBUF only for Vector or Scalar Engine instructions: they
                          read the PSUM tile themselves

Both must be certain the tile read is the tile written (same shape and dtype, nothing writing it in
between); where the source does not say so, they report no site.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from engine.agents.rewrites import Site, dotted
from engine.platforms.nki.rewrites.kernel import (
    ACTIVATIONS,
    Kernel,
    assignments_to,
    line_of,
    loaded_names,
    name_load_nodes,
    name_loads,
    remove_statement,
    rename_loads,
    replace_node,
    short,
    simplify,
    statement_blocks,
    stored_names,
    walk_kernel,
)

# ---------------------------------------------------------------------------------------------------
# drop a round trip through a scratch HBM tensor: use the stored SBUF tile instead of loading it back


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
    return {n.target.id for n in walk_kernel(kernel) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)}


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
        sites.append(Site(f"line {line_of(trip.load)} loads back `{short(trip.load.args[0])}`, stored from SBUF at "
                          f"line {line_of(trip.store)}: use the stored tile", line_of(trip.load)))
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
        remove_statement(kernel, stmt)
    else:
        replace_node(kernel, trip.load, ast.Name(value.id, ast.Load()))
    if any(_region_use(kernel, n) == "load" for n in name_load_nodes(kernel.fn, trip.scratch)):
        return
    remove_statement(kernel, trip.store)  # nothing reads the scratch tensor any more
    if name_loads(kernel.fn, trip.scratch) == 0:
        declaration = _declaration(kernel, trip.scratch)
        if declaration is not None:
            remove_statement(kernel, declaration)


# ---------------------------------------------------------------------------------------------------
# drop a copy of a PSUM tile into SBUF whose copy only feeds compute engines: they read PSUM themselves


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
                    replace_node(kernel, n, copy.deepcopy(found.source))
                remove_statement(kernel, found.stmt)
        sites.append(Site(f"`{short(found.stmt)}` (line {line_of(found.stmt)}) copies PSUM to SBUF only for compute "
                          f"engines: they read `{short(found.source)}` in PSUM directly", line_of(found.stmt)))
    return sites
