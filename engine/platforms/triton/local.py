"""Evaluating a Triton solution in this process: the GPU check's engine and the sandbox child's building blocks.

`check_correct` runs the solution on guarded buffers and compares with reference outputs computed elsewhere
(in the sandbox: another process; in the GPU check, our own script on our own machine: the same process);
`evaluate_case` adds the reference run and, on a GPU, the timing and the roofline. A case's `status` is one of
STATUSES; the sandbox backend maps them onto the shared failure taxonomy (`ErrorKind`).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from engine.platforms.triton.compare import compare_outputs
from engine.platforms.triton.flashinfer import Definition, Solution, Workload
from engine.platforms.triton.hardware import GPU_SPECS, GpuSpec
from engine.platforms.triton.inputs import InputError, make_inputs
from engine.platforms.triton.roofline import roofline
from engine.platforms.triton.runner import (
    KernelFailure,
    as_tuple,
    is_destination_passing,
    load_entry_point,
    run_checked,
)
from engine.platforms.triton.timing import implausible_events, time_cuda

STATUSES = ("correct", "incorrect", "out_of_bounds", "modified_input", "bad_outputs", "compile_error",
            "runtime_error", "reference_error", "input_error", "unstable_timing", "implausible_timing", "skipped")


@dataclass
class CaseResult:
    definition: str
    workload: str
    solution: str
    status: str = "skipped"
    message: str = ""
    seeds: list[int] = field(default_factory=list)
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    latency_ms: float | None = None
    spread: float | None = None
    reference_ms: float | None = None
    speedup: float | None = None
    floor_ms: float | None = None
    peak_fraction: float | None = None
    reference_peak_fraction: float | None = None
    bound: str = ""
    timing: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_reference(definition: Definition) -> Callable[..., Any]:
    """The definition's `run`, executed from its source in a namespace of its own."""
    namespace: dict[str, Any] = {"__name__": f"fib_reference_{definition.name}"}
    exec(compile(definition.reference, f"<reference {definition.name}>", "exec"), namespace)
    function = namespace.get("run")
    if not callable(function):
        raise ValueError(f"the reference of {definition.name} defines no run()")
    return function


