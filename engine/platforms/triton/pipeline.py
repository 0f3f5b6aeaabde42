"""`evaluate_triton()`: a FlashInfer-Bench solution against a definition and workload, in the evaluation
sandbox, with the shared failure taxonomy, seeds and provenance (docs/evaluation.md, "Triton").

Two sandboxed children, as for NKI: `triton_reference` (inputs from the seed, the reference's outputs, the
comparison) and `triton_kernel` (the solution on guarded buffers; on cuda, the timing). The parent only
routes: the kernel's outputs go to the reference child to be compared; expected values never reach the
kernel. Backends (`engine.platforms.registry.Backend`): `triton-interpreter` (CPU, correctness only, latency None)
and `cuda` (NVIDIA GPU: correctness at the workload, then timing, roofline and the wall-time cross-check).
"""

from __future__ import annotations

import contextlib
import glob
import os
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from engine.evaluator.inputs import MIN_SEEDS, draw_seeds
from engine.evaluator.requirements import (
    is_missing_package,
    missing_packages_message,
    missing_triton_packages,
)
from engine.evaluator.result import STATUS_FAILED, STATUS_OK, ErrorKind, EvaluationResult, project_version
from engine.evaluator.sandbox.isolation import SandboxExtras
from engine.evaluator.sandbox.process import ChildError, ChildProcess, Limits
from engine.platforms.registry import TRITON, Backend, get_definition
from engine.platforms.triton.backends import TRITON_BACKEND_VERSIONS
from engine.platforms.triton.flashinfer import parse_definition
from engine.platforms.triton.hardware import get_gpu_spec
from engine.platforms.triton.machine import ERROR_KINDS
from engine.platforms.triton.replies import (
    ReplyCheck,
    compile_check,
    declared_output_bytes,
    load_check,
    measure_check,
    run_check,
    within_parent_clock,
)
from engine.platforms.triton.timing import GpuTiming, implausible_events, nvidia_smi

CORRECTNESS_ONLY = "correctness only: no GPU"
# The two children's roles, by where they live (engine.evaluator.child loads a platform's roles by reference).
REFERENCE_ROLE = "engine.platforms.triton.roles:TritonReferenceRole"
KERNEL_ROLE = "engine.platforms.triton.roles:TritonKernelRole"
_NO_REFERENCE = "def run(*args):\n    raise RuntimeError('the reference runs in another process')\n"



class _Stop(Exception):
    def __init__(self, result: EvaluationResult) -> None:
        super().__init__(result.error_message)
        self.result = result


def _kind(name: str) -> ErrorKind:
    """A status of engine.platforms.triton or of a child -> the shared failure taxonomy (one map: ERROR_KINDS)."""
    return ErrorKind(ERROR_KINDS.get(name) or ErrorKind.RUNTIME_ERROR)


def evaluate_triton(
    solution: Mapping[str, Any], definition: Mapping[str, Any], workload: Mapping[str, Any], *,
    platform: str = "h200", backend: str = Backend.TRITON_INTERPRETER.value, seeds: Sequence[int] | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen dataclass
    _guards: Mapping[str, bool] | None = None,
) -> EvaluationResult:
    """Evaluate one FlashInfer-Bench solution (its JSON as a dict) on a workload of a definition (their JSON).
    Never raises for anything the solution or reference does; ValueError for a caller's mistake."""
    started = time.monotonic()
    if backend not in TRITON_BACKEND_VERSIONS:
        raise ValueError(f"backend {backend!r} does not evaluate Triton kernels; expected one of "
                         f"{sorted(TRITON_BACKEND_VERSIONS)}")
    if seeds is not None and len(seeds) < MIN_SEEDS:
        raise ValueError(f"at least {MIN_SEEDS} seeds are needed, got {len(seeds)}")
    seed_list = tuple(int(s) % 2**32 for s in seeds) if seeds is not None else draw_seeds(MIN_SEEDS)
    context, config = _context_and_config(solution, platform, backend, seed_list, _guards)
    missing = missing_triton_packages()
    if missing:  # a configuration problem of this host: said at once with the install command, never retried
        return replace(EvaluationResult.failure(ErrorKind.INFRASTRUCTURE_ERROR, missing_packages_message(missing),
                                                **context), wall_time_s=round(time.monotonic() - started, 4))
    header = {"definition": dict(definition), "workload": dict(workload)}
    attempts = 0
    while True:
        attempts += 1
        try:
            result = _attempt(solution, header, config, limits, seed_list, context)
        except _Stop as stop:
            result = stop.result
        except OSError as exc:  # could not start a child: ours, transient
            result = EvaluationResult.failure(ErrorKind.INFRASTRUCTURE_ERROR, f"could not run the evaluation "
                                              f"sandbox: {exc}", **context)
        except Exception as exc:  # noqa: BLE001 - a bug of ours is never the kernel's result
            result = EvaluationResult.failure(ErrorKind.INFRASTRUCTURE_ERROR, f"the Triton pipeline failed: "
                                              f"{type(exc).__name__}: {exc}",
                                              error_detail=traceback.format_exc()[-8000:], **context)
        if (result.error_kind is not ErrorKind.INFRASTRUCTURE_ERROR or attempts > limits.infrastructure_retries
                or is_missing_package(result.error_message)):  # another attempt would miss the same package
            return replace(result, wall_time_s=round(time.monotonic() - started, 4), attempts=attempts)


