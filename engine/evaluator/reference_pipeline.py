"""The reference-file pipeline, shared by every language whose problems are reference files (NKIBench's format):
`evaluate()` runs the static check, then sandboxed reference and kernel children, checks the kernel's outputs in
the parent against the reference's, and prices the result.

The reference and the kernel run in different child processes; expected outputs never enter the kernel's. The
parent compares the outputs with the reference's slice by slice. A backend that records the kernel's program
(NKI's simulator) needs its language's verification: the language registers an `Attempt` subclass as its
"attempt" part (NKI's: `engine.platforms.nki.pipeline.NkiAttempt`, whose verifier child replays the program on
every seed and then prices the trace it checked), and that subclass supplies the verified outputs and the
recorded trace's checks. A measured backend's files go to a profile child. Either way a performance model
never runs next to untrusted code. See
docs/evaluation.md. Long because an evaluation is one sequence of stages and failure rules that reads best in
one place.
"""

from __future__ import annotations

import ast
import contextlib
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from engine.evaluator import checks
from engine.evaluator.backends import (
    BackendImplementation,
    BackendUnavailable,
    Placement,
    backend_reference,
    get_backend,
)
from engine.evaluator.inputs import DISTRIBUTIONS, MIN_SEEDS, draw_seeds, plan_distributions
from engine.evaluator.kernel_replies import run_reply_budget, run_reply_check
from engine.evaluator.result import STATUS_FAILED, STATUS_OK, ErrorKind, EvaluationResult, project_version
from engine.evaluator.sandbox.process import ChildError, ChildProcess, Limits
from engine.evaluator.static_check import (
    CheckedKernel,
    StaticCheckError,
    check_kernel_source,
    check_reference_source,
    find_kernel_name,
)
from engine.platforms.registry import find_part, get_definition


class Stop(Exception):
    """Ends an attempt with a result (raised from deep inside the per-seed loop)."""

    def __init__(self, result: EvaluationResult, retry: bool = False) -> None:
        super().__init__(result.error_message)
        self.result = result
        self.retry = retry


@dataclass
class Rendered:
    """One seed's inputs as the reference child rendered them (its expected outputs stay there)."""

    index: int
    where: str
    reply: dict[str, Any]
    inputs: dict[str, np.ndarray]
    expected: list[np.ndarray]


