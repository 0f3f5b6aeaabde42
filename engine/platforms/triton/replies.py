"""What a Triton kernel child's reply may hold, field by field, checked before the parent reads an array.

The kernel's module reaches its own role in the child (torch.sys.modules: tests/triton/test_redteam_*), so every
byte of a kernel child's reply is the kernel's to write. The parent reads a reply only if it is the reply to what
was asked: the fields that request's answer has, of their types and sizes, the arrays it names and no others, and
a failure of a kind the kernel's own code can cause. What the child says about itself and the parent can check is
checked against the parent's own evidence (the target it asked to compile for, its clock around the request, the
timing's samples); a failure kind that would make the kernel's failure ours (a reference or infrastructure error,
retried and never a verdict) is refused on a backend that does not measure. A refused reply is the kernel's
`runtime_error` there (pipeline._ask; the sandbox's `ChildProcess.receive` applies these checks).

Pure Python: the parent imports it without torch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from engine.platforms.triton.flashinfer import DTYPE_BYTES, parse_definition, parse_workload
from engine.platforms.triton.timing import MAX_GPU_SPREAD, MAX_REPS, group_spread

Layout = list[tuple[str, Any, tuple[int, ...]]]
ReplyCheck = Callable[[dict[str, Any], Layout], "str | None"]

_FAILURE_FIELDS = frozenset({"ok", "kind", "message", "line", "detail", "retry"})
# Failure kinds the kernel role reports for the kernel's own code (roles.TritonKernelRole, local.classify_exception).
# (runner.KernelFailure's kinds among them: what the runner's checks find the kernel doing wrong.)
_KERNEL_KINDS = frozenset({"rejected", "compile_error", "runtime_error", "resource_limit", "timeout", "kernel_failure",
                           "out_of_bounds", "modified_input", "bad_outputs"})
# ... and on a backend that measures, the role's own infrastructure failures (no driver, a launcher that does not
# build, timing refused): retried, bounded, never a verdict (pipeline.evaluate_triton).
_MEASURED_KINDS = _KERNEL_KINDS | {"infrastructure_error"}
_MAX_TEXT = 64 * 1024
_ENVIRONMENT_FIELDS = frozenset({"gpu", "sm_count", "memory_bytes", "l2_bytes", "capability", "torch", "cuda", "triton",
                                 "nvidia_smi"})
_TIMING_FIELDS = frozenset({"median_ms", "spread", "reps", "stable", "wall_s", "flush_ms", "min_ms", "max_ms"})
# Float equality of a number the child derived from its samples and the parent's derivation (the same formula).
_CLOSE = 1e-9


def failure_problem(header: dict[str, Any], layout: Layout, measured: bool) -> str | None:
    """What is wrong with a failure reply (`ok` not true), or None."""
    unknown = set(header) - _FAILURE_FIELDS
    if header.get("ok") is not False or unknown or layout:
        return f"a failure reply with fields {sorted(map(str, header))[:8]} and {len(layout)} arrays"
    kind = header.get("kind")
    if kind not in (_MEASURED_KINDS if measured else _KERNEL_KINDS):
        return f"a failure of kind {str(kind)[:40]!r}, which the kernel's process cannot report"
    for name in ("message", "detail"):
        if not _text(header.get(name, "")):
            return f"a failure {name} that is not text of at most {_MAX_TEXT} characters"
    line = header.get("line")
    if line is not None and not _count(line):
        return "a failure line that is not a line number"
    if "retry" in header and not isinstance(header["retry"], bool):
        return "a retry flag that is not true or false"
    return None


def load_check(measured: bool) -> ReplyCheck:
    """`load`: {"ok": true} and nothing else."""
    def check(header: dict[str, Any], layout: Layout) -> str | None:
        if header.get("ok") is not True:
            return failure_problem(header, layout, measured)
        return None if header == {"ok": True} and not layout else _extra(header, {"ok"}, layout)
    return check


def declared_output_bytes(definition: dict[str, Any], workload: dict[str, Any]) -> list[int]:
    """The bytes of each output the definition declares, at the workload's axes (the kernel runner sends nothing
    else: runner._check_outputs holds every output to its declared shape and dtype)."""
    parsed = parse_definition(definition)
    axes = parsed.axis_values(parse_workload(workload))
    return [math.prod(parsed.shape(spec, axes)) * DTYPE_BYTES[spec.dtype] for spec in parsed.outputs.values()]


def run_check(measured: bool, declared: list[int]) -> ReplyCheck:
    """`run`: the dtype name of each output it sends and the outputs as out0, out1, ..., at most the outputs the
    definition declares (`declared`: their bytes), none larger than its declaration. Whether their values, dtypes
    and shapes are right, and whether one is missing, the reference child judges."""
    def check(header: dict[str, Any], layout: Layout) -> str | None:
        if header.get("ok") is not True:
            return failure_problem(header, layout, measured)
        if set(header) != {"ok", "dtypes"}:
            return _extra(header, {"ok", "dtypes"}, [])
        dtypes = header["dtypes"]
        if not (isinstance(dtypes, list) and len(dtypes) <= len(declared)
                and all(isinstance(d, str) and len(d) <= 64 for d in dtypes)):
            return f"dtypes that are not a list of at most {len(declared)} dtype names (the definition's outputs)"
        names = [name for name, _dtype, _shape in layout]
        allowed = {f"out{k}" for k in range(len(dtypes))}
        stray = [name for name in names if name not in allowed]
        if stray or len(set(names)) != len(names):
            return f"arrays it was not asked for: {sorted(set(stray))[:4] or 'one named twice'}"
        for name, dtype, shape in layout:
            size, limit = math.prod(shape) * dtype.itemsize, declared[int(name[len("out"):])]
            if size > limit:
                return f"array {name!r} of {size} bytes; the definition declares {limit}"
        return None
    return check


def compile_check(arch: int) -> ReplyCheck:
    """`compile` (cuda without a GPU): the target asked for, and what the child compiled, as bounded plain data."""
    fields = {"ok", "target", "kernels", "launches", "launcher", "compile_s", "launcher_s"}

    def check(header: dict[str, Any], layout: Layout) -> str | None:
        if header.get("ok") is not True:
            return failure_problem(header, layout, measured=True)
        if set(header) != fields or layout:
            return _extra(header, fields, layout)
        if header["target"] != f"sm_{arch}":
            return f"target {str(header['target'])[:40]!r}; sm_{arch} was asked for"
        if not _count(header["launches"]) or not _plain(header["kernels"]) or not _plain(header["launcher"]):
            return "kernels, launches or launcher that are not bounded plain data"
        if not all(_seconds(header[name]) for name in ("compile_s", "launcher_s")):
            return "compile times that are not seconds"
        return None
    return check


def measure_check() -> ReplyCheck:
    """`measure` (cuda): the timing and its samples; every number the timing states must follow from the samples
    as timing.time_cuda derives it (`timing_problem`), and the environment has only the fields gpu_environment
    gives, as plain values."""
    fields = {"ok", "timing", "samples_ms", "child_wall_s", "environment"}

    def check(header: dict[str, Any], layout: Layout) -> str | None:
        if header.get("ok") is not True:
            return failure_problem(header, layout, measured=True)
        if set(header) != fields or layout:
            return _extra(header, fields, layout)
        environment = header["environment"]
        if not (isinstance(environment, dict) and set(environment) <= _ENVIRONMENT_FIELDS and _plain(environment)):
            return "an environment with fields the child does not report"
        if not _seconds(header["child_wall_s"]):
            return "a child wall time that is not seconds"
        return timing_problem(header["timing"], header["samples_ms"])
    return check


def timing_problem(timing: Any, samples: Any) -> str | None:
    """Why `timing` is not what its samples give (or is malformed), or None. The parent prices the median of the
    samples it read, not a median the child states."""
    if not (isinstance(timing, dict) and set(timing) == _TIMING_FIELDS):
        return "a timing without exactly the fields time_cuda gives"
    if not (isinstance(samples, list) and 1 <= len(samples) <= MAX_REPS and all(_positive(s) for s in samples)):
        return f"samples that are not 1 to {MAX_REPS} positive times"
    if not all(_seconds(timing[name]) for name in ("wall_s", "flush_ms")) or not isinstance(timing["stable"], bool):
        return "a timing with a malformed wall time, flush time or stability"
    spread = group_spread(samples)
    derived = {"median_ms": statistics.median(samples), "spread": spread, "reps": len(samples),
               "min_ms": min(samples), "max_ms": max(samples)}
    for name, value in derived.items():
        stated = timing[name]
        if not _number(stated) or not math.isclose(stated, value, rel_tol=_CLOSE, abs_tol=0.0):
            return f"a timing whose {name} ({str(stated)[:40]}) is not its samples' ({value:.6g})"
    if timing["stable"] != (spread <= MAX_GPU_SPREAD):
        return "a timing whose stability is not its samples'"
    return None


def within_parent_clock(reply: dict[str, Any], parent_s: float) -> str | None:
    """A measure reply's host times against the parent's clock around the request: none can be longer."""
    for name, value in (("wall_s", reply["timing"]["wall_s"]), ("child_wall_s", reply["child_wall_s"])):
        if value > parent_s:
            return f"the kernel's process says its {name} was {value:.4g} s; the request took {parent_s:.4g} s"
    return None


def _extra(header: dict[str, Any], fields: set[str], layout: Layout) -> str:
    unknown = sorted(str(k) for k in set(header) - fields)[:8]
    missing = sorted(fields - set(header))[:8]
    return f"fields {unknown} it was not asked for, {missing} missing, {len(layout)} arrays"


def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= _MAX_TEXT


def _count(value: Any) -> bool:
    return type(value) is int and 0 <= value < 2**31


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _positive(value: Any) -> bool:
    return _number(value) and value > 0


def _seconds(value: Any) -> bool:
    return _number(value) and 0 <= value < 86400


def _plain(value: Any, depth: int = 0) -> bool:
    """JSON scalars, lists and string-keyed dicts, at most 4 deep, 256 items each, short strings."""
    if value is None or type(value) in (bool, int, float):
        return True
    if isinstance(value, str):
        return len(value) <= 4096
    if depth >= 4:
        return False
    if isinstance(value, list):
        return len(value) <= 256 and all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return len(value) <= 256 and all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False
