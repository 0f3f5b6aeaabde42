"""The Triton evaluation children (`python -m engine.evaluator.child triton_reference|triton_kernel ...`).

* `triton_reference` parses the definition and workload, builds each seed's inputs (engine.platforms.triton.inputs)
  and runs the definition's reference on them; it holds the expected outputs and compares the kernel's
  outputs the parent forwards (engine.platforms.triton.compare). The kernel never sees expected values.
* `triton_kernel` imports the solution (its sources exist only in memory: linecache serves them to
  `@triton.jit`; a multi-file solution is a package whose files import each other, relatively as in
  FlashInfer-Bench or by their bare names: `SolutionModules`), builds the same seed's inputs itself (the seed fully determines them, so nothing to
  send; a kernel that tampers with input generation only computes the wrong answer) and runs it on guarded
  buffers (engine.platforms.triton.runner: canaries, input checksums, NaN-filled outputs). On the cuda backend it
  then times the kernel (`measure`).

Both run under the same sandbox, limits and audit guard as the NKI children; the kernel's module gets the
kernel builtins with a Triton import allow-list (torch, triton, math, numpy and a few pure-Python modules).
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import os
import sys
import time
from typing import Any

# The package a solution's files are modules of: the entry file main.py is `accelopt_solution.main`.
SOLUTION_PACKAGE = "accelopt_solution"
ALLOWED_TRITON_IMPORTS = ("torch", "triton", "math", "numpy", "typing", "functools", "itertools", "dataclasses",
                          "__future__", "operator", "collections")


# The child's helpers, restated here (small) so that child.py, which starts these roles, is not imported back.
def _remember_source(filename: str, source: str) -> None:
    """Tracebacks, and `@triton.jit` (inspect.getsource), read the in-memory source through linecache."""
    # late: loaded in the child by the role that needs it, in its order around the guard
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)


def _read_roots() -> list[str]:
    # late: loaded in the child by the role that needs it, in its order around the guard
    import engine

    package = os.path.dirname(os.path.abspath(engine.__file__))
    return [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, package]


def _failure(kind: str, exc: BaseException, filename: str, prefix: str = "") -> dict[str, Any]:
    """The failure as the parent reports it: `line` in `filename`, the traceback's frames in any kernel file."""
    # late: loaded in the child by the role that needs it, in its order around the guard
    import traceback

    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename == filename or f.filename.startswith("<kernel ")]
    detail = "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(exc), exc))
    return {"ok": False, "kind": kind, "message": f"{prefix}{type(exc).__name__}: {exc}", "line": line,
            "detail": detail[-8000:]}


def to_wire(tensor: Any) -> tuple[Any, str]:
    """A tensor as a numpy array the protocol can carry, plus its torch dtype name (bf16/fp8 travel as raw bits)."""
    # late: loaded in the child by the role that needs it, in its order around the guard
    import torch

    name = str(tensor.dtype).removeprefix("torch.")
    t = tensor.detach().contiguous().cpu()
    if t.dtype in (torch.bfloat16,):
        t = t.view(torch.int16)
    elif t.dtype.is_floating_point and t.element_size() == 1:
        t = t.view(torch.uint8)
    return t.numpy(), name


def from_wire(array: Any, name: str) -> Any:
    # late: loaded in the child by the role that needs it, in its order around the guard
    import torch

    tensor = torch.from_numpy(array.copy())
    dtype = getattr(torch, name)
    return tensor.view(dtype) if tensor.dtype != dtype else tensor


# The top-level names of the loaded solution's own modules (helpers.py: "helpers"; ops/norm.py: "ops").
_solution_roots: set[str] = set()


def _own_module(name: str, globals: Any, level: int) -> bool:
    """An import of one of the solution's own files: relative inside its package, or by its bare name."""
    if level:
        package = str((globals or {}).get("__package__") or "")
        return package == SOLUTION_PACKAGE or package.startswith(SOLUTION_PACKAGE + ".")
    return name.split(".")[0] in _solution_roots or name == SOLUTION_PACKAGE or name.startswith(SOLUTION_PACKAGE + ".")