@dataclass
class Attempt:
    """One try at evaluating a kernel: the children, seed by seed, then the profile. A language whose backend
    records the kernel's program subclasses it (`verify_role`, `verified_outputs`, `check_recorded_trace`)."""

    # The verifier child's role ("module:Class"), for a backend that records the kernel's program: None here, so
    # such a backend is refused rather than its kernel's own outputs trusted.
    verify_role: ClassVar[str | None] = None

    backend: BackendImplementation
    kernel_source: str
    reference_source: str
    kernel_name: str
    platform: str
    seeds: tuple[int, ...]
    distributions: Sequence[str] | None
    tolerance: float
    limits: Limits
    peak_counts: Mapping[str, float] | Sequence[float] | None
    guards: dict[str, bool]
    context: dict[str, Any]
    # The platform's theoretical peak from the problem's counts (the language's "peak" part; None: none).
    peak_of: Callable[..., float] | None = None
    errors: list[tuple[float | None, ...]] = field(default_factory=list)
    plan: tuple[str, ...] = ()
    zero_expected: list[tuple[bool, ...]] = field(default_factory=list)
    # The pricing request went out with the last seed's replay (to the verifier); its reply is read last.
    profile_sent: bool = False

    # -- results ----------------------------------------------------------------------------------

    def fail(self, kind: ErrorKind, message: str, *, line: int | None = None, detail: str = "",
             retry: bool = False, **flags: Any) -> Stop:
        result = EvaluationResult(
            status=STATUS_FAILED, error_kind=kind, error_message=message, error_line=line, error_detail=detail,
            relative_l2_errors=tuple(self.errors), output_errors=_worst(self.errors), seeds=self.seeds,
            distributions=self.plan, tolerance=self.tolerance, **flags, **self.context,
        )
        return Stop(result, retry)

    def reference_broken(self, message: str, line: int | None = None, detail: str = "") -> Stop:
        # Not the kernel's fault, and retrying a deterministic reference will not help.
        return self.fail(ErrorKind.INFRASTRUCTURE_ERROR, f"the reference is broken: {message}", line=line,
                         detail=detail)

    def child_failed(self, exc: ChildError, who: str, **flags: Any) -> Stop:
        if who == "reference" and exc.kind != "infrastructure_error":
            return self.reference_broken(exc.message, detail=exc.diagnostics)
        if who == "profile" and exc.kind != "infrastructure_error":
            return self.fail(ErrorKind.INFRASTRUCTURE_ERROR, f"the performance model failed: {exc.message}",
                             detail=exc.diagnostics, **flags)
        if who == "kernel" and exc.exit_status is not None and not self.backend.measures:
            # No SDK runs in a simulated kernel's process: only the kernel's own code can have ended it.
            return self.fail(ErrorKind.RUNTIME_ERROR, f"the kernel ended its evaluation process (exit status "
                             f"{exc.exit_status}) instead of returning its outputs", detail=exc.diagnostics[-4000:],
                             **flags)
        if (who == "kernel" and exc.kind == "infrastructure_error" and exc.started and not exc.ours
                and not self.backend.measures):
            # The sandbox started (the child's hello arrived) and we did not kill it; after that only the kernel's
            # code ran in that process, so a death by signal or a malformed, unknown or unexpected frame is the
            # kernel's doing. Not retried: another attempt would only run the same code again.
            return self.fail(ErrorKind.RUNTIME_ERROR, exc.message, detail=exc.diagnostics[-4000:], **flags)
        kind = ErrorKind(exc.kind)
        return self.fail(kind, exc.message, detail=exc.diagnostics[-4000:],
                         retry=kind is ErrorKind.INFRASTRUCTURE_ERROR, **flags)

    def kernel_reply_failed(self, reply: dict[str, Any], **flags: Any) -> Stop:
        # The kernel's process may have written this reply itself. An infrastructure failure it claims is
        # retried only on a measured backend, whose SDK's transient trouble does surface there; on the others
        # nothing transient can, so a kernel cannot buy itself more attempts by saying so.
        kind = ErrorKind(reply["kind"])
        retry = kind is ErrorKind.INFRASTRUCTURE_ERROR and bool(reply.get("retry", True)) and self.backend.measures
        return self.fail(kind, reply.get("message", ""), line=reply.get("line"), detail=reply.get("detail", ""),
                         retry=retry, **flags)

    # -- the steps ----------------------------------------------------------------------------------

    def run(self) -> EvaluationResult:
        if self.backend.records_trace and self.verify_role is None:
            raise self.fail(ErrorKind.INFRASTRUCTURE_ERROR, f"backend {self.backend.name!r} records the kernel's "
                            f"program, but the language of platform {self.platform!r} registers no verifier for it")
        config = {"backend": self.backend.name, "implementation": backend_reference(self.backend),
                  "platform": self.platform, "guards": self.guards}
        # All children start together, so their interpreter start-ups overlap. Three with a recording backend
        # (reference, kernel, verifier: the verifier also prices the trace it checked); a measured backend's
        # profile child (our code and the profiler only) waits for the kernel's files instead of a verifier.
        with contextlib.ExitStack() as children:
            # The backend's placement holds what the attempt runs on (the neuron backend: one NeuronCore) until
            # the children are gone, and says what the kernel and profile children share beyond the sandbox.
            placement = self.place(children)
            reference = children.enter_context(ChildProcess("reference", config, self.limits))
            kernel = children.enter_context(ChildProcess("kernel", config, placement.kernel_limits,
                                                         placement.kernel_extras))
            pricing = {"backend": self.backend.name, "implementation": config["implementation"]}
            profiler = (children.enter_context(ChildProcess("profile", pricing, placement.profile_limits,
                                                            placement.profile_extras))
                        if self.backend.measures else None)
            # A backend with a trace (the simulator) records its program on the first seed; the language's
            # verifier replays it on every seed, and only its outputs are judged; then it prices the trace it
            # checked.
            verifier = (children.enter_context(ChildProcess(self.verify_role, {"platform": self.platform, **pricing},
                                                           self.limits, name="verify"))
                        if self.backend.records_trace and self.verify_role else None)
            self.load_reference(reference)
            self.load_kernel(kernel)
            # One seed at a time, everything of a seed dropped before the next: the parent's memory is a
            # seed's inputs and outputs plus a slice (and the next seed's inputs, rendered while this seed's
            # outputs are computed), not every seed's arrays at once.
            traces = []
            ahead: Rendered | Stop | None = None
            for index in range(len(self.seeds)):
                rendered = ahead if ahead is not None else self.render(reference, index)
                if isinstance(rendered, Stop):
                    raise rendered  # the next seed's failure, kept until this seed was judged
                trace, ahead = self.check_seed(reference, kernel, rendered, verifier)
                del rendered
                if trace is not None and traces:
                    trace = self.later_trace(trace)  # only the first seed's trace is profiled
                traces.append(trace)
                del trace
                if verifier is not None:
                    kernel.close()  # recorded: every later seed is a replay
            if self.backend.measures:  # timed only once every seed is correct
                traces = [self.measure(kernel, placement.artefacts)]
            kernel.close()
            return self.profile(traces, profiler if profiler is not None else verifier)

    def place(self, children: contextlib.ExitStack) -> Placement:
        try:
            return children.enter_context(self.backend.placement(self.limits, self.platform))
        except BackendUnavailable as exc:
            raise self.fail(ErrorKind.INFRASTRUCTURE_ERROR, str(exc), retry=exc.retry) from None

    def measure(self, kernel: ChildProcess, artefacts: str) -> dict[str, Any]:
        """A measured backend's latency, timed in the kernel child on the last seed's inputs."""
        correct = {"compiled": True, "runnable": True, "correct": True}
        try:
            measured, _ = kernel.request({"op": "measure"})
        except ChildError as exc:
            raise self.child_failed(exc, "kernel", **correct) from None
        if not measured["ok"]:
            raise self.kernel_reply_failed(measured, **correct)
        return {"measured_ms": float(measured["latency_ms"]), "artefacts": artefacts}

    def load_reference(self, reference: ChildProcess) -> None:
        try:
            reply, _ = reference.request({"op": "load", "source": self.reference_source})
        except ChildError as exc:
            raise self.child_failed(exc, "reference") from None
        if not reply["ok"]:
            if reply["kind"] == "infrastructure_error":
                raise self.fail(ErrorKind.INFRASTRUCTURE_ERROR, reply["message"], retry=True)
            raise self.reference_broken(reply["message"], reply.get("line"), reply.get("detail", ""))
        allowed = self.distributions if self.distributions is not None else reply.get("distributions")
        try:
            self.plan = plan_distributions(len(self.seeds), allowed if allowed is not None else DISTRIBUTIONS)
        except ValueError as exc:
            raise self.reference_broken(str(exc)) from None

    def load_kernel(self, kernel: ChildProcess) -> None:
        try:
            reply, _ = kernel.request({"op": "load", "source": self.kernel_source, "kernel_name": self.kernel_name})
        except ChildError as exc:
            raise self.child_failed(exc, "kernel") from None
        if not reply["ok"]:
            raise self.kernel_reply_failed(reply, compiled=False)

    def render(self, reference: ChildProcess, index: int) -> Rendered:
        """Seed `index`'s inputs from the reference child, which keeps the expected outputs."""
        seed, distribution = self.seeds[index], self.plan[index]
        try:
            rendered, arrays = reference.request({"op": "render", "seed": seed, "distribution": distribution,
                                                  "index": index})
        except ChildError as exc:
            raise self.child_failed(exc, "reference") from None
        if not rendered["ok"]:
            raise self.reference_broken(rendered["message"], rendered.get("line"), rendered.get("detail", ""))
        # The variant may have been replaced by the plain values (it broke the reference's math).
        distribution = rendered.get("distribution", distribution)
        self.plan = self.plan[:index] + (distribution,) + self.plan[index + 1:]
        inputs = {name: a for name, a in arrays.items() if name.startswith("in")}
        del arrays
        # The expected outputs stay in the reference child; the parent knows their dtypes and shapes and
        # reads their values slice by slice when comparing.
        expected = [_shape_only(dtype, shape) for dtype, shape in rendered["expected"]]
        return Rendered(index=index, where=f"seed {seed} ({distribution} inputs)", reply=rendered, inputs=inputs,
                         expected=expected)

    def render_ahead(self, reference: ChildProcess, index: int) -> Rendered | Stop | None:
        """The next seed's inputs, asked for while a child computes the current seed's outputs (so the
        reference's work overlaps the kernel's or the verifier's). A failure is returned, to be raised only
        once the current seed was judged, as it would have been without the overlap."""
        if index >= len(self.seeds):
            return None
        try:
            return self.render(reference, index)
        except Stop as stop:
            return stop

    def check_seed(self, reference: ChildProcess, kernel: ChildProcess, rendered: Rendered,
                   verifier: ChildProcess | None = None) -> tuple[dict[str, Any] | None, Rendered | Stop | None]:
        """One seed's outputs, checked against the reference. Returns the seed's trace and, where it was
        rendered meanwhile, the next seed (or the failure that rendering it met)."""
        ahead = None
        if verifier is not None:
            request = {"input_count": rendered.reply["input_count"], "scalars": rendered.reply.get("scalars", [])}
            outputs, trace, ahead = self.verified_outputs(kernel, verifier, reference, rendered, request)
        else:
            outputs, trace = self.kernel_outputs(kernel, rendered.reply, rendered.inputs, rendered.expected,
                                                 rendered.where)
        rendered.inputs = {}  # dropped before the outputs are compared
        self.check_outputs(reference, rendered.index, outputs, rendered.expected, rendered.where,
                           {"compiled": True, "runnable": True})
        return trace, ahead

    def kernel_outputs(self, kernel: ChildProcess, rendered: dict[str, Any], inputs: dict[str, np.ndarray],
                       expected: list[np.ndarray], where: str) -> tuple[list[np.ndarray], dict[str, Any] | None]:
        """What the kernel child computes for one seed (backends without a program: null, neuron)."""
        try:
            ran, produced = kernel.request(
                {"op": "run", "input_count": rendered["input_count"], "scalars": rendered.get("scalars", [])},
                inputs, max_reply_bytes=run_reply_budget(list(inputs.values()), expected),
                check=run_reply_check(list(inputs.values()), expected))
        except ChildError as exc:
            raise self.child_failed(exc, "kernel", compiled=True) from None
        if not ran["ok"]:
            compiled = ran["kind"] != ErrorKind.COMPILE_ERROR.value
            raise self.kernel_reply_failed(ran, compiled=compiled, runnable=False)
        ran_flags = {"compiled": True, "runnable": True}
        outputs = [produced.pop(f"out{i}") for i in range(ran["output_count"])]
        after = [produced.pop("after" + name[2:], None) for name in inputs]

        try:
            if any(a is None for a in after):
                raise checks.CheckFailed("kernel child did not return every input after the run")
            checks.check_inputs_unchanged(list(inputs.values()), after)
        except checks.CheckFailed as exc:
            raise self.fail(ErrorKind.INCORRECT, f"{exc} ({where})", **ran_flags) from None
        del after

        del produced  # a backend with a trace has a program: verified_outputs
        return outputs, {"latency_ms": float(ran["latency_ms"])} if ran.get("latency_ms") is not None else None

    def later_trace(self, trace: dict[str, Any]) -> dict[str, Any]:
        """What is kept of a later seed's trace (the first seed's is profiled): here, all of it."""
        return trace

    def verified_outputs(self, kernel: ChildProcess, verifier: ChildProcess, reference: ChildProcess,
                         rendered: Rendered, request: dict[str, Any],
                         ) -> tuple[list[np.ndarray], dict[str, Any] | None, Rendered | Stop | None]:
        """One seed's outputs as the language's verifier computes them from the recorded program (with the first
        seed's trace, and the next seed if it was rendered meanwhile): the subclass with a `verify_role`'s."""
        raise NotImplementedError(f"{type(self).__name__} has no verifier")

    def check_recorded_trace(self, traces: list[dict[str, Any] | None]) -> None:
        """The language's checks of a correct kernel's recorded traces before they are priced (every seed's,
        the first whole): none here."""

    def send_profile(self, verifier: ChildProcess) -> None:
        """Ask the verifier to price the trace it checked, queued behind the last seed's replay, so the model
        runs while the parent compares that seed; `profile` reads the reply once every seed is correct (and
        never, if one is not: the child is killed). No trace goes with it: the verifier prices its own."""
        try:
            verifier.send({"op": "profile"})
        except ChildError:
            return  # `profile` asks again, and reports what it meets
        self.profile_sent = True

    def check_outputs(self, reference: ChildProcess, index: int, outputs: list[np.ndarray],
                      expected: list[np.ndarray], where: str, ran_flags: dict[str, Any]) -> None:
        """Count and shapes, then the reference's transform and the comparison. Empties `outputs` once sent."""
        if len(outputs) != len(expected):
            # Checked before transform_nki_outputs: NKIBench's zips and would drop extra outputs silently.
            raise self.fail(ErrorKind.INCORRECT, f"kernel returned {len(outputs)} output(s) with shapes "
                            f"{[list(o.shape) for o in outputs]}; the reference expects {len(expected)} with "
                            f"shapes {[list(e.shape) for e in expected]} ({where})", **ran_flags)
        shapes = [list(o.shape) for o in outputs]
        try:
            # Sent, then dropped before the reply arrives: the kernel's outputs and their transformed
            # copies are never in the parent together.
            reference.send({"op": "transform", "index": index, "output_count": len(outputs)},
                           {f"out{i}": o for i, o in enumerate(outputs)})
            outputs.clear()  # the caller's list too
            transformed, shaped = reference.receive()
        except ChildError as exc:
            raise self.child_failed(exc, "reference") from None
        if not transformed["ok"]:
            if transformed["kind"] == "transform_error":
                wanted = [list(e.shape) for e in expected]
                raise self.fail(ErrorKind.INCORRECT, f"kernel returned outputs of shapes {shapes}; the reference "
                                f"expects {wanted} (transform_nki_outputs: {transformed['message']})", **ran_flags)
            raise self.reference_broken(transformed["message"])
        final = [shaped.pop(f"out{i}") for i in range(transformed["output_count"])]
        del shaped
        self.compare(final, expected, reference, index, where, ran_flags)

    def compare(self, outputs: list[np.ndarray], expected: list[np.ndarray], reference: ChildProcess, index: int,
                where: str, flags: dict[str, Any]) -> None:
        """`expected` carries dtypes and shapes only; the values come from the reference child in slices."""
        try:
            checks.check_output_layout(outputs, expected)
            checks.check_output_precision(outputs, expected)
        except checks.CheckFailed as exc:
            raise self.fail(ErrorKind.INCORRECT, f"{exc} ({where})", **flags) from None
        comparisons = []
        for number, out in enumerate(outputs):
            comparison = checks.OutputComparison(out.shape)
            flat = out.reshape(-1)
            for start in range(0, max(flat.size, 1), COMPARE_SLICE_ELEMENTS):
                stop = min(start + COMPARE_SLICE_ELEMENTS, flat.size)
                try:
                    sliced, part = reference.request({"op": "expected_slice", "index": index, "output": number,
                                                      "start": start, "stop": stop},
                                                     max_reply_bytes=_slice_budget(expected[number], stop - start))
                except ChildError as exc:
                    raise self.child_failed(exc, "reference") from None
                if not sliced["ok"] or part.get("slice") is None or part["slice"].size != stop - start:
                    raise self.reference_broken(f"could not read its expected output {number} "
                                                f"[{start}:{stop}]: {sliced.get('message', 'wrong size')}")
                comparison.add(flat[start:stop], part["slice"])
                del part
            comparisons.append(comparison)
        errors = tuple(c.relative_l2() for c in comparisons)
        self.errors.append(errors)
        for number, comparison in enumerate(comparisons):
            problem = comparison.non_finite_problem()
            if problem:
                raise self.fail(ErrorKind.INCORRECT, f"output {number}: {problem} ({where})", **flags)
        for number, error in enumerate(errors):
            if not error <= self.tolerance:
                raise self.fail(ErrorKind.INCORRECT, f"output {number} differs from the reference: relative L2 "
                                f"error {error:.3e} exceeds the tolerance {self.tolerance:.0e} ({where})", **flags)
        # An output the reference leaves at zero for every seed cannot tell a real kernel from one that
        # writes nothing; that is a reference to fix, not a pass.
        self.zero_expected.append(tuple(c.reference_all_zero for c in comparisons))
        if len(self.zero_expected) == len(self.seeds):
            for number, zeros in enumerate(zip(*self.zero_expected, strict=True)):
                if all(zeros):
                    raise self.reference_broken(f"its output {number} is all zeros for every seed, so correctness "
                                                "cannot be told apart from a kernel that writes nothing")

    def profile(self, traces: list[dict[str, Any] | None], profiler: ChildProcess | None) -> EvaluationResult:
        """The result, with the latency and profile from `profiler`: the verifier (a recording backend: it
        prices the trace it checked) or a measured backend's profile child."""
        correct = {"compiled": True, "runnable": True, "correct": True}
        latency_ms, profile, timeline, breakdown = None, {}, None, None
        perf_version = self.context.get("perf_model_version", "")
        first = traces[0] if traces else None
        if first is not None and "meta" in first:
            self.check_recorded_trace(traces)
            if profiler is None:
                raise self.fail(ErrorKind.INFRASTRUCTURE_ERROR, f"backend {self.backend.name!r} recorded a trace "
                                "but has no profiler", **correct)
            try:
                profiler.restart_clock()  # the pricing gets its own wall time, after the replays
                if self.profile_sent:
                    report, _ = profiler.receive()
                else:
                    report, _ = profiler.request({"op": "profile"})
            except ChildError as exc:
                raise self.child_failed(exc, "profile", **correct) from None
            if not report["ok"]:
                raise self.fail(ErrorKind.INFRASTRUCTURE_ERROR, f"the performance model failed: {report['message']}",
                                detail=report.get("detail", ""), retry=True, **correct)
            latency_ms, profile, timeline = report["latency_ms"], report["profile"], report["timeline"]
            breakdown = report.get("breakdown")  # the model explains its number; a measured profile does not
            perf_version = report.get("perf_model_version") or perf_version
        elif first is not None and "measured_ms" in first:
            # Measured on the device; the profile is read from the files the kernel child left, in the profile
            # child (only our code and the profiler run there), and marked measured by the backend.
            latency_ms = first["measured_ms"]
            if profiler is None:
                raise self.fail(ErrorKind.INFRASTRUCTURE_ERROR, f"backend {self.backend.name!r} measures but has "
                                "no profiler", **correct)
            profiler.restart_clock()
            try:
                report, _ = profiler.request({"op": "measured_profile", "platform": self.platform,
                                              "artefacts": first["artefacts"]})
            except ChildError as exc:
                raise self.child_failed(exc, "profile", **correct) from None
            if not report["ok"]:
                raise self.fail(ErrorKind.INFRASTRUCTURE_ERROR, f"the profiler failed: {report['message']}",
                                detail=report.get("detail", ""), retry=report.get("retry", True), **correct)
            profile = report["profile"]
        elif first is not None:
            latency_ms = first["latency_ms"]

        peak_ms = peak_fraction = None
        if self.peak_counts and latency_ms and self.peak_of is not None:
            peak_ms = self.peak_of(self.platform, **peak_kwargs(self.peak_counts))
            peak_fraction = peak_ms / latency_ms
        context = dict(self.context, perf_model_version=perf_version)
        result = EvaluationResult(
            status=STATUS_OK, **correct, relative_l2_errors=tuple(self.errors), output_errors=_worst(self.errors),
            tolerance=self.tolerance, seeds=self.seeds, distributions=self.plan, latency_ms=latency_ms,
            theoretical_peak_ms=peak_ms, peak_fraction=peak_fraction, profile=profile, timeline=timeline,
            breakdown=breakdown, **context,
        )
        if latency_ms is not None and latency_ms <= 0:
            return replace(result, status=STATUS_FAILED, error_kind=ErrorKind.SUSPICIOUS,
                           error_message=f"non-positive latency {latency_ms} ms; held for review")
        if peak_fraction is not None and peak_fraction > 1.0:
            return replace(result, status=STATUS_FAILED, error_kind=ErrorKind.SUSPICIOUS,
                           error_message=f"latency {latency_ms:.4g} ms is below the platform's theoretical peak "
                                         f"{peak_ms:.4g} ms (peak fraction {peak_fraction:.2f} > 1); held for review")
        return result


