"""The evaluation child: `python -m engine.evaluator.child ROLE CONFIG_JSON`.

Roles, each its own process (the parent never lets them talk to each other):

* `reference` renders inputs for a seed and computes the expected outputs (it holds them; the kernel
  child never sees them), and applies the reference's `transform_nki_outputs`;
* `kernel` loads the untrusted kernel and runs it on inputs the parent sends;
* `profile` runs the backend's performance model on a trace (only our code runs there);
* a platform's own roles, named by where they live ("module:Class"), started by its pipeline: NKI's verifier
  (`engine.platforms.nki.roles:VerifyRole`, which replays the program the kernel child recorded), Triton's
  reference and kernel children (`engine.platforms.triton.roles`). This module imports no platform folder.

A backend is loaded by the "module:Class" the parent sends (`implementation` in the config), so a child runs
a backend the parent registered at run time without knowing the registry's state.

The protocol travels over file descriptors duplicated from stdin/stdout at start-up; fd 0 is then
/dev/null and fd 1 goes to stderr, so a kernel's `print` cannot corrupt a frame. Replies carry
`{"ok": true, ...}` or `{"ok": false, "kind": ..., "message": ..., "line": ...}`.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import traceback
import types
from typing import Any

KERNEL_FILENAME = "<kernel>"
REFERENCE_FILENAME = "<reference>"


def _apply_limits(limits: dict[str, int]) -> None:
    # Both soft and hard: untrusted code cannot raise them back (unless we run as root; see docs).
    cpu = limits["cpu_seconds"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU at the soft limit, SIGKILL one second on
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Per user: the child's own processes (bubblewrap's init and itself) already reach 1, so it cannot fork
    # or start a thread. Not enforced for root (the opt-out, ACCELOPT_SANDBOX_ALLOW_ROOT, as root); then
    # fork is refused by the audit guard and contained by the process group.
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))


# Evaluation children yield the CPU to the server. On a 2-core host, children at the server's priority kept
# /healthz and pages waiting for over a second (measurements/soak.py). bwrap's --new-session (or setsid under
# the opt-out) puts the child in its own scheduler autogroup, and between autogroups the group's niceness, not
# the process's, sets the share: both are raised, and neither can be lowered again without CAP_SYS_NICE.
CHILD_NICENESS = 10


def _yield_cpu_to_the_server() -> None:
    # The group first: a child seen at its niceness has its group's set too.
    try:
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(CHILD_NICENESS))
    except OSError:
        pass  # a kernel without autogroups (CONFIG_SCHED_AUTOGROUP off): the process's niceness is what counts
    os.nice(CHILD_NICENESS)


def _take_protocol_streams() -> tuple[Any, Any]:
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)  # noqa: SIM115
    sys.stdout = sys.stderr
    return proto_in, proto_out


def _remember_source(filename: str, source: str) -> None:
    """Let tracebacks show the author's source lines (the file exists only in memory)."""
    # late: a role loads only its own modules, in its order around the guards
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)


def _error_line(exc: BaseException, filename: str) -> int | None:
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    if line is None and isinstance(exc, SyntaxError) and exc.filename == filename:
        line = exc.lineno
    explicit = getattr(exc, "line", None)  # simulator errors may carry the kernel line themselves
    if isinstance(explicit, int) and explicit > 0:
        line = explicit
    return line