def _solution_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    """`import helpers` of the solution's own helpers.py is `accelopt_solution.helpers`: bare names are resolved
    inside the solution's package only, so no other module (the standard library's, torch's) is ever taken
    for a solution file, nor one for it."""
    if level or name.split(".")[0] not in _solution_roots:
        return builtins.__import__(name, globals, locals, fromlist, level)
    module = builtins.__import__(f"{SOLUTION_PACKAGE}.{name}", globals, locals, fromlist, 0)
    # `import a.b` binds `a`; `from a.b import c` takes c from a.b, the module __import__ returned.
    return module if fromlist else sys.modules[f"{SOLUTION_PACKAGE}.{name.split('.')[0]}"]


def _triton_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if _own_module(name, globals, level):
        return _solution_import(name, globals, locals, fromlist, level)
    if level or not any(name == root or name.startswith(root + ".") for root in ALLOWED_TRITON_IMPORTS):
        raise ImportError(f"import of {name!r} is not allowed in a Triton kernel (allowed: "
                          f"{', '.join(ALLOWED_TRITON_IMPORTS)}, and the solution's own files)")
    return builtins.__import__(name, globals, locals, fromlist, level)


class SolutionModules:
    """A meta path finder and loader serving a solution's Python files from memory as the modules of one
    package, `accelopt_solution.<path>`, as FlashInfer-Bench loads a solution: its files import each other
    relatively, or by bare name (`import helpers`, which `_solution_import` resolves inside the package).
    Each module gets `builtins_namespace` (the guarded builtins), and its source is remembered for
    tracebacks and `@triton.jit`. Nothing touches the disk, and no name outside the package is served."""

    def __init__(self, sources: dict[str, str], builtins_namespace: dict[str, Any]) -> None:
        from engine.platforms.triton.flashinfer import (
            module_path,  # imported by the role before the audit guard
        )

        self.sources = sources
        self.builtins = builtins_namespace
        self.files = {module_path(p): p for p in sources if p.endswith(".py")}
        self.packages = {".".join(name.split(".")[:i]) for name in self.files for i in range(1, name.count(".") + 1)}

    def roots(self) -> set[str]:
        return {name.split(".")[0] for name in self.files if name != "__init__"}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == SOLUTION_PACKAGE:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        if not fullname.startswith(SOLUTION_PACKAGE + "."):
            return None
        name = fullname.removeprefix(SOLUTION_PACKAGE + ".")
        if name in self.packages:
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        return importlib.util.spec_from_loader(fullname, self) if name in self.files else None

    def create_module(self, spec: Any) -> Any:
        return None  # the default module object

    def exec_module(self, module: Any) -> None:
        name = module.__name__.removeprefix(SOLUTION_PACKAGE).removeprefix(".")
        if name in self.files:
            path = self.files[name]
        else:  # a package: its __init__.py, or none (an empty package)
            path = self.files.get(f"{name}.__init__" if name else "__init__")
            if path is None:
                return
        filename = f"<kernel {path}>"
        _remember_source(filename, self.sources[path])
        module.__file__ = filename
        module.__dict__["__builtins__"] = self.builtins
        exec(compile(self.sources[path], filename, "exec"), module.__dict__)


