"""What the scripts that run on a bare GPU machine share (measurements/gpu_check.py, measurements/
gpu_offline_search.py): the FlashInfer-Bench files they read, the small stand-in workloads for the CPU
interpreter, the documented peaks of the GPU they find, and a case's status in the shared failure taxonomy.

Pure Python with no torch import: the callers import torch themselves, after setting TRITON_INTERPRET.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.platforms.triton.flashinfer import (
    Definition,
    FormatError,
    Workload,
    load_definition,
    load_workloads,
)
from engine.platforms.triton.hardware import GpuSpec, get_gpu_spec

INTERPRETER_AXIS_MAX = 16  # the interpreter runs every program on the CPU: var axes are cut to this

# engine.platforms.triton.local's statuses -> the shared failure taxonomy (engine.evaluator.result.ErrorKind codes),
# used by the sandboxed pipeline (engine.platforms.triton.pipeline) and the GPU scripts. None: a correct kernel.
ERROR_KINDS: dict[str, str | None] = {
    "correct": None, "incorrect": "incorrect", "bad_outputs": "incorrect", "modified_input": "modified_input",
    "out_of_bounds": "runtime_error", "runtime_error": "runtime_error", "compile_error": "compile_error",
    # What the sandbox's children add: refused code, the wall clock and memory limits, our own failures.
    "rejected": "rejected", "timeout": "timeout", "resource_limit": "resource_limit",
    "infrastructure_error": "infrastructure_error",
    # Not the kernel's doing: the search evaluates it again (engine.search.beam INFRASTRUCTURE_RETRIES).
    "reference_error": "infrastructure_error", "input_error": "infrastructure_error",
    "unstable_timing": "infrastructure_error", "skipped": "infrastructure_error",
    # Event times that cannot be true, as the cuda backend holds them: out of the beam and the memory.
    "implausible_timing": "suspicious",
}
# Statuses whose kernel passed its correctness check (its timing may still be refused).
CHECKED_CORRECT = ("correct", "unstable_timing", "implausible_timing")


def json_files(folder: Path | None) -> list[Path]:
    return sorted(folder.rglob("*.json")) if folder is not None and folder.is_dir() else []


def shrink(workload: Workload, limit: int = INTERPRETER_AXIS_MAX) -> Workload:
    """For the CPU interpreter: a workload of random inputs with every var axis cut to at most `limit`."""
    if any(spec.kind != "random" for spec in workload.inputs.values()):
        return workload  # index tensors from files fix the shapes
    return replace(workload, axes={axis: min(value, limit) for axis, value in workload.axes.items()})


def read_problem_files(definitions: Path | None, workloads: Path | None) -> tuple[dict[str, Definition], dict[str, list[Workload]], list[str]]:
    """Every definition (by name) and workload (by definition name, in file order) under two folders, and
    which files could not be read (with why)."""
    found: dict[str, Definition] = {}
    by_definition: dict[str, list[Workload]] = {}
    problems: list[str] = []
    for path in json_files(definitions):
        try:
            definition = load_definition(path)
            found.setdefault(definition.name, definition)
        except (FormatError, KeyError, TypeError) as exc:
            problems.append(f"{path}: not a definition ({exc})")
    for path in json_files(workloads):
        try:
            for workload in load_workloads(path):
                by_definition.setdefault(workload.definition, []).append(workload)
        except (FormatError, KeyError, TypeError) as exc:
            problems.append(f"{path}: not a workload ({exc})")
    return found, by_definition, problems


def elements(definition: Definition, workload: Workload) -> int:
    """Elements of a workload's tensors (inputs and outputs): how large it is to run."""
    axes = definition.axis_values(workload)
    total = 0
    for spec in [*definition.inputs.values(), *definition.outputs.values()]:
        count = 1
        for value in definition.shape(spec, axes):
            count *= value
        total += count
    return total


def roofline_spec(device_name: str, choice: str = "auto") -> tuple[GpuSpec | None, dict[str, Any]]:
    """The documented peaks the roofline divides by for the GPU torch names, and what the environment record
    says about them: `choice` ("h100", "h200") overrides; a PCIe/NVL variant gets its family's SXM part, said
    loudly; an unknown GPU gets none (no fraction of peak)."""
    # lazy: engine.platforms.triton.local imports torch
    from engine.platforms.triton.local import gpu_spec_for

    notes: dict[str, Any] = {}
    spec = get_gpu_spec(choice) if choice != "auto" else gpu_spec_for(device_name)
    if spec is None:
        family = next((n for n in ("h100", "h200") if n in device_name.lower()), None)
        if family is not None:
            spec = get_gpu_spec(family)
            notes["roofline_note"] = f"{device_name} is not an SXM part: {spec.model}'s peaks used"
        else:
            notes["roofline_note"] = f"no documented peaks for {device_name}: no fraction of peak"
    notes["roofline_spec"] = None if spec is None else {
        "name": spec.model, "hbm_bytes_per_s": spec.hbm_bytes_per_s, "peak_flops_per_s": spec.peak_flops_per_s,
        "source": spec.source}
    return spec, notes
