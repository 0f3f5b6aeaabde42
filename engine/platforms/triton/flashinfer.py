"""FlashInfer-Bench's JSON formats, read and written by us: Definition, Workload, Solution (and a Trace's
workload line).

Why not the `flashinfer-bench` package: it requires `flashinfer-python` and `apache-tvm-ffi`, GPU builds that
neither install nor import on a machine without a GPU, and the bare GPU machine `measurements/gpu_check.py`
runs on must need nothing beyond numpy, PyTorch and Triton. The formats are small and documented (the
flashinfer-trace dataset card, "FlashInfer Trace Schema"); this module reads what they document and refuses
anything else with a `FormatError` naming the field. Pure Python: no torch import.

- Definition: name, op_type, axes ({name: {"type": "const", "value": n} | {"type": "var"}}), inputs and
  outputs ({name: {"shape": [axis names] | null (a scalar), "dtype": "bfloat16"}}), reference (Python source
  defining `run(*inputs)` returning the outputs), optional tags, description, constraints.
- Workload: definition, axes ({var axis: value}), inputs ({name: {"type": "random"} | {"type": "scalar",
  "value": v} | {"type": "safetensors", "path": p, "tensor_key": k}}), uuid. A file holds either the workload
  object or a trace line wrapping it ({"definition": ..., "workload": {...}, "solution": ..., "evaluation": ...}).
- Solution: name, definition, author, spec {language, target_hardware [..], entry_point "main.py::run",
  dependencies [..]}, sources [{path, content}], optional description.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The dtypes FlashInfer-Bench definitions use, by their torch names; element sizes in bytes.
DTYPE_BYTES: dict[str, int] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}
INPUT_KINDS = ("random", "scalar", "safetensors")


class FormatError(ValueError):
    """A FlashInfer-Bench document is malformed; the message names the field (e.g. `inputs.q.dtype`)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where


