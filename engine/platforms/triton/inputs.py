"""A workload's inputs as torch tensors, drawn from a seed: the same seed gives the same inputs on any device.

- float tensors: standard normal (float32 draw, then cast), like FlashInfer-Bench's random inputs;
- index tensors (integer inputs): valid by construction where the names say what they index, the
  conventions FlashInfer-Bench's paged and ragged attention definitions use:
  * `<prefix>_indptr` (e.g. kv_indptr, qo_indptr): non-decreasing offsets from 0, one per sequence plus one;
    its last value is the length of `<prefix>_indices` when that input exists, else the length the
    definition's constraints give (`<axis> == <name>[-1].item()`), else the axis `total_<prefix>` or the
    first axis of a tensor whose rows it splits;
  * `<prefix>_indices`: page ids in [0, num_pages) (the axis `num_pages`, else the indices' own length);
  * other integer inputs: uniform in [0, 16); bool inputs: fair coins.
  What is NOT handled: semantic constraints beyond those (a causal prefill's q length <= kv length per
  sequence, sorted or unique page ids, MoE routing tables); workloads that need them must give the tensors
  as safetensors files, as FlashInfer-Bench's captured workloads do.
- "scalar" inputs: the workload's value as a Python number;
- "safetensors" inputs: read from the file (relative paths against `base_dir`) when the `safetensors`
  package is installed; otherwise an `InputError` saying so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from engine.platforms.triton.flashinfer import DTYPE_BYTES, Definition, TensorSpec, Workload

SMALL_INT_RANGE = 16


class InputError(ValueError):
    """The workload's inputs cannot be built (an unreadable file, an index tensor with no valid values)."""


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise InputError(f"torch has no dtype {name!r}")
    return dtype


def _constraint_length(definition: Definition, name: str, axes: Mapping[str, int]) -> int | None:
    pattern = re.compile(rf"^\s*(\w+)\s*==\s*{re.escape(name)}\[-1\]\.item\(\)\s*$")
    for constraint in definition.constraints:
        match = pattern.match(constraint)
        if match and match.group(1) in axes:
            return axes[match.group(1)]
    return None


def _indptr(definition: Definition, name: str, shape: tuple[int, ...], axes: Mapping[str, int],
            shapes: Mapping[str, tuple[int, ...]], generator: torch.Generator) -> torch.Tensor:
    prefix = name[: -len("indptr")].rstrip("_")
    total = _constraint_length(definition, name, axes)
    if total is None and f"{prefix}_indices" in shapes:
        total = shapes[f"{prefix}_indices"][0]
    if total is None and f"total_{prefix}" in axes:
        total = axes[f"total_{prefix}"]
    if total is None:
        # A ragged layout: the indptr splits the rows of tensors like q or k ([total tokens, heads, dim]).
        rows = [s[0] for n, s in shapes.items() if n.startswith(prefix) and n != name and len(s) >= 2]
        total = rows[0] if rows else 0
    count = shape[0] - 1
    if count < 0:
        raise InputError(f"{name}: an indptr needs at least one element, got shape {list(shape)}")
    if count == 0:
        return torch.zeros(1, dtype=torch.int64)
    cuts = torch.sort(torch.randint(0, total + 1, (count - 1,), generator=generator)).values
    return torch.cat([torch.zeros(1, dtype=torch.int64), cuts, torch.tensor([total])])


def _random_tensor(definition: Definition, name: str, spec: TensorSpec, axes: Mapping[str, int],
                   shapes: Mapping[str, tuple[int, ...]], generator: torch.Generator) -> torch.Tensor:
    shape = shapes[name]
    dtype = torch_dtype(spec.dtype)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).to(torch.bool)
    if name.endswith("indptr") and len(shape) == 1:
        values = _indptr(definition, name, shape, axes, shapes, generator)
    elif name.endswith("indices"):
        high = axes.get("num_pages", shape[0] if shape else 1)
        if high <= 0 and any(shape):
            raise InputError(f"{name}: no valid index (num_pages is {high})")
        values = torch.randint(0, max(high, 1), shape, generator=generator)
    else:
        values = torch.randint(0, SMALL_INT_RANGE, shape, generator=generator)
    return values.to(dtype)


def _safetensor(path: str, key: str, base_dir: Path | None) -> torch.Tensor:
    try:
        # lazy: safetensors is optional (FlashInfer-Bench tensor files only)
        from safetensors.torch import load_file
    except ImportError:
        raise InputError(f"input file {path!r} needs the `safetensors` package, which is not installed") from None
    full = Path(path) if base_dir is None or Path(path).is_absolute() else base_dir / path
    if not full.exists():
        raise InputError(f"input file {full} does not exist")
    tensors = load_file(str(full))
    if key not in tensors:
        raise InputError(f"{full} has no tensor {key!r}; it has {sorted(tensors)}")
    return tensors[key]


def make_inputs(definition: Definition, workload: Workload, seed: int, *, device: str = "cpu",
                base_dir: Path | None = None) -> dict[str, Any]:
    """The inputs, in the definition's order, as tensors on `device` (scalars as Python numbers)."""
    axes = definition.axis_values(workload)
    shapes = {name: definition.shape(spec, axes) for name, spec in definition.inputs.items()}
    generator = torch.Generator().manual_seed(int(seed) % 2**63)
    values: dict[str, Any] = {}
    for name, spec in definition.inputs.items():
        entry = workload.inputs.get(name)
        kind = entry.kind if entry is not None else ("scalar" if spec.shape is None else "random")
        if kind == "scalar":
            if entry is None or entry.value is None:
                raise InputError(f"{name}: a scalar input needs a value in the workload")
            values[name] = entry.value
            continue
        if kind == "safetensors":
            assert entry is not None
            tensor = _safetensor(entry.path, entry.tensor_key, base_dir).to(torch_dtype(spec.dtype))
            if tuple(tensor.shape) != shapes[name]:
                raise InputError(f"{name}: the file's tensor has shape {list(tensor.shape)}, the definition "
                                 f"says {list(shapes[name])}")
        else:
            tensor = _random_tensor(definition, name, spec, axes, shapes, generator)
        values[name] = tensor.to(device)
    return values


def empty_outputs(definition: Definition, workload: Workload, *, device: str = "cpu") -> dict[str, torch.Tensor]:
    """Output buffers filled with a sentinel (NaN for floats, the dtype's maximum for integers), so a
    kernel that never writes an output leaves values no reference produces."""
    axes = definition.axis_values(workload)
    outputs = {}
    for name, spec in definition.outputs.items():
        dtype = torch_dtype(spec.dtype)
        shape = definition.shape(spec, axes)
        if dtype.is_floating_point:
            fill: float | int | bool = float("nan")
        elif dtype == torch.bool:
            fill = True
        else:
            fill = torch.iinfo(dtype).max
        outputs[name] = torch.full(shape, fill, dtype=dtype, device=device)
    return outputs


def tensor_bytes(definition: Definition, workload: Workload) -> tuple[int, int]:
    """Bytes of all inputs and of all outputs at the workload's shapes (scalars count 0)."""
    axes = definition.axis_values(workload)

    def total(specs: Mapping[str, TensorSpec]) -> int:
        count = 0
        for spec in specs.values():
            if spec.shape is None:
                continue
            elements = 1
            for axis in spec.shape:
                elements *= axes[axis]
            count += elements * DTYPE_BYTES[spec.dtype]
        return count

    return total(definition.inputs), total(definition.outputs)
