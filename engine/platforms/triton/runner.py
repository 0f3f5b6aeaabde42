"""Loading a solution's sources and calling its entry point on guarded buffers, with the checks that need no
reference: outputs never written, inputs modified, memory touched outside the buffers.

- Loading: the sources are written to a directory, as a package, and the entry file imported from it
  (`@triton.jit` reads its function's source from the file, so an in-memory `exec` is not enough; the
  sandbox instead serves in-memory sources through linecache: engine.platforms.triton.roles).
- Calling convention: FlashInfer-Bench's two styles. If the entry point takes one positional parameter per
  input and per output, it is destination-passing: we pass output buffers pre-filled with a sentinel (NaN);
  otherwise it returns the outputs (one tensor, or a tuple in the definition's order).
- Guards: every tensor we pass sits in the middle of a larger allocation whose margins hold a canary.
  Neither the Triton interpreter nor a GPU raises on an unmasked access a few elements past a tensor (the
  interpreter reads and writes the neighbouring host memory; checked on Triton 3.9), so:
  * an out-of-bounds *write* changes a margin: detected after the call (`OutOfBounds`);
  * an out-of-bounds *read* returns margin values: the call is made twice with two different canaries
    (NaN, then varied finite values) and outputs that differ between the two read outside their buffers.
  Accesses beyond the margins (`GUARD_BYTES` each side) are not caught by this; on a GPU they may fault
  (a runtime error) or read other memory.
- Inputs: compared bit for bit with a copy taken before the call (`ModifiedInput`).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.platforms.triton.flashinfer import Definition, Solution, Workload, module_path
from engine.platforms.triton.inputs import torch_dtype

GUARD_BYTES = 64 * 1024  # canary margin on each side of every tensor
_CANARY_INT = (-7,)  # canary 0 for integer tensors (canary 1: varied values)


class KernelFailure(Exception):
    """The kernel did something a correct kernel never does; `kind` is our label for it."""

    kind = "kernel_failure"


class OutOfBounds(KernelFailure):
    kind = "out_of_bounds"


class ModifiedInput(KernelFailure):
    kind = "modified_input"


class BadOutputs(KernelFailure):
    """Wrong number, shape or dtype of outputs."""

    kind = "bad_outputs"


def autotune_without_timing() -> None:
    """On Triton's CPU interpreter an `@triton.autotune` with several configurations fails ("0 active
    drivers") looking for a GPU to time them on. There nothing can be timed: each configuration runs once (a
    broken one still fails the call) and all count as equally fast, so the first is kept."""
    from triton.runtime.autotuner import Autotuner  # lazy: triton is optional (a GPU host's)

    def run_once(kernel_call: Callable[[], Any], quantiles: Any = None) -> list[float]:
        kernel_call()
        return [0.0, 0.0, 0.0]

    Autotuner.do_bench = property(lambda self: run_once)  # type: ignore[assignment,method-assign]


# The folders earlier solutions put on sys.path: a later solution's `import helpers` must find its own
# helpers.py, not the module an earlier solution's left in sys.modules.
_solution_folders: list[str] = []


def _forget_earlier_solutions() -> None:
    """Take earlier solutions' folders off sys.path and their modules out of sys.modules (the functions
    already loaded keep working)."""
    folders = tuple(f + os.sep for f in _solution_folders)
    for folder in _solution_folders:
        while folder in sys.path:
            sys.path.remove(folder)
    _solution_folders.clear()
    if folders:
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(folders):
                del sys.modules[name]


def load_entry_point(solution: Solution, directory: Path, module_name: str = "") -> Callable[..., Any]:
    """Write the sources under `directory/<package>/` and import the entry function from
    `<package>.<entry module>` (the package: `module_name` or a fresh name). As in FlashInfer-Bench the
    solution is a package, so its files import each other relatively (`from .helpers import f`); its
    directory is also on sys.path, so `import helpers` works too."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        autotune_without_timing()
    package = module_name or f"fib_solution_{abs(hash((solution.name, str(directory))))}"
    root = directory / package
    root.mkdir(parents=True, exist_ok=True)
    for path, content in solution.sources.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    _forget_earlier_solutions()
    for folder in (str(root), str(directory)):
        sys.path.insert(0, folder)
        _solution_folders.append(folder)
    importlib.invalidate_caches()
    module = importlib.import_module(f"{package}.{module_path(solution.entry_file)}")
    function = getattr(module, solution.entry_function, None)
    if not callable(function):
        raise ImportError(f"{solution.entry_file} defines no function {solution.entry_function!r}")
    return function