def _need(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(data, Mapping):
        raise FormatError(where, f"expected an object, got {type(data).__name__}")
    if key not in data:
        raise FormatError(f"{where}.{key}" if where else key, "missing")
    value = data[key]
    allowed = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        names = " or ".join(k.__name__ for k in allowed)
        raise FormatError(f"{where}.{key}" if where else key, f"expected {names}, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[str, ...] | None  # axis names; None for a scalar
    dtype: str
    description: str = ""


@dataclass(frozen=True)
class Definition:
    name: str
    op_type: str
    const_axes: dict[str, int]
    var_axes: tuple[str, ...]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    tags: tuple[str, ...] = ()
    description: str = ""
    constraints: tuple[str, ...] = ()

    def axis_values(self, workload: Workload) -> dict[str, int]:
        """Every axis's value for a workload: the constants plus the workload's variables (FormatError if one is missing)."""
        values = dict(self.const_axes)
        for axis in self.var_axes:
            if axis not in workload.axes:
                raise FormatError(f"workload.axes.{axis}", f"missing (definition {self.name} declares it var)")
            values[axis] = workload.axes[axis]
        return values

    def shape(self, spec: TensorSpec, axes: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(axes[a] for a in spec.shape) if spec.shape is not None else ()


@dataclass(frozen=True)
class InputSpec:
    kind: str  # "random", "scalar" or "safetensors"
    value: float | int | bool | None = None  # scalar
    path: str = ""  # safetensors
    tensor_key: str = ""


@dataclass(frozen=True)
class Workload:
    definition: str
    axes: dict[str, int]
    inputs: dict[str, InputSpec]
    uuid: str = ""


@dataclass(frozen=True)
class Solution:
    name: str
    definition: str
    author: str
    language: str
    target_hardware: tuple[str, ...]
    entry_point: str  # "main.py::run"
    sources: dict[str, str]  # path -> content, in file order
    dependencies: tuple[str, ...] = ()
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # unknown top-level fields, written back unchanged

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::", 1)[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.split("::", 1)[1]


# Packages a Triton solution imports, so its own files may not take their names (nor the standard library's).
SHADOWED_PACKAGES = frozenset({"torch", "triton", "numpy"})


def module_path(path: str) -> str:
    """A solution file's module name inside its package: "helpers.py" -> "helpers", "ops/norm.py" -> "ops.norm"."""
    return ".".join(Path(path).with_suffix("").parts)


def unimportable_source(path: str) -> str:
    """Why a solution file cannot be one of its Python modules ("" when it can): the sandbox runs a solution's
    files as the modules of one package, so each is a .py file whose folders and name are identifiers."""
    if not path.endswith(".py"):
        return "not a .py file (a Triton solution's files are Python modules)"
    bad = [part for part in module_path(path).split(".") if not part.isidentifier()]
    if bad:
        return f"{bad[0]!r} is not a Python identifier, so the file cannot be imported"
    root = module_path(path).split(".")[0]
    if root in sys.stdlib_module_names or root in SHADOWED_PACKAGES:
        return f"{root!r} would shadow the module of that name (the standard library's, torch, triton or numpy)"
    return ""


# -- parsing -------------------------------------------------------------------------------------------


def _tensor_specs(data: Any, where: str, axes: set[str]) -> dict[str, TensorSpec]:
    if not isinstance(data, Mapping) or not data:
        raise FormatError(where, "expected a non-empty object of tensors")
    specs = {}
    for name, spec in data.items():
        here = f"{where}.{name}"
        dtype = _need(spec, "dtype", str, here)
        if dtype not in DTYPE_BYTES:
            raise FormatError(f"{here}.dtype", f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_BYTES)}")
        shape = spec.get("shape")
        if shape is not None:
            if not isinstance(shape, list) or not all(isinstance(a, str) for a in shape):
                raise FormatError(f"{here}.shape", "expected a list of axis names or null")
            unknown = [a for a in shape if a not in axes]
            if unknown:
                raise FormatError(f"{here}.shape", f"unknown axis {unknown[0]!r}; axes are {sorted(axes)}")
            shape = tuple(shape)
        specs[name] = TensorSpec(shape=shape, dtype=dtype, description=str(spec.get("description", "")))
    return specs


def parse_definition(data: Any) -> Definition:
    name = _need(data, "name", str, "")
    op_type = _need(data, "op_type", str, "")
    axes = _need(data, "axes", Mapping, "")
    const_axes: dict[str, int] = {}
    var_axes: list[str] = []
    for axis, spec in axes.items():
        kind = _need(spec, "type", str, f"axes.{axis}")
        if kind == "const":
            value = _need(spec, "value", int, f"axes.{axis}")
            if value < 0:
                raise FormatError(f"axes.{axis}.value", f"must be >= 0, got {value}")
            const_axes[axis] = value
        elif kind == "var":
            var_axes.append(axis)
        else:
            raise FormatError(f"axes.{axis}.type", f"expected 'const' or 'var', got {kind!r}")
    names = set(axes)
    inputs = _tensor_specs(data.get("inputs"), "inputs", names)
    outputs = _tensor_specs(data.get("outputs"), "outputs", names)
    reference = _need(data, "reference", str, "")
    if "def run" not in reference:
        raise FormatError("reference", "must define run(...)")
    constraints = data.get("constraints") or []
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise FormatError("constraints", "expected a list of strings")
    return Definition(
        name=name, op_type=op_type, const_axes=const_axes, var_axes=tuple(var_axes), inputs=inputs,
        outputs=outputs, reference=reference, tags=tuple(str(t) for t in data.get("tags") or ()),
        description=str(data.get("description", "")), constraints=tuple(constraints),
    )


def parse_workload(data: Any) -> Workload:
    """A workload object, or a trace line wrapping one under "workload" (the definition name outside it)."""
    definition = None
    if isinstance(data, Mapping) and isinstance(data.get("workload"), Mapping):
        definition = _need(data, "definition", str, "")
        data = data["workload"]
    if definition is None:
        definition = _need(data, "definition", str, "")
    axes = _need(data, "axes", Mapping, "workload")
    for axis, value in axes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise FormatError(f"workload.axes.{axis}", f"expected an integer >= 0, got {value!r}")
    inputs: dict[str, InputSpec] = {}
    for name, spec in _need(data, "inputs", Mapping, "workload").items():
        here = f"workload.inputs.{name}"
        kind = _need(spec, "type", str, here)
        if kind == "random":
            inputs[name] = InputSpec("random")
        elif kind == "scalar":
            value = _need(spec, "value", (int, float, bool), here)
            inputs[name] = InputSpec("scalar", value=value)
        elif kind == "safetensors":
            inputs[name] = InputSpec("safetensors", path=_need(spec, "path", str, here),
                                     tensor_key=str(spec.get("tensor_key", name)))
        else:
            raise FormatError(f"{here}.type", f"expected one of {list(INPUT_KINDS)}, got {kind!r}")
    return Workload(definition=definition, axes=dict(axes), inputs=inputs, uuid=str(data.get("uuid", "")))


def parse_solution(data: Any) -> Solution:
    name = _need(data, "name", str, "")
    spec = _need(data, "spec", Mapping, "")
    entry_point = _need(spec, "entry_point", str, "spec")
    if entry_point.count("::") != 1 or not all(entry_point.split("::")):
        raise FormatError("spec.entry_point", f"expected 'file.py::function', got {entry_point!r}")
    sources: dict[str, str] = {}
    for i, source in enumerate(_need(data, "sources", list, "")):
        path = _need(source, "path", str, f"sources[{i}]")
        if path.startswith("/") or ".." in Path(path).parts:
            raise FormatError(f"sources[{i}].path", f"must be a relative path inside the solution, got {path!r}")
        sources[path] = _need(source, "content", str, f"sources[{i}]")
    file = entry_point.split("::")[0]
    if file not in sources:
        raise FormatError("spec.entry_point", f"names {file!r}, which is not among sources {sorted(sources)}")
    hardware = spec.get("target_hardware") or []
    if isinstance(hardware, str):
        hardware = [hardware]
    known = {"name", "definition", "author", "spec", "sources", "description"}
    return Solution(
        name=name, definition=_need(data, "definition", str, ""), author=str(data.get("author", "")),
        language=_need(spec, "language", str, "spec"), target_hardware=tuple(str(h) for h in hardware),
        entry_point=entry_point, sources=sources, dependencies=tuple(str(d) for d in spec.get("dependencies") or ()),
        description=str(data.get("description", "")), extra={k: v for k, v in data.items() if k not in known},
    )


# -- writing -------------------------------------------------------------------------------------------


def _tensors_dict(specs: Mapping[str, TensorSpec]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, spec in specs.items():
        entry: dict[str, Any] = {"shape": list(spec.shape) if spec.shape is not None else None, "dtype": spec.dtype}
        if spec.description:
            entry["description"] = spec.description
        out[name] = entry
    return out


def definition_to_dict(d: Definition) -> dict[str, Any]:
    axes: dict[str, Any] = {a: {"type": "const", "value": v} for a, v in d.const_axes.items()}
    axes.update({a: {"type": "var"} for a in d.var_axes})
    data: dict[str, Any] = {"name": d.name, "op_type": d.op_type, "axes": axes, "inputs": _tensors_dict(d.inputs),
                            "outputs": _tensors_dict(d.outputs), "reference": d.reference}
    if d.tags:
        data["tags"] = list(d.tags)
    if d.description:
        data["description"] = d.description
    if d.constraints:
        data["constraints"] = list(d.constraints)
    return data


def workload_to_dict(w: Workload) -> dict[str, Any]:
    """The trace-line form FlashInfer-Bench's workload files use: {"definition", "workload": {...}}."""
    inputs: dict[str, Any] = {}
    for name, spec in w.inputs.items():
        if spec.kind == "scalar":
            inputs[name] = {"type": "scalar", "value": spec.value}
        elif spec.kind == "safetensors":
            inputs[name] = {"type": "safetensors", "path": spec.path, "tensor_key": spec.tensor_key}
        else:
            inputs[name] = {"type": "random"}
    return {"definition": w.definition, "workload": {"axes": dict(w.axes), "inputs": inputs, "uuid": w.uuid}}


def solution_to_dict(s: Solution) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": s.name, "definition": s.definition, "author": s.author,
        "spec": {"language": s.language, "target_hardware": list(s.target_hardware), "entry_point": s.entry_point,
                 "dependencies": list(s.dependencies)},
        "sources": [{"path": p, "content": c} for p, c in s.sources.items()],
    }
    if s.description:
        data["description"] = s.description
    data.update(s.extra)
    return data


def solution_from_kernel(source: str, *, name: str, definition: str, author: str,
                         target_hardware: tuple[str, ...] = ("H100", "H200"), description: str = "",
                         entry_function: str = "run") -> Solution:
    """Our kernel (one Triton source file defining `entry_function`) as a FlashInfer-Bench solution."""
    if f"def {entry_function}" not in source:
        raise FormatError("sources[0].content", f"the kernel source does not define {entry_function}(...)")
    return Solution(name=name, definition=definition, author=author, language="triton",
                    target_hardware=tuple(target_hardware), entry_point=f"main.py::{entry_function}",
                    sources={"main.py": source}, description=description)


# -- files ---------------------------------------------------------------------------------------------


def _read_json(path: str | Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise FormatError(str(path), f"not JSON ({exc})") from None


def load_definition(path: str | Path) -> Definition:
    return parse_definition(_read_json(path))


def load_workloads(path: str | Path) -> list[Workload]:
    """One workload (a .json file) or one per line (a .jsonl file, FlashInfer-Bench's trace files)."""
    text = Path(path).read_text()
    if str(path).endswith(".jsonl"):
        workloads = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    workloads.append(parse_workload(json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise FormatError(f"{path}:{number}", f"not JSON ({exc})") from None
        return workloads
    return [parse_workload(_read_json(path))]


def load_solution(path: str | Path) -> Solution:
    return parse_solution(_read_json(path))


def dump(data: Mapping[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(data, indent=2) + "\n")