def _own_frames(exc: BaseException, filename: str) -> str:
    """The traceback lines inside the user's file, then the exception: what the author needs to see."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    text = "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(exc), exc))
    return text[-8000:]


def _failure(kind: str, exc: BaseException, filename: str, prefix: str = "") -> dict[str, Any]:
    message = f"{type(exc).__name__}: {exc}"
    return {"ok": False, "kind": kind, "message": prefix + message, "line": _error_line(exc, filename),
            "detail": _own_frames(exc, filename)}


def _backend(config: dict[str, Any]) -> Any:
    """The backend the parent named: its class by reference when sent, else by its registered name."""
    # late: a role loads only its own modules, in its order around the guards
    from engine.evaluator.backends import get_backend, load_backend

    reference = config.get("implementation")
    return load_backend(reference) if reference else get_backend(config["backend"])


class KernelRole:
    def __init__(self, config: dict[str, Any]) -> None:
        self.backend = _backend(config)
        self.platform = config["platform"]
        self.guards = config.get("guards", {})
        self.kernel: Any = None

    def classify(self, exc: BaseException) -> str:
        # late: a role loads only its own modules, in its order around the guards
        from engine.evaluator.sandbox.guards import GuardViolation

        kind = self.backend.classify(exc)
        if kind is not None:
            return kind.value
        if isinstance(exc, MemoryError):
            return "resource_limit"
        if isinstance(exc, GuardViolation) or (isinstance(exc, ImportError) and "not allowed" in str(exc)):
            return "rejected"
        return "runtime_error"

    def load(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: a role loads only its own modules, in its order around the guards
        from engine.evaluator.backends import BackendUnavailable
        from engine.evaluator.sandbox.guards import install_audit_guard, kernel_builtins

        try:
            self.backend.prepare()
        except BackendUnavailable as exc:
            return {"ok": False, "kind": "infrastructure_error", "retry": exc.retry, "message": str(exc)}, {}
        _remember_source(KERNEL_FILENAME, header["source"])
        try:
            code = compile(header["source"], KERNEL_FILENAME, "exec")
        except SyntaxError as exc:
            return {"ok": False, "kind": "rejected", "message": f"syntax error: {exc.msg}", "line": exc.lineno}, {}
        if self.guards.get("audit", True):
            # A measured backend's SDK works in this process too; it declares what it needs (GuardAllowances).
            install_audit_guard(_read_roots(), self.backend.guard_allowances())
        module = types.ModuleType("accelopt_kernel")
        module.__file__ = KERNEL_FILENAME
        if self.guards.get("imports", True):
            module.__dict__["__builtins__"] = kernel_builtins()
        sys.modules["accelopt_kernel"] = module
        try:
            exec(code, module.__dict__)
        except BaseException as exc:  # noqa: BLE001 - any failure at import time is the kernel's
            return _failure(self.classify(exc), exc, KERNEL_FILENAME, "while loading the kernel module: "), {}
        kernel = module.__dict__.get(header["kernel_name"])
        if kernel is None or not callable(kernel):
            return {"ok": False, "kind": "rejected",
                    "message": f"the kernel module defines no callable {header['kernel_name']!r}"}, {}
        self.kernel = kernel
        return {"ok": True}, {}

    def run(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: a role loads only its own modules, in its order around the guards
        import numpy as np

        from engine.evaluator.backends import BackendUnavailable
        from engine.evaluator.protocol import join_inputs

        inputs = join_inputs(header["input_count"], arrays, header.get("scalars", []))
        program: dict[str, Any] = {}
        try:
            if header.get("record"):  # the simulator, on the first seed: its program goes to the verifier
                run, program = self.backend.record(self.kernel, inputs, self.platform)
            else:
                run = self.backend.run(self.kernel, inputs, self.platform)
            outputs = [np.asarray(o) for o in run.outputs]
        except BackendUnavailable as exc:
            if not self.backend.measures:  # no SDK runs here: only the kernel's own code can have raised it
                return _failure("runtime_error", exc, KERNEL_FILENAME), {}
            # the backend's own trouble (a measured backend's SDK), not the kernel's
            return {"ok": False, "kind": "infrastructure_error", "retry": exc.retry, "message": str(exc)}, {}
        except BaseException as exc:  # noqa: BLE001 - reported, not swallowed
            return _failure(self.classify(exc), exc, KERNEL_FILENAME), {}
        if any(o.dtype.kind not in "biufc" for o in outputs):
            kinds = [o.dtype.name for o in outputs]
            return {"ok": False, "kind": "incorrect", "message": f"kernel returned non-numeric outputs {kinds}"}, {}
        reply: dict[str, Any] = {"ok": True, "output_count": len(outputs), "latency_ms": run.latency_ms}
        out_arrays = {f"out{i}": o for i, o in enumerate(outputs)}
        if not header.get("record"):  # a recorded program's inputs are checked in the verifier
            after = run.inputs_after if run.inputs_after is not None else inputs
            out_arrays.update({f"after{i}": np.asarray(a) for i, a in enumerate(after) if f"in{i}" in arrays})
        if run.trace is not None:
            meta, trace_arrays = self.backend.encode_trace(run.trace)
            reply["trace"] = meta
            out_arrays.update(trace_arrays)
        out_arrays.update(program)
        return reply, out_arrays

    # -- measured backends (neuron) -------------------------------------------------------------------

    def measure(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Time the loaded kernel on its last inputs; sent by the parent once every seed was correct."""
        # late: a role loads only its own modules, in its order around the guards
        from engine.evaluator.backends import BackendUnavailable, UnstableTiming

        try:
            latency_ms = self.backend.measure(self.kernel, self.platform)
        except (BackendUnavailable, UnstableTiming) as exc:  # the host's, not the kernel's; retrying rarely helps
            prefix = "timing on this host is unstable: " if isinstance(exc, UnstableTiming) else ""
            return {"ok": False, "kind": "infrastructure_error", "retry": getattr(exc, "retry", False),
                    "message": prefix + str(exc)}, {}
        except BaseException as exc:  # noqa: BLE001 - reported, not swallowed
            return _failure(self.classify(exc), exc, KERNEL_FILENAME), {}
        return {"ok": True, "latency_ms": latency_ms}, {}