def cuda_allowances() -> Any:
    """What Triton needs past the audit guard on a GPU: its compiler (ptxas), its cache (under the private
    HOME/TMPDIR), the CUDA libraries and driver files it reads, and native code (the driver bindings)."""
    # late: loaded in the child by the role that needs it, in its order around the guard
    from engine.evaluator.sandbox.guards import GuardAllowances

    home = os.environ.get("HOME", "/tmp")
    # Triton's bundled tools only at their own paths (for sm_90 and newer it runs `ptxas-blackwell`); the C
    # compiler that builds its launcher helper, and ldconfig that finds libcuda, wherever the host has them.
    spec = importlib.util.find_spec("triton")
    tools = os.path.join(os.path.dirname(spec.origin or ""), "backends", "nvidia", "bin") if spec else ""
    bundled = tuple(os.path.join(tools, t) for t in ("ptxas", "ptxas-blackwell", "cuobjdump", "nvdisasm")) if tools else ()
    return GuardAllowances(read_roots=("/usr", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev", home),
                           write_roots=(home, os.environ.get("TMPDIR", home)),
                           executables=(*bundled, "ldconfig", "ldconfig.real", "gcc", "cc"), native_code=True)


def _parse(header: dict[str, Any]) -> tuple[Any, Any]:
    # late: loaded in the child by the role that needs it, in its order around the guard
    from engine.platforms.triton.flashinfer import parse_definition, parse_workload

    return parse_definition(header["definition"]), parse_workload(header["workload"])


def _device(backend: str) -> str:
    return "cuda" if backend == "cuda" else "cpu"


class TritonReferenceRole:
    def __init__(self, config: dict[str, Any]) -> None:
        self.guards = config.get("guards", {})
        self.device = _device(config["backend"])
        self.definition: Any = None
        self.workload: Any = None
        self.reference: Any = None
        self.expected: tuple[Any, ...] = ()

    def load(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.evaluator.sandbox.guards import install_audit_guard
        from engine.platforms.triton.flashinfer import FormatError
        from engine.platforms.triton.local import load_reference

        try:
            self.definition, self.workload = _parse(header)
        except FormatError as exc:
            return {"ok": False, "kind": "reference_error", "message": f"bad FlashInfer-Bench document: {exc}"}, {}
        import torch  # loaded before the guard, like numpy

        allowances = None
        if self.device == "cuda":
            torch.cuda.init()
            allowances = cuda_allowances()
        if self.guards.get("audit", True):
            install_audit_guard(_read_roots(), allowances)
        _remember_source(f"<reference {self.definition.name}>", self.definition.reference)
        try:
            self.reference = load_reference(self.definition)
        except BaseException as exc:  # noqa: BLE001
            return _failure("reference_error", exc, "<reference>", "loading the reference failed: "), {}
        return {"ok": True}, {}

    def expect(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Build the seed's inputs and compute (and keep) the expected outputs; reply the roofline counts."""
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.platforms.triton.inputs import make_inputs
        from engine.platforms.triton.local import reference_outputs
        from engine.platforms.triton.roofline import workload_bytes, workload_flops

        try:
            inputs = make_inputs(self.definition, self.workload, header["seed"], device=self.device)
            self.expected = reference_outputs(self.reference, self.definition, inputs)
        except BaseException as exc:  # noqa: BLE001
            return _failure("reference_error", exc, "<reference>", "the reference failed: "), {}
        axes = self.definition.axis_values(self.workload)
        return {"ok": True, "output_count": len(self.expected),
                "output_bytes": sum(e.numel() * e.element_size() for e in self.expected),
                "flops": workload_flops(self.definition, axes, inputs),
                "bytes": workload_bytes(self.definition, axes, inputs)}, {}

    def compare(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.platforms.triton.compare import OutputComparison, compare_output
        from engine.platforms.triton.flashinfer import DTYPE_BYTES

        # The reply was the kernel's process's to write (its code reaches the kernel role): every output of the
        # definition is judged here, and one the reply lacks or that cannot be read fails, never goes unjudged.
        dtypes = header.get("dtypes")
        dtypes = list(dtypes) if isinstance(dtypes, list) else []
        comparisons = []
        for i, (name, spec) in enumerate(self.definition.outputs.items()):
            expected = self.expected[i].cpu()
            sent = dtypes[i] if i < len(dtypes) else None
            try:
                if not (isinstance(sent, str) and sent in DTYPE_BYTES and f"out{i}" in arrays):
                    raise ValueError(f"the kernel's process sent no readable output (dtype {sent!r})")
                comparisons.append(compare_output(name, from_wire(arrays[f"out{i}"], sent), expected, spec.dtype))
            except Exception as exc:  # noqa: BLE001 - whatever the kernel sent, the output fails
                comparisons.append(OutputComparison(name, False, None, None, expected.numel(), f"{name}: {exc}"))
        if len(dtypes) != len(comparisons):
            comparisons.append(OutputComparison("outputs", False, None, None, 0, f"the kernel's process sent "
                                                f"{len(dtypes)} outputs; the definition has {len(comparisons)}"))
        return {"ok": True, "comparisons": [c.__dict__ for c in comparisons]}, {}


class TritonKernelRole:
    def __init__(self, config: dict[str, Any]) -> None:
        self.guards = config.get("guards", {})
        self.backend = config["backend"]
        # cuda without a GPU (triton.compile_only): kernels compiled for {"arch": 90}, not run; tensors on the CPU.
        self.compile_only = config.get("compile_only") if self.backend == "cuda" else None
        self.driver: Any = None
        self.device = "cpu" if self.compile_only else _device(self.backend)
        if self.backend != "cuda":
            os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported: every kernel is interpreted
        self.definition: Any = None
        self.workload: Any = None
        self.function: Any = None
        self.inputs: dict[str, Any] = {}

    def load(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.evaluator.sandbox.guards import install_audit_guard, kernel_builtins
        from engine.platforms.triton.flashinfer import FormatError, module_path, parse_solution

        try:
            self.definition, self.workload = _parse(header)
            solution = parse_solution(header["solution"])
        except FormatError as exc:
            return {"ok": False, "kind": "rejected", "message": f"bad FlashInfer-Bench solution: {exc}"}, {}
        import torch  # noqa: F401 - our imports first, before the guard
        import triton  # noqa: F401
        import triton.language  # noqa: F401

        allowances = None
        if self.backend == "cuda":
            if self.compile_only:
                # late: loaded in the child by the role that needs it, in its order around the guard
                from engine.platforms.triton.compile_only import install

                self.driver = install(int(self.compile_only["arch"]))
            else:
                torch.cuda.init()
            allowances = cuda_allowances()
        if self.device != "cuda":
            # late: loaded in the child by the role that needs it, in its order around the guard
            from engine.platforms.triton.runner import autotune_without_timing

            autotune_without_timing()  # no GPU to time autotune configurations on: each runs (compiles) once
        if self.guards.get("audit", True):
            install_audit_guard(_read_roots(), allowances)
        filename = f"<kernel {solution.entry_file}>"
        if self.guards.get("imports", True):
            namespace = kernel_builtins()
            namespace["__import__"] = _triton_import
        else:  # the guards off (tests of the OS sandbox alone): plain builtins, the solution's files still found
            namespace = {**vars(builtins), "__import__": _solution_import}
        modules = SolutionModules(solution.sources, namespace)
        _solution_roots.clear()
        _solution_roots.update(modules.roots())
        sys.meta_path.insert(0, modules)
        try:
            module = importlib.import_module(f"{SOLUTION_PACKAGE}.{module_path(solution.entry_file)}")
        except SyntaxError as exc:
            where = "" if exc.filename == filename else f" in {str(exc.filename).removeprefix('<kernel ').rstrip('>')}"
            return {"ok": False, "kind": "compile_error", "message": f"syntax error{where}: {exc.msg}",
                    "line": exc.lineno if not where else None}, {}
        except BaseException as exc:  # noqa: BLE001 - any failure at import time is the kernel's
            kind = "rejected" if isinstance(exc, ImportError) and "not allowed" in str(exc) else "compile_error"
            return _failure(kind, exc, filename, "while loading the kernel module: "), {}
        function = module.__dict__.get(solution.entry_function)
        if not callable(function):
            return {"ok": False, "kind": "rejected",
                    "message": f"{solution.entry_file} defines no function {solution.entry_function!r}"}, {}
        self.function = function
        self.filename = filename
        return {"ok": True}, {}

    def run(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.platforms.triton.inputs import make_inputs
        from engine.platforms.triton.local import classify_exception
        from engine.platforms.triton.runner import run_checked

        self.inputs = make_inputs(self.definition, self.workload, header["seed"], device=self.device)
        try:
            outputs = run_checked(self.function, self.definition, self.workload, self.inputs)
        except BaseException as exc:  # noqa: BLE001 - reported, not swallowed
            if isinstance(exc, MemoryError):
                return {"ok": False, "kind": "resource_limit", "message": f"MemoryError: {exc}"}, {}
            return _failure(classify_exception(exc), exc, self.filename), {}
        wire = [to_wire(o) for o in outputs]
        return ({"ok": True, "dtypes": [name for _, name in wire]},
                {f"out{i}": array for i, (array, _) in enumerate(wire)})

    def compile(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """cuda without a GPU: call the entry point on the seed's inputs (CPU tensors) so that every kernel it
        launches compiles for the target, none runs; then build Triton's launcher helper as a GPU host would."""
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.platforms.triton.compile_only import build_launcher
        from engine.platforms.triton.inputs import empty_outputs, make_inputs
        from engine.platforms.triton.local import classify_exception
        from engine.platforms.triton.runner import is_destination_passing

        if self.driver is None:
            return {"ok": False, "kind": "infrastructure_error", "retry": False,
                    "message": "only a compile-only cuda child compiles without running"}, {}
        inputs = make_inputs(self.definition, self.workload, header["seed"], device="cpu")
        args = [inputs[n] for n in self.definition.inputs]
        started = time.perf_counter()
        try:
            if is_destination_passing(self.function, self.definition):
                args += list(empty_outputs(self.definition, self.workload, device="cpu").values())
            self.function(*args)
        except BaseException as exc:  # noqa: BLE001 - the kernel's failure, in the shared taxonomy
            if isinstance(exc, MemoryError):
                return {"ok": False, "kind": "resource_limit", "message": f"MemoryError: {exc}"}, {}
            return _failure(classify_exception(exc), exc, self.filename), {}
        compiled = time.perf_counter()
        try:
            launcher = build_launcher(self.driver.utils.first_cubin)
        except BaseException as exc:  # noqa: BLE001 - no compiler, no headers, or the sandbox refused the build
            # late: loaded in the child by the role that needs it, in its order around the guard
            import traceback

            return {"ok": False, "kind": "infrastructure_error", "retry": False,
                    "message": f"Triton's launcher helper did not build: {type(exc).__name__}: {exc}",
                    "detail": traceback.format_exc()[-4000:]}, {}
        return {"ok": True, "target": f"sm_{self.driver.target.arch}", "kernels": self.driver.compiled,
                "launches": self.driver.launches, "launcher": launcher, "compile_s": round(compiled - started, 3),
                "launcher_s": round(time.perf_counter() - compiled, 3)}, {}

    def measure(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """cuda only: time the kernel on the last seed's inputs (engine.platforms.triton.timing)."""
        # late: loaded in the child by the role that needs it, in its order around the guard
        from engine.platforms.triton.local import classify_exception
        from engine.platforms.triton.runner import is_destination_passing
        from engine.platforms.triton.timing import gpu_environment, time_cuda

        if self.device != "cuda":
            return {"ok": False, "kind": "infrastructure_error", "retry": False,
                    "message": "the interpreter backend measures nothing"}, {}
        # late: loaded in the child by the role that needs it, in its order around the guard
        import torch

        args = [self.inputs[n] for n in self.definition.inputs]
        if is_destination_passing(self.function, self.definition):
            axes = self.definition.axis_values(self.workload)
            # late: loaded in the child by the role that needs it, in its order around the guard
            from engine.platforms.triton.inputs import empty_outputs

            outs = list(empty_outputs(self.definition, self.workload, device="cuda").values())
            del axes
            call = lambda: self.function(*args, *outs)  # noqa: E731
        else:
            call = lambda: self.function(*args)  # noqa: E731
        started = time.perf_counter()
        try:
            timing = time_cuda(call, l2_bytes=int(header["l2_bytes"]))
        except BaseException as exc:  # noqa: BLE001
            return _failure(classify_exception(exc), exc, self.filename, "while timing: "), {}
        torch.cuda.synchronize()
        return {"ok": True, "timing": timing.to_dict(), "samples_ms": timing.samples_ms,
                "child_wall_s": time.perf_counter() - started, "environment": gpu_environment()}, {}

