"""Migrating a legacy `neuronxcc.nki` kernel to the standalone `nki` package (NKI 0.6), mechanically.

What is rewritten follows AWS's NKI migration guides (aws-neuron-sdk `nki/migration/index.rst`, published as
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/migration/index.html; read at SDK 2.32, NKI 0.6),
each change naming its section:

- the namespace: `neuronxcc.nki[.language|.isa|.typing|.compiler]` imports become `nki[...]` ("Migrating from
  NKI 0.1.0 to NKI 0.2.0", "New namespace, new APIs");
- ISA calls take their destination first and return nothing ("All ISA functions require a destination
  parameter"): `dst[...] = nisa.f(args)` becomes `nisa.f(dst[...], args)`; `t = nisa.f(args)` declares `t` with
  `nl.ndarray` first (sized from the operand, as the SDK's 0.6 examples size `out_tile` from `sum_tile`), and
  `psum[...] += nisa.nc_matmul(...)` passes `accumulate=True` ("Matmul accumulation", NKI 0.3.0);
- `nki.jit(mode=...)` and `nki.jit(platform_target=...)` lose the argument, and `nki.trace/baremetal/benchmark/
  profile` decorators become `nki.jit` (NKI 0.3.0, "Deprecated and removed APIs"); a jitted function another
  jitted function calls loses its decorator ("Remove nki.jit decorator on sub-kernels");
- a leading `nl.par_dim(n)` in a shape is just `n` (the partition dimension comes first in 0.6);
- `buffer='sbuf'` strings become `nl.sbuf` ("String buffer names no longer supported"); a returned `nl.hbm`
  tensor becomes `nl.shared_hbm` ("Output tensors must use nl.shared_hbm"); list defaults of a kernel's
  parameters become tuples ("Replace list kernel arguments with tuples").

What needs a person is refused with a `MigrationError` naming the line, the construct and the guide's
section: `mask=` ("Deprecation of masking"), `nl.arange`/`nl.mgrid` ("Update indexing syntax"), block
dimensions (a `par_dim` that is not first: "Removing block dimensions from NKI kernels"), `dst_rmw_op`
(`nisa.dma_compute`), an ISA call whose result is used inside an expression or whose destination's shape the
source does not give, and any `nl.`/`nisa.` name the NKI 0.6 reference does not have.

Long because the passes share one list of edits to one source (each pass must see what the others rewrote,
and a refusal must come before any of them is applied); split, the rewrite of one call would span files.

Not checked here: Python side effects inside loops (0.1 ran a loop body once while tracing; 0.2+ runs it like
Python). The migrated kernel is evaluated like any upload, against the same reference on the same inputs.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

GUIDE = "NKI migration guide"

# The public names of the NKI 0.6 reference (SDK 2.32 stubs: nki/api/nki/{language,isa}/__init__.py).
LANGUAGE_NAMES = frozenset("""
DType bool_ int8 int16 int32 uint8 uint16 uint32 float16 float32 bfloat16 tfloat32 float8_e4m3 float8_e4m3fn
float8_e5m2 float8_e5m2_x4 float8_e4m3fn_x4 float8_e8m0fnu float4_e2m1fn_x4 sbuf psum hbm private_hbm shared_hbm
tile_size average prelu bypass MemoryRegion NKIObject NkiTensor is_hbm is_on_chip is_psum is_sbuf add subtract
multiply divide maximum minimum abs_max abs_min abs square power equal not_equal less less_equal greater
greater_equal bitwise_and bitwise_or bitwise_xor invert left_shift right_shift logical_and logical_or logical_xor
logical_not exp log sqrt rsqrt tanh sigmoid relu gelu gelu_apprx_sigmoid gelu_apprx_tanh gelu_dx
gelu_apprx_sigmoid_dx silu silu_dx softplus mish erf erf_dx reciprocal copy sin cos tan arctan ceil floor trunc
negative sign fmod mod sum max min mean prod var all softmax rms_norm where dropout ones full zeros_like
empty_like random_seed expand_dims broadcast_to transpose matmul no_reorder load_transpose2d gather_flattened ds
affine_range sequential_range static_range dynamic_range fori_loop while_loop ndarray zeros load store
program_id num_programs program_ndim shared_constant shared_identity_matrix device_print rand
""".split())
ISA_NAMES = frozenset("""
tensor_engine vector_engine scalar_engine gpsimd_engine unknown_engine engine reduce_cmd dge_mode oob_mode
matmul_perf_mode nc_version dma_engine NkiInstruction NkiValidationError VirtualRegister get_nc_sub_version
get_nc_version dma_copy tensor_copy memset tensor_copy_predicated nc_matmul nc_matmul_mx nc_transpose
dma_transpose tensor_tensor tensor_scalar tensor_reduce tensor_partition_reduce tensor_scalar_cumulative
activation activation_reduce activate2 iota affine_select local_gather nc_n_gather bn_stats bn_aggr
tensor_tensor_scan nc_stream_shuffle rng dropout set_rng_seed rand_set_state rand_get_state rand2 exponential
reciprocal max8 sequence_bounds scalar_tensor_tensor tensor_scalar_reduce core_barrier dma_compute quantize_mx
range_select select_reduce sendrecv register_alloc register_move register_load register_store nc_find_index8
nc_match_replace8 nonzero_with_count topk
""".split())
TOP_NAMES = frozenset({"jit", "simulate", "language", "isa", "typing", "compiler", "collectives"})
LEGACY_DECORATORS = frozenset({"trace", "baremetal", "benchmark", "profile"})

# Legacy functional ISA calls whose arguments are the 0.6 ones after `dst` (checked against both references).
# Value: how a fresh result's destination is sized, from which operand (keyword, position), or None when the
# source does not say (then only `dst[...] = nisa.f(...)` into an existing tile migrates).
ELEMENTWISE = {
    "activation": ("data", 1), "activation_reduce": ("data", 1), "tensor_tensor": ("data1", 0),
    "tensor_scalar": ("data", 0), "scalar_tensor_tensor": ("data", None), "tensor_copy": ("src", 0),
    "reciprocal": ("data", 0), "tensor_tensor_scan": ("data0", 0),
}
DESTINATION_FIRST = frozenset(ELEMENTWISE) | {"nc_matmul", "nc_transpose", "tensor_reduce", "memset"}

HINTS = {
    "arange": "index with integer slices (t[0:128, 0:512]) or an access pattern (.ap); guide: 'Update indexing "
              "syntax for mgrid and arange'",
    "mgrid": "index with integer slices (t[0:128, 0:512]) or an access pattern (.ap); guide: 'Update indexing "
             "syntax for mgrid and arange'",
    "loop_reduce": "NKI 0.6 has no loop_reduce: reduce into the destination with nl.add/nl.maximum or "
                   "nisa.tensor_tensor",
    "par_dim": "NKI 0.6 tiles put the partition dimension first; guide: 'Removing block dimensions from NKI "
               "kernels'",
}


@dataclass(frozen=True)
class MigrationChange:
    line: int  # in the legacy source
    what: str
    guide: str  # the section of the NKI migration guide that asks for it


@dataclass(frozen=True)
class Migration:
    source: str
    changes: tuple[MigrationChange, ...]


class MigrationError(ValueError):
    """A construct the migration cannot rewrite mechanically: its line, what it is and what to do instead."""

    def __init__(self, line: int | None, construct: str, reason: str) -> None:
        self.line, self.construct, self.reason = line, construct, reason
        where = f"line {line}: " if line else ""
        super().__init__(f"{where}{construct}: {reason}")


@dataclass
class _Edit:
    start: int
    end: int
    text: str


class _Source:
    """Offsets into the source text from the AST's (line, UTF-8 byte column) positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self.starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", "replace"))

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        return self.text[self.start(node):self.end(node)]

    def indent_before(self, node: ast.AST) -> str | None:
        """The indentation of the node's line if the node starts it, else None."""
        line = self.lines[node.lineno - 1]  # type: ignore[attr-defined]
        prefix = line[: len(line.encode("utf-8")[: node.col_offset].decode("utf-8", "replace"))]  # type: ignore[attr-defined]
        return prefix if not prefix.strip() else None