def reference_outputs(reference: Callable[..., Any], definition: Definition, inputs: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
    return as_tuple(reference(*[inputs[n] for n in definition.inputs]))


def classify_exception(exc: BaseException) -> str:
    """A kernel's exception as a status: Triton's compile errors, our guard failures, the rest runtime errors."""
    if isinstance(exc, KernelFailure):
        return exc.kind
    if isinstance(exc, (SyntaxError, ImportError)):  # the source does not build: Python's compile step
        return "compile_error"
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct"}:
        return "compile_error"
    return "runtime_error"


def check_correct(function: Callable[..., Any], definition: Definition, workload: Workload,
                  inputs: Mapping[str, Any], expected: Sequence[torch.Tensor]) -> tuple[str, str, float | None, float | None]:
    """(status, message, max abs error, max rel error) of one guarded run against reference outputs."""
    try:
        outputs = run_checked(function, definition, workload, inputs)
    except Exception as exc:  # the kernel's failure, whatever it is, is a result
        return classify_exception(exc), f"{type(exc).__name__}: {exc}", None, None
    comparisons = compare_outputs(list(definition.outputs), [s.dtype for s in definition.outputs.values()],
                                  outputs, expected)
    abs_errors = [c.max_abs_error for c in comparisons]
    rel_errors = [c.max_rel_error for c in comparisons]
    worst_abs = None if None in abs_errors else max(abs_errors, default=0.0)  # type: ignore[type-var]
    worst_rel = None if None in rel_errors else max(rel_errors, default=0.0)  # type: ignore[type-var]
    failed = [c.message for c in comparisons if not c.ok]
    if failed:
        return "incorrect", "; ".join(failed), worst_abs, worst_rel
    return "correct", "", worst_abs, worst_rel


def gpu_spec_for(device_name: str) -> GpuSpec | None:
    """Our documented spec for a device name torch reports ("NVIDIA H200", "NVIDIA H100 80GB HBM3"): SXM
    parts only; PCIe and NVL variants have other clocks and bandwidths, and get None (no roofline)."""
    words = device_name.upper().replace("-", " ").split()
    if "PCIE" in words or "NVL" in words:
        return None
    return next((spec for spec in GPU_SPECS.values() if spec.name.upper() in words), None)


def _timed_call(function: Callable[..., Any], definition: Definition, inputs: Mapping[str, Any],
                outputs: Sequence[torch.Tensor] | None) -> Callable[[], Any]:
    args = [inputs[n] for n in definition.inputs]
    if outputs is not None:
        return lambda: function(*args, *outputs)
    return lambda: function(*args)


def evaluate_case(definition: Definition, workload: Workload, solution: Solution, *, workdir: Path,
                  device: str = "cpu", seeds: Sequence[int] = (0,), gpu: GpuSpec | None = None,
                  time_it: bool = False, base_dir: Path | None = None, name: str = "") -> CaseResult:
    """Correctness on every seed; then, with `time_it` on a GPU, latency, reference latency and roofline."""
    started = time.monotonic()
    result = CaseResult(definition=definition.name, workload=workload.uuid, solution=name or solution.name,
                        seeds=list(seeds))

    def done(status: str, message: str = "") -> CaseResult:
        result.status, result.message = status, message
        result.seconds = round(time.monotonic() - started, 2)
        return result

    try:
        reference = load_reference(definition)
    except Exception as exc:
        return done("reference_error", f"{type(exc).__name__}: {exc}")
    try:
        function = load_entry_point(solution, workdir / "solution")
    except Exception as exc:
        return done(classify_exception(exc), f"import failed: {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
    inputs: dict[str, Any] = {}
    expected: tuple[torch.Tensor, ...] = ()
    for seed in seeds:
        try:
            inputs = make_inputs(definition, workload, seed, device=device, base_dir=base_dir)
        except (InputError, ValueError) as exc:
            return done("input_error", str(exc))
        try:
            expected = reference_outputs(reference, definition, inputs)
        except Exception as exc:
            return done("reference_error", f"{type(exc).__name__}: {exc}")
        status, message, abs_err, rel_err = check_correct(function, definition, workload, inputs, expected)
        result.max_abs_error = max(filter(None, (result.max_abs_error, abs_err)), default=abs_err)
        result.max_rel_error = max(filter(None, (result.max_rel_error, rel_err)), default=rel_err)
        if status != "correct":
            return done(status, f"seed {seed}: {message}")
    if not (time_it and device.startswith("cuda")):
        return done("correct", "correctness only: no GPU" if not device.startswith("cuda") else "")
    spec = gpu or gpu_spec_for(torch.cuda.get_device_name(0))
    l2 = (spec.l2_bytes if spec else 0) or int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20))
    outputs = None
    if is_destination_passing(function, definition):
        axes = definition.axis_values(workload)
        outputs = [torch.empty(definition.shape(s, axes), dtype=e.dtype, device=device)
                   for s, e in zip(definition.outputs.values(), expected, strict=False)]
    try:
        timing = time_cuda(_timed_call(function, definition, inputs, outputs), l2_bytes=l2)
        reference_timing = time_cuda(_timed_call(reference, definition, inputs, None), l2_bytes=l2)
    except Exception as exc:
        return done(classify_exception(exc), f"while timing: {type(exc).__name__}: {exc}")
    result.latency_ms, result.spread = timing.median_ms, timing.spread
    result.reference_ms = reference_timing.median_ms
    result.speedup = reference_timing.median_ms / timing.median_ms
    result.timing = {"kernel": timing.to_dict(), "reference": reference_timing.to_dict()}
    if spec is not None:
        floor = roofline(definition, workload, spec, inputs)
        result.floor_ms = floor.floor_s * 1e3
        result.peak_fraction = result.floor_ms / timing.median_ms
        result.reference_peak_fraction = result.floor_ms / reference_timing.median_ms
        result.bound = floor.bound
    why = implausible_events(timing)
    if why:
        return done("implausible_timing", why)
    if not timing.stable:
        return done("unstable_timing", f"repetitions spread {timing.spread:.1%} (> allowed)")
    return done("correct")
