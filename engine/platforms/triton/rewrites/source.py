"""What the Triton rewrites know about a module's source: its `@triton.jit` kernels, their launches
(`kernel[grid](...)`), their `@triton.autotune` decorators, and the offsets built from `tl.arange`.

A Triton solution in FlashInfer-Bench style is a module with one or more jit kernels and a host entry
point (`run`) that allocates outputs and launches them; the rewrites change either side, on the AST.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from engine.agents.rewrites import dotted

# Names of scalar kernel parameters that bound an offset (`offs < n`) when the kernel itself never says.
SIZE_NAMES = {"n", "N", "n_elements", "numel", "size", "n_cols", "N_COLS", "n_elem", "num_elements", "length",
              "hidden_size", "D", "n_rows", "M"}
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")


def is_block_name(name: str) -> bool:
    """A compile-time block size by the usual naming (`BLOCK`, `BLOCK_SIZE`, `BLOCK_M`, `XBLOCK`)."""
    return "BLOCK" in name.upper()


def int_value(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def tl_call(node: ast.AST, name: str) -> bool:
    """`tl.<name>(...)` or `triton.language.<name>(...)`."""
    if not isinstance(node, ast.Call):
        return False
    func = dotted(node.func)
    return func in (f"tl.{name}", f"triton.language.{name}")


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((kw for kw in call.keywords if kw.arg == name), None)


def line_of(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


@dataclass
class JitKernel:
    fn: ast.FunctionDef
    autotune: ast.Call | None  # the @triton.autotune(...) decorator call, if any

    @property
    def name(self) -> str:
        return self.fn.name

    def params(self) -> list[str]:
        return [a.arg for a in self.fn.args.args]

    def constexpr_params(self) -> set[str]:
        return {a.arg for a in self.fn.args.args if a.annotation is not None and "constexpr" in dotted(a.annotation)}

    def scalar_params(self) -> list[str]:
        """Parameters that are neither compile-time constants nor pointers (by name or by use)."""
        pointers = pointer_names(self.fn)
        constexpr = self.constexpr_params()
        return [p for p in self.params() if p not in constexpr and p not in pointers and not p.endswith("_ptr")]

    def has_loop(self) -> bool:
        return any(isinstance(n, ast.For | ast.While) for n in ast.walk(self.fn))


@dataclass
class Launch:
    call: ast.Call  # kernel[grid](args..., KW=...)
    kernel: JitKernel
    caller: ast.FunctionDef | None  # the host function that launches it (None: module level)

    @property
    def grid(self) -> ast.expr:
        assert isinstance(self.call.func, ast.Subscript)
        return self.call.func.slice


def _decorator_name(node: ast.expr) -> str:
    return dotted(node.func) if isinstance(node, ast.Call) else dotted(node)


def jit_kernels(tree: ast.Module) -> list[JitKernel]:
    kernels = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        names = [_decorator_name(d) for d in node.decorator_list]
        if not any(n in ("triton.jit", "jit") for n in names):
            continue
        autotune = next((d for d in node.decorator_list
                         if isinstance(d, ast.Call) and _decorator_name(d) in ("triton.autotune", "autotune")), None)
        kernels.append(JitKernel(node, autotune))
    return kernels


def launches(tree: ast.Module) -> list[Launch]:
    """Every `kernel[grid](...)` of a jit kernel defined in the module, in source order."""
    kernels = {k.name: k for k in jit_kernels(tree)}
    found: list[Launch] = []

    def walk(node: ast.AST, caller: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef) else caller
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Subscript)
                    and isinstance(child.func.value, ast.Name) and child.func.value.id in kernels):
                found.append(Launch(child, kernels[child.func.value.id], caller))
            walk(child, inner)

    walk(tree, None)
    return sorted(found, key=lambda launch: (line_of(launch.call), getattr(launch.call, "col_offset", 0)))


def pointer_names(fn: ast.FunctionDef) -> set[str]:
    """Parameters used as the base of pointer arithmetic inside `tl.load`/`tl.store`."""
    params = {a.arg for a in fn.args.args}
    out: set[str] = set()
    for node in ast.walk(fn):
        if tl_call(node, "load") or tl_call(node, "store"):
            assert isinstance(node, ast.Call)
            if node.args:
                out |= {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name) and n.id in params}
    # Offsets and strides appear in the same expressions: keep only names that look like pointers or that
    # are never multiplied (a stride is multiplied, an offset comes from arange, a pointer is added).
    multiplied = {n.id for b in ast.walk(fn) if isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mult)
                  for n in (b.left, b.right) if isinstance(n, ast.Name)}
    return {n for n in out if n.endswith("_ptr") or n not in multiplied}


def assignments(fn: ast.FunctionDef) -> dict[str, list[ast.Assign]]:
    """Simple `name = value` statements of a function, by name."""
    out: dict[str, list[ast.Assign]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.setdefault(node.targets[0].id, []).append(node)
    return out


def arange_offsets(fn: ast.FunctionDef) -> dict[str, ast.Assign]:
    """Names assigned once from an expression containing `tl.arange` (the offsets of a block)."""
    out = {}
    for name, stmts in assignments(fn).items():
        if len(stmts) == 1 and any(tl_call(n, "arange") for n in ast.walk(stmts[0].value)):
            out[name] = stmts[0]
    return out


def parent_map(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def module_names(tree: ast.Module) -> set[str]:
    """Names the module's imports bind (`import triton.language as tl` binds `tl`)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in node.names}
    return names