# The problem's counts a platform's theoretical peak is priced from (NKIBench's; `Problem.peak_counts`).
PEAK_COUNT_NAMES = ("vector_flops", "matmul_flops", "hbm_bytes")


def peak_kwargs(counts: Mapping[str, float] | Sequence[float]) -> dict[str, float]:
    """Peak counts as a mapping, or as the (vector_flops, matmul_flops, hbm_bytes) triple Problem stores."""
    if isinstance(counts, Mapping):
        return {name: float(counts[name]) for name in PEAK_COUNT_NAMES}
    if len(counts) != len(PEAK_COUNT_NAMES):
        raise ValueError(f"peak_counts must be {PEAK_COUNT_NAMES}, got {counts!r}")
    return {name: float(v) for name, v in zip(PEAK_COUNT_NAMES, counts, strict=True)}




# Expected outputs cross from the reference child in slices of this many elements (16 MiB of fp32; the
# comparison's float64 temporaries add about 7x that to the parent while a slice is checked).
COMPARE_SLICE_ELEMENTS = 1 << 22


def _shape_only(dtype: str, shape: list[int]) -> np.ndarray:
    """An array with the expected output's dtype and shape and no memory behind it (a broadcast scalar):
    enough for the layout and precision checks and the messages, which never read its values."""
    return np.broadcast_to(np.zeros((), dtype=np.dtype(dtype)), tuple(int(n) for n in shape))


