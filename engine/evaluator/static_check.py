"""Static check of an uploaded kernel, before anything runs.

This is the first of several layers (the child process also guards imports and file access at run time,
and the OS limits the process); it exists to give the author a precise, early message with a line number,
not to be a sandbox on its own. Python cannot be sandboxed by inspecting its source.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

MAX_SOURCE_BYTES = 256 * 1024

# What a kernel may import: numpy, math and the NKI namespaces (both API generations).
ALLOWED_IMPORT_ROOTS = ("numpy", "math", "nki", "neuronxcc.nki", "__future__")
# numpy submodules that reach the file system, C memory or a compiler.
FORBIDDEN_NUMPY_SUBMODULES = ("ctypeslib", "f2py", "distutils", "testing", "lib")

FORBIDDEN_CALLS = frozenset({
    "open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "input", "breakpoint",
    "help", "exit", "quit", "memoryview", "setattr", "delattr",
})

# Attributes that walk from an object to interpreter internals (frames, code, globals) or to files.
FORBIDDEN_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "tb_frame", "tb_next",
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "co_code", "co_consts",
    "tofile", "ctypes", "ctypeslib", "memmap", "fromfile", "loadtxt", "genfromtxt", "savetxt",
    "savez", "savez_compressed", "fromregex", "DataSource", "f2py", "distutils",
    # Public attributes through which numpy's own modules lead to sys, os and the import system
    # (e.g. numpy.matrixlib.defmatrix.ast.sys.modules).
    "sys", "os", "ast", "builtins", "inspect", "modules", "subprocess", "importlib", "matrixlib", "shutil",
    "socket", "pickle", "posix", "signal", "resource", "gc", "threading",
    # The simulator's raw storage behind an NKI tensor (no NKI API has these): numpy work on it is
    # invisible to the trace and the timer.
    "data", "alias", "init",
})


def attribute_forbidden(name: str) -> bool:
    """Private (`_x`) and dunder attributes, and the names above: refused statically and at run time."""
    return name.startswith("_") or name in FORBIDDEN_ATTRIBUTES
# numpy functions that read or write files; `load` is fine on nl/nki (nl.load is an NKI op).
FORBIDDEN_NUMPY_ATTRIBUTES = frozenset({"load", "save", "os", "sys"}) | frozenset(FORBIDDEN_NUMPY_SUBMODULES)


class StaticCheckError(Exception):
    """The source is refused. `line` is 1-based, or None when the whole file is at fault."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@dataclass(frozen=True)
class CheckedKernel:
    kernel_name: str


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


def _import_allowed(module: str) -> bool:
    if any(module == f"numpy.{sub}" or module.startswith(f"numpy.{sub}.") for sub in FORBIDDEN_NUMPY_SUBMODULES):
        return False
    return any(module == root or module.startswith(root + ".") for root in ALLOWED_IMPORT_ROOTS)