class ReferenceRole:
    def __init__(self, config: dict[str, Any]) -> None:
        self.module: types.ModuleType | None = None
        self.expected: dict[int, Any] = {}
        self.expected_arrays: dict[int, list[Any]] = {}
        self.guards = config.get("guards", {})

    def load(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: a role loads only its own modules, in its order around the guards
        from engine.evaluator.sandbox.guards import install_audit_guard

        if self.guards.get("audit", True):
            install_audit_guard(_read_roots())
        module = types.ModuleType("accelopt_reference")
        module.__file__ = REFERENCE_FILENAME
        try:
            _remember_source(REFERENCE_FILENAME, header["source"])
            exec(compile(header["source"], REFERENCE_FILENAME, "exec"), module.__dict__)
        except BaseException as exc:  # noqa: BLE001
            return _failure("reference_error", exc, REFERENCE_FILENAME, "loading the reference failed: "), {}
        self.module = module
        declared = getattr(module, "EVAL_DISTRIBUTIONS", None)
        shapes = getattr(module, "OUTPUT_SHAPES", None)  # optional: forward()'s output shapes, checked at upload
        try:
            shapes = [[int(n) for n in shape] for shape in shapes] if shapes is not None else None
        except (TypeError, ValueError):
            return {"ok": False, "kind": "reference_error", "message": "OUTPUT_SHAPES must be a list of shapes "
                    f"(tuples of integers), one per output of forward(); got {shapes!r}"[:500]}, {}
        return {"ok": True, "distributions": list(declared) if declared is not None else None,
                "output_shapes": shapes}, {}

    def render(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: a role loads only its own modules, in its order around the guards
        import random

        import numpy as np

        from engine.evaluator.inputs import apply_distribution
        from engine.evaluator.protocol import split_inputs

        seed, index = header["seed"], header["index"]
        module = self.module
        try:
            np.random.seed(seed)
            random.seed(seed)
            plain = list(module.get_inputs())
            distribution = header["distribution"]
            raw = apply_distribution(plain, distribution, seed)
            expected = self._forward(raw)
            if distribution != "reference" and not _all_finite(expected):
                # The variant breaks this problem's math (an exp that overflows when scaled, say): the
                # seed is still checked, on the plain values, and the result records that.
                raw, distribution = plain, "reference"
                expected = self._forward(raw)
            to_nki = getattr(module, "transform_to_nki_inputs", None)
            nki_inputs = list(to_nki(raw)) if to_nki else raw
            nki_inputs = [np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in nki_inputs]
            expected_tuple = expected if isinstance(expected, (tuple, list)) else (expected,)
            expected_arrays = [np.asarray(e, order="C") for e in expected_tuple]
            reply_arrays, scalars = split_inputs(nki_inputs)
        except BaseException as exc:  # noqa: BLE001
            return _failure("reference_error", exc, REFERENCE_FILENAME, "the reference failed to render inputs: "), {}
        # This seed's expected outputs and the previous one's are kept: the parent asks for the next seed's
        # inputs while the current seed's outputs are being computed, so it finishes seed k after rendering
        # k + 1. They stay here and go to the parent slice by slice (`expected`), never whole.
        self.expected = {i: e for i, e in self.expected.items() if i == index - 1}
        self.expected_arrays = {i: e for i, e in self.expected_arrays.items() if i == index - 1}
        self.expected[index] = expected
        self.expected_arrays[index] = expected_arrays
        return {"ok": True, "input_count": len(nki_inputs), "scalars": scalars, "distribution": distribution,
                "expected": [[a.dtype.str, list(a.shape)] for a in expected_arrays]}, reply_arrays

    def expected_slice(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Elements [start, stop) of one expected output of the current seed, flattened in C order."""
        array = self.expected_arrays[header["index"]][header["output"]]
        return {"ok": True}, {"slice": array.reshape(-1)[header["start"]:header["stop"]]}

    def _forward(self, raw: list[Any]) -> Any:
        # late: a role loads only its own modules, in its order around the guards
        import numpy as np

        # Copies: a reference that writes its inputs must not change what the kernel is given.
        return self.module.forward(*[np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in raw])

    def transform(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # late: a role loads only its own modules, in its order around the guards
        import numpy as np

        outputs = [arrays[f"out{i}"] for i in range(header["output_count"])]
        ref = self.expected[header["index"]]
        k_res: Any = outputs[0] if len(outputs) == 1 else tuple(outputs)
        transform = getattr(self.module, "transform_nki_outputs", None)
        try:
            if transform is not None:
                transformed = list(transform(k_res, ref))
            else:
                refs = ref if isinstance(ref, (tuple, list)) else (ref,)
                transformed = [np.reshape(o, np.shape(r)) for o, r in zip(outputs, refs, strict=False)]
            transformed = [np.asarray(t) for t in transformed]
        except BaseException as exc:  # noqa: BLE001 - usually a shape the reshape cannot take
            return {"ok": False, "kind": "transform_error", "message": f"{type(exc).__name__}: {exc}"}, {}
        return {"ok": True, "output_count": len(transformed)}, {f"out{i}": t for i, t in enumerate(transformed)}


class ProfileRole:
    def __init__(self, config: dict[str, Any]) -> None:
        self.backend = _backend(config)

    def profile(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        trace = self.backend.decode_trace(header["trace"], arrays)
        report = self.backend.profile(trace, header["platform"])
        return {"ok": True, "latency_ms": report.latency_ms, "profile": report.profile,
                "timeline": report.timeline, "perf_model_version": report.perf_model_version,
                "breakdown": report.breakdown}, {}

    def measured_profile(self, header: dict[str, Any], arrays: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """A measured backend's profile, from the files the kernel child left in `artefacts` (neuron-profile)."""
        # late: a role loads only its own modules, in its order around the guards
        from engine.evaluator.backends import BackendUnavailable

        try:
            report = self.backend.measured_profile(header["artefacts"], header["platform"])
        except BackendUnavailable as exc:
            return {"ok": False, "kind": "infrastructure_error", "retry": exc.retry, "message": str(exc)}, {}
        return {"ok": True, "latency_ms": report.latency_ms, "profile": report.profile,
                "timeline": report.timeline, "perf_model_version": report.perf_model_version}, {}


def _all_finite(expected: Any) -> bool:
    # late: a role loads only its own modules, in its order around the guards
    import numpy as np

    items = expected if isinstance(expected, (tuple, list)) else (expected,)
    return all(np.isfinite(np.asarray(e)).all() for e in items if np.asarray(e).dtype.kind in "fc")


def _read_roots() -> list[str]:
    """Where an evaluation child may read files: the Python installation and our own package."""
    # late: a role loads only its own modules, in its order around the guards
    import engine

    package = os.path.dirname(os.path.abspath(engine.__file__))
    return [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, package]


ROLES = {"kernel": KernelRole, "reference": ReferenceRole, "profile": ProfileRole}


def role_class(name: str) -> Any:
    """A generic role by name, or a platform's own by where it lives ("module:Class", imported only when its
    child starts: NKI children never load torch)."""
    if name in ROLES:
        return ROLES[name]
    if ":" not in name:
        raise ValueError(f"unknown evaluation child role {name!r}; expected one of {sorted(ROLES)} or 'module:Class'")
    # late: a role loads only its own modules, in its order around the guards
    from engine.platforms.registry import load_reference

    return load_reference(name)


def main(argv: list[str]) -> int:
    # late: a role loads only its own modules, in its order around the guards
    from engine.evaluator.sandbox.user import lock_down_this_process

    _yield_cpu_to_the_server()
    lock_down_this_process()
    role_name, config = argv[0], json.loads(argv[1])
    proto_in, proto_out = _take_protocol_streams()
    _apply_limits(config["limits"])
    import numpy  # noqa: F401 - imported before any guard, so its lazy loads are ours

    from engine.evaluator.protocol import hello_frame, read_message, write_message

    role = role_class(role_name)(config)
    # Before any request is read, so before any code but ours runs here: the parent's evidence that the
    # sandbox started (protocol.HELLO_HEADER).
    proto_out.write(hello_frame())
    proto_out.flush()
    while True:
        try:
            header, arrays = read_message(proto_in)
        except EOFError:
            return 0
        op = header.get("op")
        if op == "exit":
            return 0
        try:
            reply, reply_arrays = getattr(role, op)(header, arrays)
        except MemoryError as exc:
            reply, reply_arrays = {"ok": False, "kind": "resource_limit", "message": f"MemoryError: {exc}"}, {}
        except Exception as exc:  # noqa: BLE001 - our own bug: say so, the parent treats it as infrastructure
            # late: a role loads only its own modules, in its order around the guards
            from engine.evaluator.requirements import missing_module, missing_packages_message

            missing = missing_module(exc)  # torch or triton not importable here: configuration, not retried
            reply = {"ok": False, "kind": "infrastructure_error", "retry": missing is None,
                     "message": missing_packages_message([missing]) if missing else
                     f"evaluation child failed in {op!r}: {type(exc).__name__}: {exc}",
                     "detail": traceback.format_exc()[-8000:]}
            reply_arrays = {}
        try:
            write_message(proto_out, reply, reply_arrays)
        except MemoryError as exc:
            write_message(proto_out, {"ok": False, "kind": "resource_limit",
                                      "message": f"MemoryError while sending results: {exc}"})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