_MODULES = {"neuronxcc.nki": "top", "neuronxcc.nki.language": "language", "neuronxcc.nki.isa": "isa",
            "neuronxcc.nki.typing": "typing", "neuronxcc.nki.compiler": "compiler"}


class _Migrator:
    def __init__(self, source: str) -> None:
        self.src = _Source(source)
        self.tree = ast.parse(source)
        self.edits: list[_Edit] = []
        self.changes: list[MigrationChange] = []
        self.aliases: dict[str, str] = {}  # local name -> top / language / isa / typing / compiler
        self.direct: dict[str, tuple[str, str]] = {}  # `from neuronxcc.nki.isa import nc_matmul` -> (isa, name)
        self.handled_calls: set[int] = set()
        self.parents: dict[int, ast.AST] = {}
        for parent in ast.walk(self.tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[id(child)] = parent

    # -- bookkeeping ------------------------------------------------------------------------------------------

    def edit(self, start: int, end: int, text: str) -> None:
        self.edits.append(_Edit(start, end, text))

    def note(self, node: ast.AST, what: str, section: str) -> None:
        self.changes.append(MigrationChange(getattr(node, "lineno", 0), what, section))

    def refuse(self, node: ast.AST, construct: str, reason: str) -> MigrationError:
        return MigrationError(getattr(node, "lineno", None), construct, reason)

    def resolve(self, node: ast.AST) -> tuple[str, str] | None:
        """(module kind, name) for `nl.exp`, `nki.language.exp`, `nisa.nc_matmul`, or a directly imported name."""
        if isinstance(node, ast.Name):
            return self.direct.get(node.id)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in self.aliases:
                return self.aliases[node.value.id], node.attr
            inner = node.value
            if (isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name)
                    and self.aliases.get(inner.value.id) == "top" and inner.attr in ("language", "isa")):
                return inner.attr, node.attr
        return None

    @property
    def language_alias(self) -> str:
        for name, kind in self.aliases.items():
            if kind == "language":
                return name
        for name, kind in self.aliases.items():
            if kind == "top":
                return f"{name}.language"
        return "nl"

    # -- passes -----------------------------------------------------------------------------------------------

    def run(self) -> Migration:
        self.imports()
        self.decorators()
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr, ast.AnnAssign, ast.Return)):
                self.isa_statement(node)
        # In source order, so that a refusal names the first construct that needs a person.
        positioned = [node for node in ast.walk(self.tree) if hasattr(node, "lineno")]
        for node in sorted(positioned, key=lambda n: (n.lineno, n.col_offset)):
            if isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, (ast.Attribute, ast.Name)) and isinstance(getattr(node, "ctx", None), ast.Load):
                self.name_use(node)
        self.output_buffers()
        self.list_defaults()
        text = self.apply()
        try:
            ast.parse(text)
        except SyntaxError as exc:  # a bug of ours: say so rather than hand back broken code
            raise MigrationError(exc.lineno, "the migrated source", f"does not parse ({exc.msg}); please report "
                                 "this kernel") from exc
        ordered = sorted(self.changes, key=lambda change: change.line)
        return Migration(text, tuple(ordered))

    def imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                self._import_from(node)

    def _import(self, node: ast.Import) -> None:
        if not any(alias.name in _MODULES or alias.name.startswith("neuronxcc.nki.") for alias in node.names):
            return
        parts = []
        for alias in node.names:
            kind = _MODULES.get(alias.name)
            if kind is None and alias.name.startswith("neuronxcc.nki."):
                raise self.refuse(node, f"import {alias.name}", "this module has no NKI 0.6 counterpart")
            if kind is None:
                parts.append(alias.name + (f" as {alias.asname}" if alias.asname else ""))
                continue
            new = "nki" + alias.name[len("neuronxcc.nki"):]
            if alias.asname is None:
                raise self.refuse(node, f"import {alias.name}", "import it under a name (import neuronxcc.nki.language "
                                  "as nl) so the migration can follow its uses")
            self.aliases[alias.asname] = kind
            parts.append(new if alias.asname == new else f"{new} as {alias.asname}")
        self.edit(self.src.start(node), self.src.end(node), "import " + ", ".join(parts))
        self.note(node, f"import {', '.join(parts)} (was {self.src.segment(node)})", "New namespace, new APIs")

    def _import_from(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module == "neuronxcc":
            names = [alias for alias in node.names if alias.name == "nki"]
            if not names:
                return
            if len(names) != len(node.names):
                raise self.refuse(node, self.src.segment(node), "import the nki names on their own line")
            local = names[0].asname or "nki"
            self.aliases[local] = "top"
            text = "import nki" + (f" as {local}" if local != "nki" else "")
        elif module in _MODULES:
            kind = _MODULES[module]
            new_module = "nki" + module[len("neuronxcc.nki"):]
            for alias in node.names:
                local = alias.asname or alias.name
                if kind == "top":
                    if alias.name not in ("language", "isa", "typing", "compiler"):
                        raise self.refuse(node, f"from {module} import {alias.name}", "not a module of NKI 0.6")
                    self.aliases[local] = alias.name
                elif kind in ("language", "isa"):
                    known = LANGUAGE_NAMES if kind == "language" else ISA_NAMES
                    if alias.name not in known and alias.name != "par_dim":
                        raise self.refuse(node, f"{module}.{alias.name}", self._missing(kind, alias.name))
                    self.direct[local] = (kind, alias.name)
            kept = [alias for alias in node.names if not (kind == "language" and alias.name == "par_dim")]
            if not kept:  # par_dim only: nothing left to import once every use is rewritten
                line_start = self.src.starts[node.lineno - 1]
                whole_line = self.src.indent_before(node) is not None and node.end_lineno == node.lineno
                end = self.src.starts[node.lineno] if whole_line else self.src.end(node)
                self.edit(line_start if whole_line else self.src.start(node), end, "" if whole_line else "pass")
                self.note(node, "removed the par_dim import (its uses are rewritten)", "New namespace, new APIs")
                return
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in kept)
            text = f"from {new_module} import {names}"
        elif module.startswith("neuronxcc.nki."):
            raise self.refuse(node, f"from {module} import ...", "this module has no NKI 0.6 counterpart")
        else:
            return
        self.edit(self.src.start(node), self.src.end(node), text)
        self.note(node, f"{text} (was {self.src.segment(node)})", "New namespace, new APIs")

    def _missing(self, kind: str, name: str) -> str:
        module = "nki.language" if kind == "language" else "nki.isa"
        hint = HINTS.get(name)
        return f"{module} has no {name!r} in NKI 0.6" + (f"; {hint}" if hint else "")

    def decorators(self) -> None:
        jitted: dict[str, tuple[ast.FunctionDef, ast.expr]] = {}
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                resolved = self.resolve(target)
                if resolved is None or resolved[0] != "top":
                    continue
                name = resolved[1]
                if name in LEGACY_DECORATORS:
                    self.edit(self.src.start(target), self.src.end(target), f"{self._top_alias(target)}.jit")
                    self.note(decorator, f"@{self.src.segment(target)} became @nki.jit", "Deprecated and removed APIs")
                elif name != "jit":
                    continue
                jitted[node.name] = (node, decorator)
                if isinstance(decorator, ast.Call):
                    self._drop_jit_options(decorator)
        # A jitted function called from another jitted function is a sub-kernel: it loses its decorator.
        for caller, _ in list(jitted.values()):
            for node in ast.walk(caller):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in jitted
                        and node.func.id != caller.name):
                    if node.func.id not in jitted:
                        continue
                    callee, decorator = jitted[node.func.id]
                    start = self.src.start(decorator) - 1  # the '@'
                    line_end = self.src.starts[decorator.end_lineno]  # type: ignore[attr-defined]
                    indent = self.src.indent_before(callee) or ""
                    self.edit(start - len(indent), line_end, "")
                    self.note(decorator, f"removed @nki.jit from {callee.name}, a sub-kernel of {caller.name}",
                              "Remove nki.jit decorator on sub-kernels")
                    jitted.pop(node.func.id)
                    break

    def _top_alias(self, node: ast.AST) -> str:
        return node.value.id if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) else "nki"

    def _drop_jit_options(self, call: ast.Call) -> None:
        dropped = [kw for kw in call.keywords if kw.arg in ("mode", "platform_target")]
        if not dropped:
            return
        if len(dropped) == len(call.keywords) and not call.args:  # @nki.jit(mode=...) -> @nki.jit
            self.edit(self.src.end(call.func), self.src.end(call), "")
        else:
            for keyword in dropped:
                self._remove_argument(call, keyword)
        for keyword in dropped:
            self.note(call, f"removed {keyword.arg}= from nki.jit", f"nki.jit({keyword.arg}=...)")

    def _arguments(self, call: ast.Call) -> list[ast.AST]:
        return sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]

    def _remove_argument(self, call: ast.Call, argument: ast.AST) -> None:
        """Delete one argument with its separating comma."""
        ordered = self._arguments(call)
        index = ordered.index(argument)
        if index > 0:
            start, end = self.src.end(ordered[index - 1]), self.src.end(argument)
        elif len(ordered) > 1:
            start, end = self.src.start(argument), self.src.start(ordered[1])
        else:
            start, end = self.src.start(argument), self.src.end(argument)
        self.edit(start, end, "")

    def _paren_after(self, call: ast.Call) -> int:
        return self.src.text.index("(", self.src.end(call.func)) + 1

    # -- ISA calls: destination first -------------------------------------------------------------------------

    def _isa_call(self, node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Call):
            resolved = self.resolve(node.func)
            if resolved is not None and resolved[0] == "isa":
                return resolved[1]
        return None

    def isa_statement(self, stmt: ast.stmt) -> None:
        value = getattr(stmt, "value", None)
        name = self._isa_call(value)
        if name is None:
            return
        call: ast.Call = value  # type: ignore[assignment]
        has_dst = any(kw.arg == "dst" for kw in call.keywords)
        if isinstance(stmt, ast.Expr):
            # A call on its own line is destination-first already: a functional call's result would be lost, and
            # a source that mixes both generations (a rewrite's legacy lines in a 0.6 kernel) has such calls.
            self._check_dst_call(call, name)
            return
        if has_dst:
            raise self.refuse(call, f"nisa.{name}(dst=...)", "assigns the result of a call that already names dst")
        if name not in DESTINATION_FIRST:
            raise self.refuse(call, f"nisa.{name}(...)", "the migration does not rewrite this instruction: call it "
                              "with its destination first (NKI 0.6 reference) by hand")
        if isinstance(stmt, ast.AugAssign):
            if name != "nc_matmul" or not isinstance(stmt.op, ast.Add) or not isinstance(
                    stmt.target, (ast.Subscript, ast.Name)):
                raise self.refuse(stmt, self.src.segment(stmt).split("\n")[0], "only `psum[...] += nisa.nc_matmul(...)` "
                                  "accumulation migrates mechanically")
            self._into(stmt, call, name, self.src.segment(stmt.target), accumulate="True")
            return
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            raise self.refuse(stmt, f"nisa.{name}(...)", "assign its result to one tile")
        target = stmt.targets[0]
        if isinstance(target, ast.Subscript):
            self._into(stmt, call, name, self.src.segment(target),
                       accumulate="False" if name == "nc_matmul" else None)
        elif isinstance(target, ast.Name):
            declaration = self._declaration(call, name, target.id)
            self._into(stmt, call, name, target.id, declaration=f"{target.id} = {declaration}")
        else:
            raise self.refuse(stmt, f"nisa.{name}(...)", "assign its result to one tile")

    def _check_dst_call(self, call: ast.Call, name: str) -> None:
        self.handled_calls.add(id(call))
        for keyword in call.keywords:
            if name == "dma_copy" and keyword.arg == "dst_rmw_op" and not _is_none(keyword.value):
                raise self.refuse(call, "nisa.dma_copy(dst_rmw_op=...)", "NKI 0.6 dma_copy has no read-modify-write; "
                                  "use nisa.dma_compute(dst, [dst, src], reduce_op=...), which adds its sources "
                                  "(guide: 'nisa.dma_copy — dst_rmw_op and unique_indices removed', its "
                                  "accumulation example)")

    def _operand(self, call: ast.Call, keyword: str, position: int | None) -> ast.AST | None:
        for kw in call.keywords:
            if kw.arg == keyword:
                return kw.value
        if position is not None and position < len(call.args):
            return call.args[position]
        return None

    def _sized_from(self, call: ast.Call, name: str, node: ast.AST | None) -> str:
        if node is None or any(isinstance(n, ast.Call) for n in ast.walk(node)) or not isinstance(
                node, (ast.Name, ast.Attribute, ast.Subscript)):
            raise self.refuse(call, f"nisa.{name}(...)", "its result is a new tile whose shape the migration reads "
                              "from the operand, and this operand is not a plain tile; declare the destination "
                              "with nl.ndarray and call the instruction with it first")
        return self.src.segment(node)

    def _declaration(self, call: ast.Call, name: str, target: str) -> str:
        nl = self.language_alias
        dtype = next((self.src.segment(kw.value) for kw in call.keywords if kw.arg == "dtype"), None)
        if name in ELEMENTWISE:
            operand = self._sized_from(call, name, self._operand(call, *ELEMENTWISE[name]))
            return f"{nl}.ndarray({operand}.shape, dtype={dtype or operand + '.dtype'}, buffer={nl}.sbuf)"
        if name == "nc_matmul":
            stationary = self._sized_from(call, name, self._operand(call, "stationary", 0))
            moving = self._sized_from(call, name, self._operand(call, "moving", 1))
            return (f"{nl}.ndarray(({stationary}.shape[-1], {moving}.shape[-1]), dtype={nl}.float32, "
                    f"buffer={nl}.psum)")
        if name == "nc_transpose":
            data = self._sized_from(call, name, self._operand(call, "data", 0))
            engine = next((kw.value for kw in call.keywords if kw.arg == "engine"), None)
            on_vector = engine is not None and "vector" in self.src.segment(engine)
            buffer = f"{nl}.sbuf" if on_vector else f"{nl}.psum"
            return f"{nl}.ndarray(({data}.shape[1], {data}.shape[0]), dtype={dtype or data + '.dtype'}, buffer={buffer})"
        if name == "memset":
            shape = self._operand(call, "shape", 0)
            dtype_node = self._operand(call, "dtype", 2)
            if shape is None or dtype_node is None:
                raise self.refuse(call, "nisa.memset(...)", "give its shape and dtype")
            return f"{nl}.ndarray({self.src.segment(shape)}, dtype={self.src.segment(dtype_node)}, buffer={nl}.sbuf)"
        raise self.refuse(call, f"nisa.{name}(...)", "its result is a new tile whose shape the source does not give; "
                          "declare the destination with nl.ndarray and pass it first")

    def _into(self, stmt: ast.stmt, call: ast.Call, name: str, dst: str, *, accumulate: str | None = None,
              declaration: str | None = None) -> None:
        """Rewrite `<target> = nisa.f(args)` as `[declaration] nisa.f(dst, args)`."""
        self.handled_calls.add(id(call))
        prefix = ""
        if declaration is not None:
            indent = self.src.indent_before(stmt)
            prefix = declaration + ("\n" + indent if indent is not None else "; ")
        self.edit(self.src.start(stmt), self.src.start(call), prefix)
        if name == "memset":  # legacy memset(shape, value, dtype) -> memset(dst, value)
            value = self._operand(call, "value", 1)
            if value is None:
                raise self.refuse(call, "nisa.memset(...)", "give the value to set")
            extra = "".join(f", {self.src.segment(kw)}" for kw in call.keywords if kw.arg in ("engine", "name"))
            self.edit(self._paren_after(call), self.src.end(call) - 1, f"{dst}, {self.src.segment(value)}{extra}")
        else:
            arguments = self._arguments(call)
            self.edit(self._paren_after(call), self._paren_after(call), f"{dst}, " if arguments else dst)
            for keyword in call.keywords:
                if keyword.arg == "dtype" or (keyword.arg == "mask" and _is_none(keyword.value)):
                    self._remove_argument(call, keyword)
            if accumulate is not None:
                closing = self.src.end(call) - 1
                between = self.src.text[self.src.end(arguments[-1]):closing] if arguments else ""
                self.edit(closing, closing, f"{'' if ',' in between else ', '}accumulate={accumulate}")
        what = f"nisa.{name} writes {dst} (given first)"
        if declaration is not None:
            what += f", declared as {declaration}"
        if accumulate == "True":
            what += ", accumulate=True for +="
        self.note(stmt, what, "All ISA functions require a destination parameter")

    def _hoist(self, call: ast.Call, name: str) -> None:
        """`q_t = nl.copy(nisa.nc_transpose(q))`: the instruction moves to its own line before the statement,
        writing a new tile that takes its place in the expression."""
        stmt = self.parents.get(id(call))
        while stmt is not None and not isinstance(stmt, ast.stmt):
            if isinstance(stmt, (ast.Lambda, ast.comprehension, ast.ListComp, ast.GeneratorExp, ast.DictComp,
                                 ast.SetComp, ast.IfExp, ast.BoolOp)):
                stmt = None
                break
            stmt = self.parents.get(id(stmt))
        indent = self.src.indent_before(stmt) if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr, ast.Return)) else None
        if stmt is None or indent is None:
            raise self.refuse(call, f"nisa.{name}(...)", "its result is used inside an expression the migration "
                              "cannot split; in NKI 0.6 an ISA instruction writes a destination given first and "
                              "returns nothing: assign it to a tile on its own line")
        self.handled_calls.add(id(call))
        tmp = self._fresh_name(f"{name}_out")
        declaration = self._declaration(call, name, tmp)
        if name == "memset":
            value = self._operand(call, "value", 1)
            arguments = [self.src.segment(value)] if value is not None else []
        else:
            arguments = [self.src.segment(a) for a in self._arguments(call)
                         if not (isinstance(a, ast.keyword) and (a.arg == "dtype" or (a.arg == "mask" and _is_none(a.value))))]
        instruction = f"{self.src.segment(call.func)}({', '.join([tmp, *arguments])})"
        self.edit(self.src.start(stmt), self.src.start(stmt), f"{tmp} = {declaration}\n{indent}{instruction}\n{indent}")
        self.edit(self.src.start(call), self.src.end(call), tmp)
        self.note(call, f"nisa.{name} moved to its own line, writing {tmp} (declared as {declaration})",
                  "All ISA functions require a destination parameter")

    def _fresh_name(self, base: str) -> str:
        taken = {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)} | getattr(self, "_taken", set())
        name, k = base, 2
        while name in taken:
            name, k = f"{base}{k}", k + 1
        self._taken = taken | {name}
        return name

    # -- other names and calls --------------------------------------------------------------------------------

    def call(self, node: ast.Call) -> None:
        resolved = self.resolve(node.func)
        if resolved is None:
            return
        kind, name = resolved
        if kind == "isa" and id(node) not in self.handled_calls:
            if name in DESTINATION_FIRST:
                self._hoist(node, name)
            else:
                self._check_dst_call(node, name)
        if kind not in ("language", "isa"):
            return
        for keyword in node.keywords:
            if keyword.arg == "mask" and not _is_none(keyword.value):
                raise self.refuse(node, f"{self.src.segment(node.func)}(mask=...)", "NKI 0.6 has no mask parameter: "
                                  "bound the indices with min() and slices (guide: 'Deprecation of masking')")
            if (keyword.arg == "buffer" and isinstance(keyword.value, ast.Constant)
                    and isinstance(keyword.value.value, str)):
                buffer = keyword.value.value
                if buffer not in ("sbuf", "psum", "hbm", "private_hbm", "shared_hbm"):
                    raise self.refuse(node, f"buffer={buffer!r}", "not a memory buffer")
                self.edit(self.src.start(keyword.value), self.src.end(keyword.value), f"{self.language_alias}.{buffer}")
                self.note(node, f"buffer={buffer!r} became {self.language_alias}.{buffer}",
                          "String buffer names no longer supported")
        if kind == "language" and name in ("ndarray", "zeros", "ones", "full", "rand") and node.args:
            self._shape(node.args[0])
        for keyword in node.keywords:
            if kind == "language" and keyword.arg == "shape":
                self._shape(keyword.value)

    def _shape(self, shape: ast.AST) -> None:
        if not isinstance(shape, (ast.Tuple, ast.List)):
            return
        for position, element in enumerate(shape.elts):
            if not (isinstance(element, ast.Call) and self.resolve(element.func) == ("language", "par_dim")):
                continue
            if position:
                raise self.refuse(element, "a block dimension (par_dim not first)", "NKI 0.6 has no block "
                                  "dimensions: fold them into the free dimension or use a list of tiles (guide: "
                                  "'Removing block dimensions from NKI kernels')")
            if len(element.args) != 1:
                raise self.refuse(element, "nl.par_dim(...)", "give one size")
            self.edit(self.src.start(element), self.src.end(element), self.src.segment(element.args[0]))
            self.note(element, f"{self.src.segment(element)} became {self.src.segment(element.args[0])} (the "
                      "partition dimension is the first)", "Removing block dimensions from NKI kernels")
            self.handled_calls.add(id(element))

    def name_use(self, node: ast.AST) -> None:
        resolved = self.resolve(node)
        if resolved is None:
            return
        kind, name = resolved
        parent = self.parents.get(id(node))
        if kind == "language" and name == "par_dim":
            if isinstance(parent, ast.Call) and id(parent) in self.handled_calls:
                return
            raise self.refuse(node, "nl.par_dim", HINTS["par_dim"] + "; only a leading par_dim(n) of a shape migrates")
        known = {"language": LANGUAGE_NAMES, "isa": ISA_NAMES, "top": TOP_NAMES}.get(kind)
        if known is None or name in known:
            return
        if kind == "top" and name in LEGACY_DECORATORS:
            return  # a decorator, rewritten above
        if kind == "top":
            raise self.refuse(node, f"nki.{name}", f"the NKI 0.6 nki package has no {name!r} (it has "
                              f"{', '.join(sorted(TOP_NAMES))})")
        raise self.refuse(node, f"{'nl' if kind == 'language' else 'nisa'}.{name}", self._missing(kind, name))

    def output_buffers(self) -> None:
        """`out = nl.ndarray(..., buffer=nl.hbm)` returned by a kernel -> nl.shared_hbm."""
        for function in ast.walk(self.tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            returned = set()
            for node in ast.walk(function):
                if isinstance(node, ast.Return) and node.value is not None:
                    values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                    returned |= {v.id for v in values if isinstance(v, ast.Name)}
            for node in ast.walk(function):
                if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                        and node.targets[0].id in returned and isinstance(node.value, ast.Call)):
                    continue
                for keyword in node.value.keywords:
                    if keyword.arg == "buffer" and self.resolve(keyword.value) == ("language", "hbm"):
                        alias = self.src.segment(keyword.value).rsplit(".", 1)[0]
                        self.edit(self.src.start(keyword.value), self.src.end(keyword.value), f"{alias}.shared_hbm")
                        self.note(node, f"{node.targets[0].id}, an output, is allocated in shared_hbm",
                                  "Output tensors must use nl.shared_hbm")

    def list_defaults(self) -> None:
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            if not any(self.resolve(d.func if isinstance(d, ast.Call) else d) is not None for d in node.decorator_list):
                continue
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if isinstance(default, ast.List) and not any(isinstance(n, ast.Call) for n in ast.walk(default)):
                    items = [self.src.segment(e) for e in default.elts]
                    text = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
                    self.edit(self.src.start(default), self.src.end(default), text)
                    self.note(default, f"the list default {self.src.segment(default)} became {text}",
                              "Replace list kernel arguments with tuples")

    def apply(self) -> str:
        text = self.src.text
        kept: list[_Edit] = []
        # At one offset: insertions first, then the longest span (an inner edit inside a deletion is dropped).
        for edit in sorted(self.edits, key=lambda e: (e.start, e.end > e.start, e.start - e.end)):
            if kept and edit.start < kept[-1].end:
                outer = kept[-1]
                if outer.text == "" and edit.end <= outer.end:
                    continue  # inside a deleted span
                raise MigrationError(None, "the migration", "two rewrites overlap in this kernel; please report it")
            kept.append(edit)
        for edit in reversed(kept):
            text = text[:edit.start] + edit.text + text[edit.end:]
        return text


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def migrate_source(source: str) -> Migration:
    """The NKI 0.6 version of a legacy (`neuronxcc.nki`) kernel source, and each change with its guide section.

    Raises MigrationError for a construct that needs a person (its line, what it is, what to do instead), or
    for a source that does not parse or is not legacy NKI."""
    from engine.platforms.nki.generations import LEGACY, kernel_generation  # noqa: PLC0415 - sibling, cheap

    try:
        ast.parse(source)
    except SyntaxError as exc:
        raise MigrationError(exc.lineno, "the kernel", f"does not parse: {exc.msg}") from exc
    if kernel_generation(source) != LEGACY:
        raise MigrationError(None, "the kernel", "does not import the legacy neuronxcc.nki namespace; there is "
                             "nothing to migrate")
    return _Migrator(source).run()