def _slice_budget(expected: np.ndarray, elements: int) -> int:
    return elements * expected.dtype.itemsize + 1024**2


def _worst(errors: list[tuple[float | None, ...]]) -> tuple[float | None, ...]:
    if not errors:
        return ()
    return tuple(max(column) for column in zip(*errors, strict=False))


# Every guard on; tests of the lower layers switch single ones off to prove the others hold on their own.
ALL_GUARDS = {"static": True, "imports": True, "audit": True}


def evaluate(
    kernel_source: str,
    reference_source: str,
    *,
    platform: str = "trn1",
    backend: str = "simulator",
    peak_counts: Mapping[str, float] | Sequence[float] | None = None,
    seeds: Sequence[int] | None = None,
    kernel_name: str | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen dataclass, safe as a default
    tolerance: float | None = None,
    distributions: Sequence[str] | None = None,
    _guards: Mapping[str, bool] | None = None,
) -> EvaluationResult:
    """Evaluate one kernel against one reference. Never raises for anything the kernel or reference does.

    `peak_counts`: the counts of the language's "peak" part (NKI's `theoretical_peak_ms`), a mapping or the (vector_flops, matmul_flops, hbm_bytes)
    triple; validated here so a bad value is the caller's ValueError, not a failed evaluation.
    `seeds` reproduces an earlier evaluation (at least 3); by default fresh seeds are drawn.
    `distributions` restricts the input distributions (see engine.evaluator.inputs).
    """
    started = time.monotonic()
    language = get_definition(platform).language  # unknown platform: the caller's mistake, raised as ValueError
    # The language's own steps where its backends record a program (NKI's verifier), and its peak.
    attempt_class: type[Attempt] = find_part(language, "attempt") or Attempt
    peak_of = find_part(language, "peak")
    chosen = get_backend(backend)
    if seeds is not None and len(seeds) < MIN_SEEDS:
        raise ValueError(f"at least {MIN_SEEDS} seeds are needed, got {len(seeds)}")
    if peak_counts is not None:
        peak_counts = peak_kwargs(peak_counts)
    seed_list = tuple(int(s) % 2**32 for s in seeds) if seeds is not None else draw_seeds(MIN_SEEDS)
    context: dict[str, Any] = {
        "backend": chosen.name, "backend_version": chosen.version(), "perf_model_version": chosen.perf_model_version(),
        "platform": platform, "project_version": project_version(), "kernel_name": kernel_name or "",
    }

    def finish(result: EvaluationResult, attempts: int) -> EvaluationResult:
        return replace(result, wall_time_s=round(time.monotonic() - started, 4), attempts=attempts)

    guards = dict(ALL_GUARDS, **(_guards or {}))
    try:
        if guards.pop("static"):
            checked = check_kernel_source(kernel_source, kernel_name)
        else:  # tests proving the run-time layers hold on their own
            checked = CheckedKernel(find_kernel_name(ast.parse(kernel_source), kernel_name))
    except SyntaxError as exc:
        return finish(EvaluationResult.failure(ErrorKind.REJECTED, f"syntax error: {exc.msg}", line=exc.lineno,
                                               seeds=seed_list, **context), 0)
    except StaticCheckError as exc:
        return finish(EvaluationResult.failure(ErrorKind.REJECTED, exc.message, line=exc.line, seeds=seed_list,
                                               **context), 0)
    context["kernel_name"] = checked.kernel_name
    try:
        check_reference_source(reference_source)
    except StaticCheckError as exc:
        return finish(EvaluationResult.failure(ErrorKind.INFRASTRUCTURE_ERROR, f"the reference is broken: "
                                               f"{exc.message}", line=exc.line, seeds=seed_list, **context), 0)

    attempt = 0
    while True:
        attempt += 1
        job = attempt_class(
            backend=chosen, kernel_source=kernel_source, reference_source=reference_source,
            kernel_name=checked.kernel_name, platform=platform, seeds=seed_list, distributions=distributions,
            tolerance=checks.RELATIVE_L2_TOLERANCE if tolerance is None else float(tolerance), limits=limits,
            peak_counts=peak_counts, guards=guards, context=context, peak_of=peak_of,
        )
        try:
            return finish(job.run(), attempt)
        except Stop as stop:
            if stop.retry and attempt <= limits.infrastructure_retries:
                continue
            return finish(stop.result, attempt)
        except OSError as exc:  # could not start a child (no processes, no memory): ours, and transient
            if attempt <= limits.infrastructure_retries:
                continue
            return finish(EvaluationResult.failure(ErrorKind.INFRASTRUCTURE_ERROR, f"could not run the evaluation "
                                                   f"sandbox: {exc}", seeds=seed_list, **context), attempt)
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not be recorded against the kernel
            return finish(EvaluationResult.failure(
                ErrorKind.INFRASTRUCTURE_ERROR, f"the evaluation pipeline failed: {type(exc).__name__}: {exc}",
                error_detail=traceback.format_exc()[-8000:], seeds=seed_list, **context), attempt)