def is_destination_passing(function: Callable[..., Any], definition: Definition) -> bool:
    """True when the entry point takes one positional parameter per input and output (no *args)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == len(definition.inputs) + len(definition.outputs)


@dataclass
class Guarded:
    """A tensor inside a larger allocation with canary margins."""

    buffer: torch.Tensor  # flat
    view: torch.Tensor  # what the kernel gets
    margin: int  # elements each side
    expected: tuple[torch.Tensor, torch.Tensor] | None = None  # the margins as filled

    @classmethod
    def wrap(cls, tensor: torch.Tensor) -> Guarded:
        margin = max(1, GUARD_BYTES // tensor.element_size())
        buffer = torch.empty(margin + tensor.numel() + margin, dtype=tensor.dtype, device=tensor.device)
        view = buffer[margin: margin + tensor.numel()].view(tensor.shape)
        view.copy_(tensor)
        return cls(buffer=buffer, view=view, margin=margin)

    def _margins(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.buffer[: self.margin], self.buffer[self.margin + self.view.numel():]

    def fill_margins(self, which: int) -> None:
        """Canary 0: NaN (floats) or a constant; canary 1: varied values, so no computed value (a kernel
        storing what it read, or an rmsnorm of canaries) is likely to rewrite a margin exactly."""
        for part in self._margins():
            part.copy_(_canary(part, which))
        self.expected = tuple(part.clone() for part in self._margins())  # type: ignore[assignment]

    def margins_intact(self) -> bool:
        assert self.expected is not None, "fill_margins first"
        return all(bits_equal(part, want) for part, want in zip(self._margins(), self.expected, strict=True))


def _canary(part: torch.Tensor, which: int) -> torch.Tensor:
    dtype = part.dtype
    if which == 0:
        value: float | int | bool = float("nan") if dtype.is_floating_point else (
            True if dtype == torch.bool else _CANARY_INT[0])
        return torch.full_like(part, value)
    generator = torch.Generator().manual_seed(part.numel())
    if dtype.is_floating_point:
        values = torch.rand(part.shape, generator=generator) * 2e4 + 1e3
    elif dtype == torch.bool:
        values = torch.randint(0, 2, part.shape, generator=generator)
    else:
        values = torch.randint(1000, 2**15, part.shape, generator=generator)
    return values.to(dtype=dtype, device=part.device)


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN equals the same NaN), any dtype."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == torch.bool:
        return bool(torch.equal(a, b))
    return bool(torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def call_guarded(function: Callable[..., Any], definition: Definition, workload: Workload,
                 inputs: Mapping[str, Any], *, canary: int = 0) -> tuple[torch.Tensor, ...]:
    """One call of the entry point on guarded copies of `inputs`: the outputs (copied out, in definition
    order). Raises OutOfBounds, ModifiedInput or BadOutputs; the kernel's own exceptions propagate."""
    before = {n: v.clone() for n, v in inputs.items() if isinstance(v, torch.Tensor)}
    guarded = {n: Guarded.wrap(v) for n, v in before.items()}
    for g in guarded.values():
        g.fill_margins(canary)
    args = [guarded[n].view if n in guarded else inputs[n] for n in definition.inputs]
    axes = definition.axis_values(workload)
    device = next((v.device for v in before.values()), torch.device("cpu"))
    destination = is_destination_passing(function, definition)
    out_guards: list[Guarded] = []
    if destination:
        for spec in definition.outputs.values():
            dtype = torch_dtype(spec.dtype)
            fill: float | int | bool = float("nan") if dtype.is_floating_point else (
                True if dtype == torch.bool else torch.iinfo(dtype).max)
            g = Guarded.wrap(torch.full(definition.shape(spec, axes), fill, dtype=dtype, device=device))
            g.fill_margins(canary)
            out_guards.append(g)
        function(*args, *[g.view for g in out_guards])
        outputs = tuple(g.view for g in out_guards)
    else:
        outputs = as_tuple(function(*args))
    if device.type == "cuda":
        torch.cuda.synchronize()
    for name, g in list(guarded.items()) + [(f"output {n}", g) for n, g in zip(definition.outputs, out_guards, strict=False)]:
        if not g.margins_intact():
            raise OutOfBounds(f"the kernel wrote outside the buffer of {name} (a canary next to it changed): "
                              "an unmasked store past its end or before its start")
    for name, g in guarded.items():
        if not bits_equal(g.view, before[name]):
            changed = int((g.view.contiguous().view(torch.uint8) != before[name].contiguous().view(torch.uint8)).sum())
            raise ModifiedInput(f"the kernel modified its input {name!r} ({changed} bytes changed); inputs are read-only")
    return _check_outputs(definition, axes, outputs)


def _check_outputs(definition: Definition, axes: Mapping[str, int], outputs: Sequence[Any]) -> tuple[torch.Tensor, ...]:
    if len(outputs) != len(definition.outputs):
        raise BadOutputs(f"the kernel returned {len(outputs)} output(s); {definition.name} has "
                         f"{len(definition.outputs)} ({', '.join(definition.outputs)})")
    checked = []
    for (name, spec), value in zip(definition.outputs.items(), outputs, strict=False):
        if not isinstance(value, torch.Tensor):
            raise BadOutputs(f"output {name!r} is a {type(value).__name__}, not a tensor")
        shape = definition.shape(spec, axes)
        if tuple(value.shape) != shape:
            raise BadOutputs(f"output {name!r} has shape {list(value.shape)}, expected {list(shape)}")
        if value.dtype != torch_dtype(spec.dtype):
            raise BadOutputs(f"output {name!r} has dtype {value.dtype}, expected torch.{spec.dtype}")
        checked.append(value.detach().clone())
    return tuple(checked)


def run_checked(function: Callable[..., Any], definition: Definition, workload: Workload,
                inputs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
    """Two guarded calls with different read canaries; outputs that differ read outside their buffers."""
    first = call_guarded(function, definition, workload, inputs, canary=0)
    second = call_guarded(function, definition, workload, inputs, canary=1)
    for name, a, b in zip(definition.outputs, first, second, strict=False):
        if not _close_or_same(a, b):
            raise OutOfBounds(f"output {name!r} depends on memory outside the input buffers (it changed when "
                              "only the canaries around them did): an unmasked load past a tensor's end")
    return first


def _close_or_same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if bits_equal(a, b):
        return True
    if not a.dtype.is_floating_point:
        return False
    # On a GPU, reductions need not be bitwise reproducible: allow rounding-level differences, not canaries.
    x, y = a.float(), b.float()
    if not torch.equal(torch.isnan(x), torch.isnan(y)):
        return False
    finite = ~torch.isnan(x)
    return bool(torch.allclose(x[finite], y[finite], rtol=1e-3, atol=1e-3))