def _is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` — never runs inside the evaluator, so its body is not checked."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    return (isinstance(test.left, ast.Name) and test.left.id == "__name__" and len(test.comparators) == 1
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__")


def _decorator_is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Attribute):
        return target.attr == "jit"
    return isinstance(target, ast.Name) and target.id == "jit"


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name the source binds itself (arguments, assignments, loop targets, definitions)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
    return bound


class _Checker(ast.NodeVisitor):
    def __init__(self, shadowed: set[str]) -> None:
        self.numpy_aliases: set[str] = set()
        self.module_names: set[str] = set()  # names bound by imports (modules and what they export)
        # A parameter called `input` is not the builtin; the child removes the builtins anyway.
        self.shadowed = shadowed

    def fail(self, node: ast.AST, message: str) -> None:
        raise StaticCheckError(message, getattr(node, "lineno", None))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.module_names.add(alias.asname or alias.name.split(".")[0])
            if not _import_allowed(alias.name):
                self.fail(node, f"import of {alias.name!r} is not allowed; a kernel may import only numpy, "
                                "math and the NKI namespaces (neuronxcc.nki..., nki...)")
            if alias.name == "numpy":
                self.numpy_aliases.add(alias.asname or "numpy")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.fail(node, "relative imports are not allowed in a kernel")
        names = [a.name for a in node.names]
        self.module_names.update(a.asname or a.name for a in node.names)
        if module == "neuronxcc" and all(n == "nki" for n in names):
            return
        if "*" in names and module not in ("__future__",):
            self.fail(node, f"'from {module} import *' is not allowed; import the names you use")
        if not _import_allowed(module):
            self.fail(node, f"import from {module!r} is not allowed; a kernel may import only numpy, math "
                            "and the NKI namespaces (neuronxcc.nki..., nki...)")
        if module == "numpy":
            for name in names:
                if name in FORBIDDEN_NUMPY_ATTRIBUTES or name in FORBIDDEN_ATTRIBUTES:
                    self.fail(node, f"'from numpy import {name}' is not allowed in a kernel")

    def visit_Name(self, node: ast.Name) -> None:
        if _is_dunder(node.id):
            self.fail(node, f"use of {node.id!r} is not allowed in a kernel")
        if isinstance(node.ctx, ast.Load) and node.id in FORBIDDEN_CALLS and node.id not in self.shadowed:
            self.fail(node, f"use of the builtin {node.id!r} is not allowed in a kernel")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.module_names:
                # Rebinding nl.add or np.asarray would change what the simulator and the child record.
                self.fail(node, f"assigning to {root.id}...{node.attr} is not allowed: a kernel may not change "
                                "the modules it imports")
        if attribute_forbidden(node.attr):
            self.fail(node, f"access to the attribute {node.attr!r} is not allowed in a kernel")
        if (isinstance(node.value, ast.Name) and node.value.id in self.numpy_aliases
                and node.attr in FORBIDDEN_NUMPY_ATTRIBUTES):
            self.fail(node, f"numpy.{node.attr} is not allowed in a kernel (file or system access)")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
            name = node.args[1]
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                self.fail(node, "getattr with a computed attribute name is not allowed in a kernel")
            elif attribute_forbidden(name.value):
                self.fail(node, f"getattr(..., {name.value!r}) is not allowed in a kernel")
        self.generic_visit(node)



def find_kernel_name(tree: ast.Module, kernel_name: str | None) -> str:
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if kernel_name is not None:
        if not any(f.name == kernel_name for f in functions):
            found = ", ".join(f.name for f in functions) or "none"
            raise StaticCheckError(f"no top-level function named {kernel_name!r} (functions defined: {found})")
        return kernel_name
    jitted = [f for f in functions if any(_decorator_is_jit(d) for d in f.decorator_list)]
    for candidates in (jitted, functions):
        named = [f for f in candidates if f.name == "kernel"]
        if named:
            return named[0].name
    if len(jitted) >= 1:
        return jitted[0].name
    raise StaticCheckError("no kernel function found: define a top-level @nki.jit function (named 'kernel', "
                           "or pass the kernel's name)")


def check_kernel_source(source: str, kernel_name: str | None = None) -> CheckedKernel:
    """Refuse what a kernel may not do; return the name of the function to run."""
    size = len(source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        raise StaticCheckError(f"kernel source is {size} bytes; the limit is {MAX_SOURCE_BYTES} bytes (256 KiB)")
    try:
        tree = ast.parse(source, filename="kernel.py")
    except SyntaxError as exc:
        raise StaticCheckError(f"syntax error: {exc.msg}", exc.lineno) from None
    name = find_kernel_name(tree, kernel_name)
    checker = _Checker(_bound_names(tree))
    for node in tree.body:
        if not _is_main_guard(node):
            checker.visit(node)
    return CheckedKernel(kernel_name=name)


def check_reference_source(source: str) -> None:
    """A reference is trusted more than a kernel (a problem author wrote it) but must parse and follow
    the NKIBench reference format; it still runs in its own sandboxed child."""
    size = len(source.encode("utf-8"))
    if size > 4 * MAX_SOURCE_BYTES:
        raise StaticCheckError(f"reference source is {size} bytes; the limit is {4 * MAX_SOURCE_BYTES} bytes")
    try:
        tree = ast.parse(source, filename="reference.py")
    except SyntaxError as exc:
        raise StaticCheckError(f"syntax error in the reference: {exc.msg}", exc.lineno) from None
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    missing = [name for name in ("get_inputs", "forward") if name not in defined]
    if missing:
        raise StaticCheckError(f"the reference does not define {', '.join(missing)} (NKIBench reference format: "
                               "get_inputs, forward, transform_to_nki_inputs, transform_nki_outputs)")