def _context_and_config(solution: Mapping[str, Any], platform: str, backend: str, seeds: tuple[int, ...],
                        guards: Mapping[str, bool] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """What every result of this evaluation carries, and the children's config (all guards on unless a test
    says otherwise). ValueError for a platform that does not run Triton kernels."""
    if get_definition(platform).language != TRITON:
        raise ValueError(f"platform {platform!r} does not run Triton kernels")
    context = {"backend": backend, "backend_version": TRITON_BACKEND_VERSIONS[backend], "platform": platform,
               "project_version": project_version(), "kernel_name": str(solution.get("name", "")), "seeds": seeds}
    config = {"backend": backend, "platform": platform, "guards": {"audit": True, "imports": True, **(guards or {})}}
    return context, config


def _fail(kind: ErrorKind, message: str, context: dict[str, Any], **flags: Any) -> _Stop:
    return _Stop(EvaluationResult(status=STATUS_FAILED, error_kind=kind, error_message=message, **flags, **context))


# A kernel child's reply but its outputs (load, compile, measure: small headers and timing samples), read at most.
KERNEL_REPLY_BYTES = 64 * 1024**2
# A `run` reply's header and its array listing, beyond the outputs' bytes.
KERNEL_HEADER_BYTES = 64 * 1024


def _ask(child: ChildProcess, request: dict[str, Any], context: dict[str, Any], who: str,
         arrays: dict[str, Any] | None = None, max_reply_bytes: int | None = None, check: ReplyCheck | None = None,
         on_gpu: bool | None = None, **flags: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One request; `check` (replies.py) refuses a kernel child's reply that is not the answer to it, before its
    arrays are read. `on_gpu`: the kernel's process runs on a GPU (default: the cuda backend), where a failed
    child may be the device's doing; elsewhere only the kernel's code and the interpreter run there."""
    on_gpu = context["backend"] == Backend.CUDA.value if on_gpu is None else on_gpu
    if who == "kernel" and max_reply_bytes is None:
        max_reply_bytes = KERNEL_REPLY_BYTES
    try:
        reply, data = child.request(request, arrays, max_reply_bytes=max_reply_bytes, check=check)
    except ChildError as exc:
        if who == "kernel" and exc.exit_status is not None and not on_gpu:
            # Only the kernel's code and the interpreter run there: the kernel ended its own process.
            raise _fail(ErrorKind.RUNTIME_ERROR, f"the kernel ended its evaluation process (exit status "
                        f"{exc.exit_status}) instead of returning its outputs", context,
                        error_detail=exc.diagnostics[-4000:], **flags) from None
        if who == "kernel" and exc.kind == "infrastructure_error" and exc.started and not exc.ours and not on_gpu:
            # The child said hello (the sandbox started) and we did not kill it: a malformed frame or a death by
            # signal is the kernel's doing (issue 35), as on the NKI pipeline's backends that do not measure.
            raise _fail(ErrorKind.RUNTIME_ERROR, f"{who}: {exc.message}", context,
                        error_detail=exc.diagnostics[-4000:], **flags) from None
        kind = ErrorKind.INFRASTRUCTURE_ERROR if who == "reference" else _kind(exc.kind)
        raise _fail(kind, f"{who}: {exc.message}", context, error_detail=exc.diagnostics[-4000:], **flags) from None
    if not reply["ok"]:
        if who == "reference":
            message = str(reply.get("message", ""))  # a package missing in the child is not the reference's fault
            raise _fail(ErrorKind.INFRASTRUCTURE_ERROR,
                        message if is_missing_package(message) else f"the reference is broken: {message}",
                        context, **flags)
        raise _fail(_kind(reply["kind"]), reply.get("message", ""), context, error_line=reply.get("line"),
                    error_detail=reply.get("detail", ""), **flags)
    return reply, data


def _attempt(solution: Mapping[str, Any], header: dict[str, Any], config: dict[str, Any], limits: Limits,
             seeds: tuple[int, ...], context: dict[str, Any]) -> EvaluationResult:
    backend = config["backend"]
    errors: list[tuple[float | None, ...]] = []
    counts: dict[str, float] = {}
    with contextlib.ExitStack() as stack:
        kernel_limits, extras = cuda_placement(limits) if backend == Backend.CUDA.value else (limits, None)
        reference = stack.enter_context(ChildProcess(REFERENCE_ROLE, config, kernel_limits, extras,
                                                     name="triton_reference"))
        kernel = stack.enter_context(ChildProcess(KERNEL_ROLE, config, kernel_limits, extras, name="triton_kernel"))
        _ask(reference, {"op": "load", **header}, context, "reference")
        # The kernel's child gets the definition without its reference: it has nothing to call but its own code.
        blind = dict(header, definition=dict(header["definition"], reference=_NO_REFERENCE))
        measured = backend == Backend.CUDA.value
        _ask(kernel, {"op": "load", "solution": dict(solution), **blind}, context, "kernel",
             check=load_check(measured))
        # The outputs the definition declares, at their declared sizes, and a header: never the 2 GiB a kernel's
        # process could otherwise make the parent read.
        declared = declared_output_bytes(header["definition"], header["workload"])
        budget = sum(declared) + KERNEL_HEADER_BYTES
        ran = {"compiled": True}
        for seed in seeds:
            expected, _ = _ask(reference, {"op": "expect", "seed": seed}, context, "reference", **ran)
            counts = {"flops": expected["flops"], "bytes": expected["bytes"]}
            produced, arrays = _ask(kernel, {"op": "run", "seed": seed}, context, "kernel",
                                    max_reply_bytes=budget, check=run_check(measured, declared), **ran)
            ran = {"compiled": True, "runnable": True}
            compared, _ = _ask(reference, {"op": "compare", "dtypes": produced["dtypes"]}, context, "reference",
                               arrays, **ran)
            comparisons = compared["comparisons"]
            errors.append(tuple(c["max_rel_error"] for c in comparisons))
            failed = [c["message"] for c in comparisons if not c["ok"]]
            if failed:
                raise _fail(ErrorKind.INCORRECT, f"seed {seed}: " + "; ".join(failed), context,
                            relative_l2_errors=tuple(errors), **ran)
        correct = {"compiled": True, "runnable": True, "correct": True, "relative_l2_errors": tuple(errors)}
        if backend != Backend.CUDA.value:
            return EvaluationResult(status=STATUS_OK, profile={"note": CORRECTNESS_ONLY}, **correct, **context)
        return _measure(kernel, context, correct, counts, header)


# What a CUDA process needs that the CPU sandbox refuses: address space (the driver reserves terabytes of
# virtual memory), threads (the driver's own), room for Triton's compile cache in the private /tmp, and the
# GPU's device nodes and driver files. Written for the cuda backend; measurements/gpu_sandbox_check.py runs it on a GPU.
CUDA_ADDRESS_SPACE = 1 << 46
CUDA_PROCESSES = 512
CUDA_SCRATCH_BYTES = 2 * 1024**3
# Host memory a cuda child may hold resident (its memory cgroup): torch, Triton's compiler and the driver's
# context. Not yet measured on a GPU (no device was lent); measurements/gpu_sandbox_check.py would show it.
CUDA_RESIDENT_BYTES = 8 * 1024**3
# Cores a cuda child may use at once (its cpu cgroup): Triton compiles on one thread and launches from one; four
# leave room for the driver's threads while a child with 512 threads cannot slow its neighbours' timing.
CUDA_CPUS = 4.0


def cuda_placement(limits: Limits, *, require_devices: bool = True) -> tuple[Limits, Any]:
    """The cuda children's limits and extras; `require_devices=False` (compile_triton) for a host without a GPU."""
    nodes = sorted(glob.glob("/dev/nvidia*"))
    if not nodes and require_devices:
        raise _fail(ErrorKind.INFRASTRUCTURE_ERROR, "the cuda backend needs an NVIDIA GPU; this host has no "
                    "/dev/nvidia* device", {"backend": Backend.CUDA.value})
    roomy = replace(limits, memory_bytes=max(limits.memory_bytes, CUDA_ADDRESS_SPACE),
                    resident_bytes=max(limits.resident_limit(), CUDA_RESIDENT_BYTES),
                    processes=max(limits.processes, CUDA_PROCESSES),
                    cpus=CUDA_CPUS if limits.cpus is None else max(limits.cpus, CUDA_CPUS),
                    scratch_bytes=max(limits.scratch_bytes, CUDA_SCRATCH_BYTES),
                    file_bytes=max(limits.file_bytes, 256 * 1024**2))
    libraries = driver_library_dirs()
    # The driver's files read-only at their own paths (under /usr they are visible already; binding again is
    # harmless), and the loader and Triton told where libcuda is: the child's environment is scrubbed, so a
    # host that finds the driver through LD_LIBRARY_PATH (/usr/local/nvidia/lib64) would otherwise lose it.
    read_only = [(d, d) for d in (*DRIVER_ROOTS, *libraries) if os.path.isdir(d)]
    environment = [("LD_LIBRARY_PATH", os.pathsep.join(libraries)), ("TRITON_LIBCUDA_PATH", libraries[0])] \
        if libraries else []
    if os.environ.get("CUDA_VISIBLE_DEVICES"):  # on a Ray GPU node: the GPU Ray gave this task, kept in the child
        environment.append(("CUDA_VISIBLE_DEVICES", os.environ["CUDA_VISIBLE_DEVICES"]))
    return roomy, SandboxExtras(devices=tuple((n, n) for n in nodes if not os.path.isdir(n)),
                                read_only=tuple(dict.fromkeys(read_only)), environment=tuple(environment))


# Where GPU hosts put the driver's user-space files outside the loader's cache (GKE-style images, our H200).
DRIVER_ROOTS = ("/usr/local/nvidia",)
_LIBCUDA_DIRS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib")


def driver_library_dirs() -> list[str]:
    """Directories holding libcuda.so.1 that the loader finds only by being told: TRITON_LIBCUDA_PATH, this
    process's LD_LIBRARY_PATH, then the usual driver folders. Empty when libcuda is in the loader's cache."""
    candidates = [os.environ.get("TRITON_LIBCUDA_PATH", ""), *os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep),
                  *_LIBCUDA_DIRS]
    found = [os.path.abspath(d) for d in candidates if d and os.path.isfile(os.path.join(d, "libcuda.so.1"))]
    return list(dict.fromkeys(found))


COMPILED_ONLY = "compiled only: no GPU"


def compile_triton(
    solution: Mapping[str, Any], definition: Mapping[str, Any], workload: Mapping[str, Any], *,
    platform: str = "h200", arch: int = 90, seed: int = 0,
    limits: Limits = Limits(),  # noqa: B008 - frozen dataclass
    _guards: Mapping[str, bool] | None = None,
) -> EvaluationResult:
    """The cuda backend's kernel child on a host without a GPU (engine.platforms.triton.compile_only): the
    solution loaded under the same sandbox, guard, allowances, limits and environment as a cuda evaluation,
    every kernel its entry point launches on the seed's inputs compiled for sm_<arch> (Triton's pipeline, its
    ptxas, its cache), and Triton's launcher helper built as far as the host allows. Nothing runs on a GPU,
    nothing is compared or timed. A failure has its kind in the shared taxonomy; ok means compiled, and the
    profile lists the kernels and what became of the launcher helper."""
    started = time.monotonic()
    context, config = _context_and_config(solution, platform, Backend.CUDA.value, (int(seed),), _guards)
    config["compile_only"] = {"arch": int(arch)}
    blind = {"definition": dict(definition, reference=_NO_REFERENCE), "workload": dict(workload)}
    try:
        kernel_limits, extras = cuda_placement(limits, require_devices=False)
        with ChildProcess(KERNEL_ROLE, config, kernel_limits, extras, name="triton_kernel") as kernel:
            # Compiling only (no device): whatever the kernel's process does wrong is the kernel's.
            _ask(kernel, {"op": "load", "solution": dict(solution), **blind}, context, "kernel",
                 check=load_check(measured=True), on_gpu=False)
            asked = time.monotonic()
            reply, _ = _ask(kernel, {"op": "compile", "seed": int(seed)}, context, "kernel",
                            check=compile_check(int(arch)), on_gpu=False)
            if reply["compile_s"] + reply["launcher_s"] > time.monotonic() - asked:
                raise _fail(ErrorKind.RUNTIME_ERROR, "the kernel's process says its compile took longer than the "
                            "request did", context, compiled=True)
        profile = {"note": COMPILED_ONLY, **{k: reply.get(k) for k in ("target", "kernels", "launches", "launcher",
                                                                     "compile_s", "launcher_s")}}
        result = EvaluationResult(status=STATUS_OK, compiled=True, profile=profile, **context)
    except _Stop as stop:
        result = stop.result
    except OSError as exc:  # could not start the child: ours
        result = EvaluationResult.failure(ErrorKind.INFRASTRUCTURE_ERROR, f"could not run the evaluation sandbox: "
                                          f"{exc}", **context)
    return replace(result, wall_time_s=round(time.monotonic() - started, 4), attempts=1)


def _measure(kernel: ChildProcess, context: dict[str, Any], correct: dict[str, Any], counts: dict[str, float],
             header: dict[str, Any]) -> EvaluationResult:
    """Time in the kernel child; the parent's own clock around the request bounds what the events may claim."""
    spec = get_gpu_spec(context["platform"])
    kernel.restart_clock()
    outside = time.monotonic()
    reply, _ = _ask(kernel, {"op": "measure", "l2_bytes": spec.l2_bytes}, context, "kernel",
                    check=measure_check(), **correct)
    outside_s = time.monotonic() - outside
    overlong = within_parent_clock(reply, outside_s)
    if overlong:  # a host time no process could have measured: its events are not believed either
        raise _fail(ErrorKind.SUSPICIOUS, f"{overlong}; held for review", context, **correct)
    t = reply["timing"]  # every number of it follows from the samples (replies.timing_problem)
    timing = GpuTiming(median_ms=t["median_ms"], spread=t["spread"], samples_ms=list(reply["samples_ms"]),
                       wall_s=t["wall_s"], flush_ms=t["flush_ms"], reps=t["reps"], stable=t["stable"])
    latency = timing.median_ms
    dtype = next(iter(parse_definition(header["definition"]).inputs.values())).dtype
    floor_ms = max(counts["flops"] / spec.peak_flops(dtype) if counts["flops"] else 0.0,
                   counts["bytes"] / spec.hbm_bytes_per_s) * 1e3
    # "spread" also at the top: only top-level numbers reach the search and the agents' profile table.
    # Clocks and power from here: the kernel's process may not start nvidia-smi (its guard), nor be believed.
    environment = {**reply.get("environment", {}),
                   "nvidia_smi": nvidia_smi(os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0] or "0")}
    profile = {"timing": t, "environment": environment, "flops": counts["flops"],
               "bytes": counts["bytes"], "spread": t["spread"], "roofline_source": spec.source,
               "parent_wall_s": outside_s}
    result = EvaluationResult(status=STATUS_OK, latency_ms=latency, theoretical_peak_ms=floor_ms,
                              peak_fraction=floor_ms / latency if latency > 0 else None, profile=profile,
                              **correct, **context)
    # The child's own clock, then ours: the request, seen from outside the kernel's process, holds the loop.
    why = implausible_events(timing) or implausible_events(timing, outside_wall_s=outside_s)
    if why:
        return replace(result, status=STATUS_FAILED, error_kind=ErrorKind.SUSPICIOUS, error_message=f"{why}; held for review")
    if not timing.stable:
        return replace(result, status=STATUS_FAILED, error_kind=ErrorKind.INFRASTRUCTURE_ERROR,
                       error_message=f"timing on this GPU is unstable: repetitions spread {timing.spread:.1%}")
    if result.peak_fraction is not None and result.peak_fraction > 1.0:
        return replace(result, status=STATUS_FAILED, error_kind=ErrorKind.SUSPICIOUS,
                       error_message=f"latency {latency:.4g} ms is below the roofline floor {floor_ms:.4g} ms; held "
                                     "for review")
    return result
